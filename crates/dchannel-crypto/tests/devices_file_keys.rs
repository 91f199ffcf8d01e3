//! What the devices file refuses besides its syntax (issue 37, item 6): a
//! device key of small order (an all-zero placeholder above all), named by
//! file, line and device; a device name with a control character. The list of
//! small-order points and why they are refused: `src/low_order.rs`.

use dchannel_crypto::devices::parse_devices;
use dchannel_crypto::PrivateKey;

/// Two devices; the second one's `public_key` (line 7) is `key`, its name
/// (line 8) the TOML string `name` (quoted, with TOML's escapes).
fn file(name: &str, key: &str) -> String {
    let first = PrivateKey::generate().public_key();
    format!(
        "[[device]]\nname = \"phone-1\"\npublic_key = \"{first}\"\naddress = \"198.19.0.2\"\n\n\
         [[device]]\npublic_key = \"{key}\"\nname = {name}\naddress = \"198.19.0.3\"\n"
    )
}

#[test]
fn an_all_zero_device_key_is_refused_naming_the_line_and_device() {
    let zero = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="; // 32 zero bytes
    let e = parse_devices(&file("\"phone-2\"", zero), "/etc/dchannel/devices.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "/etc/dchannel/devices.toml: line 7: device \"phone-2\": field `public_key`: \
             bad key public_key: AAAA"
        ) && e.contains("small order"),
        "{e}"
    );
}

#[test]
fn every_small_order_key_is_refused_and_a_real_one_accepted() {
    // The seven encodings of libsodium's list (low_order.rs), in base64: 1, the
    // two points of order 8, p-1, p, p+1 (0 is the test above), each also with
    // the top bit set (X25519 ignores it, RFC 7748 §5).
    let small = [
        "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "4Ot6fDtBuK4WVuP68Z/EatoJjeucMrH9hmIFFl9JuAA=",
        "X5yVvKNQjCSx0LFVnIPvWwREXMRYHI6G2CJO3dCfEVc=",
        "7P///////////////////////////////////////38=",
        "7f///////////////////////////////////////38=",
        "7v///////////////////////////////////////38=",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA=",
        "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA=",
    ];
    for key in small {
        let e = parse_devices(&file("\"phone-2\"", key), "d.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("d.toml: line 7: device \"phone-2\"") && e.contains("small order"),
            "{key}: {e}"
        );
    }
    let real = PrivateKey::generate().public_key().to_base64();
    assert_eq!(
        parse_devices(&file("\"phone-2\"", &real), "d.toml")
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn a_device_name_with_a_control_character_is_refused_naming_the_line() {
    let real = PrivateKey::generate().public_key().to_base64();
    for name in [r#""phone\n2""#, r#""phone\u001b[31m""#, r#""tab\there""#] {
        let e = parse_devices(&file(name, &real), "d.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("d.toml: line 8: device")
                && e.contains("field `name`: contains the control character"),
            "{name:?}: {e}"
        );
    }
    // Quotes and backslashes are names like any other (metrics escape them).
    let d = parse_devices(&file(r#""o'brien \"2\" \\ lab""#, &real), "d.toml").unwrap();
    assert_eq!(d[1].name, "o'brien \"2\" \\ lab");
}
