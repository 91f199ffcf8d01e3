//! The gateway's list of devices: a TOML file with one `[[device]]` table per
//! device (docs/deploy.md):
//!
//! ```toml
//! [[device]]
//! name = "phone-1"                                        # unique, non-empty
//! public_key = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="  # unique
//! address = "198.19.0.2"                                  # optional tunnel address
//! ```
//!
//! Bad input is refused with the file, the line and the field: syntax errors,
//! unknown fields, missing fields, keys that are not 44 characters of base64
//! or of small order (all zeros and the like: `low_order.rs`), names with
//! control characters, duplicate names, keys or addresses, addresses that do
//! not parse.

use crate::keys::PublicKey;
use serde::Deserialize;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use toml::Spanned;

/// One configured device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Operator's name for it (unique in the file).
    pub name: String,
    /// Its static public key (unique in the file).
    pub public_key: PublicKey,
    /// Its tunnel address, if given.
    pub address: Option<IpAddr>,
}

/// A device file that could not be used; the message names file, line and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DevicesError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    device: Vec<RawDevice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Spanned<String>,
    public_key: Spanned<String>,
    #[serde(default)]
    address: Option<Spanned<String>>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Line numbers of increasing offsets, counting only the newlines between
/// one and the next (a file's devices come in order: linear, not quadratic).
struct LineCursor<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl LineCursor<'_> {
    fn line(&mut self, offset: usize) -> usize {
        if offset < self.at {
            return line_of(self.text, offset);
        }
        let end = offset.min(self.text.len());
        self.line += self.text.as_bytes()[self.at..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.at = end;
        self.line
    }
}

/// Parses a device file's text; `origin` (usually the path) names it in errors.
pub fn parse_devices(text: &str, origin: &str) -> Result<Vec<Device>, DevicesError> {
    Ok(parse_devices_with_lines(text, origin)?
        .into_iter()
        .map(|(d, _)| d)
        .collect())
}

/// [`parse_devices`], with the line of each device's `name`: for messages
/// about a device that is valid here but refused later (the gateway's live
/// configuration checks its address against the tunnel's prefixes).
pub fn parse_devices_with_lines(
    text: &str,
    origin: &str,
) -> Result<Vec<(Device, usize)>, DevicesError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| DevicesError(format!("{origin}: {e}")))?;
    // byte offsets of first occurrences; turned into line numbers only on error
    let mut by_key: HashMap<PublicKey, usize> = HashMap::with_capacity(raw.device.len());
    let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(raw.device.len());
    let mut by_addr: HashMap<IpAddr, usize> = HashMap::with_capacity(raw.device.len());
    let mut out = Vec::with_capacity(raw.device.len());
    let mut lines = LineCursor {
        text,
        at: 0,
        line: 1,
    };
    for d in &raw.device {
        let at = |s: &Spanned<String>| line_of(text, s.span().start);
        let name = d.name.get_ref().as_str();
        let fail = |line: usize, field: &str, what: String| {
            DevicesError(format!(
                "{origin}: line {line}: device {name:?}: field `{field}`: {what}"
            ))
        };
        if name.trim().is_empty() {
            return Err(fail(at(&d.name), "name", "must not be empty".into()));
        }
        // A newline in a name would forge log lines and `dchannel show` rows.
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            let what = format!("contains the control character {c:?} (names go into logs)");
            return Err(fail(at(&d.name), "name", what));
        }
        let key = PublicKey::from_base64(d.public_key.get_ref(), "public_key")
            .map_err(|e| fail(at(&d.public_key), "public_key", e.to_string()))?;
        if let Some(first) = by_key.insert(key, d.public_key.span().start) {
            return Err(fail(
                at(&d.public_key),
                "public_key",
                format!(
                    "the same key as the device on line {}",
                    line_of(text, first)
                ),
            ));
        }
        if let Some(first) = by_name.insert(name, d.name.span().start) {
            return Err(fail(
                at(&d.name),
                "name",
                format!("duplicates the name on line {}", line_of(text, first)),
            ));
        }
        let address = match &d.address {
            None => None,
            Some(a) => Some(a.get_ref().parse::<IpAddr>().map_err(|_| {
                fail(
                    at(a),
                    "address",
                    format!("{:?} is not an IPv4 or IPv6 address", a.get_ref()),
                )
            })?),
        };
        if let (Some(ip), Some(a)) = (address, &d.address) {
            if let Some(first) = by_addr.insert(ip, a.span().start) {
                return Err(fail(
                    at(a),
                    "address",
                    format!(
                        "{ip} is already the address of the device on line {}",
                        line_of(text, first)
                    ),
                ));
            }
        }
        let device = Device {
            name: name.to_string(),
            public_key: key,
            address,
        };
        out.push((device, lines.line(d.name.span().start)));
    }
    Ok(out)
}

/// Reads and parses a device file.
pub fn read_devices(path: &Path) -> Result<Vec<Device>, DevicesError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DevicesError(format!("{}: {e}", path.display())))?;
    parse_devices(&text, &path.display().to_string())
}

/// Writes devices in the format [`parse_devices`] reads (for tooling and tests).
pub fn format_devices(devices: &[Device]) -> String {
    let mut s = String::with_capacity(devices.len() * 110);
    for d in devices {
        s.push_str("[[device]]\n");
        s.push_str(&format!("name = {:?}\n", d.name));
        s.push_str(&format!("public_key = \"{}\"\n", d.public_key.to_base64()));
        if let Some(a) = d.address {
            s.push_str(&format!("address = \"{a}\"\n"));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::PrivateKey;

    const K1: &str = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";
    const K2: &str = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=";

    #[test]
    fn parses_devices_with_and_without_address() {
        let text = format!(
            "[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\naddress = \"198.19.0.2\"\n\n\
             [[device]]\nname = \"b\"\npublic_key = \"{K2}\"\n"
        );
        let d = parse_devices(&text, "devices.toml").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "a");
        assert_eq!(d[0].public_key.to_base64(), K1);
        assert_eq!(d[0].address, Some("198.19.0.2".parse().unwrap()));
        assert_eq!(d[1].address, None);
        assert_eq!(parse_devices(&format_devices(&d), "x").unwrap(), d);
        assert!(parse_devices("", "empty").unwrap().is_empty());
    }

    fn err(text: &str) -> String {
        parse_devices(text, "devices.toml").unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_input_naming_line_and_field() {
        // (file text, what the error must say)
        let cases: [(String, &[&str]); 8] = [
            (
                format!("[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\n[[device]]\nname = \"b\"\npublic_key = \"short\"\n"),
                &["devices.toml: line 6: device \"b\": field `public_key`", "5 characters"],
            ),
            (
                format!("[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\n[[device]]\nname = \"b\"\npublic_key = \"{K1}\"\n"),
                &["line 6", "same key as the device on line 3"],
            ),
            (
                format!("[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\n[[device]]\nname = \"a\"\npublic_key = \"{K2}\"\n"),
                &["line 5", "`name`", "line 2"],
            ),
            (
                format!("[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\naddress = \"10.0.0.300\"\n"),
                &["line 4", "`address`", "10.0.0.300"],
            ),
            (
                format!("[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\naddress = \"198.19.0.2\"\n[[device]]\nname = \"b\"\npublic_key = \"{K2}\"\naddress = \"198.19.0.2\"\n"),
                &["devices.toml: line 8: device \"b\": field `address`", "198.19.0.2 is already the address of the device on line 4"],
            ),
            (
                format!("[[device]]\nname = \"a\"\npublic_key = \"{K1}\"\nkey = 1\n"),
                &["unknown field `key`", "line 4"],
            ),
            (
                "[[device]]\nname = \"a\"\n".into(),
                &["missing field `public_key`"],
            ),
            (
                format!("[[device]]\nname = \"  \"\npublic_key = \"{K1}\"\n"),
                &["line 2", "must not be empty"],
            ),
        ];
        for (text, says) in &cases {
            let e = err(text);
            for s in *says {
                assert!(e.contains(s), "{s:?} not in {e}");
            }
        }
        let e = err("[[device]\n");
        assert!(
            e.starts_with("devices.toml:") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn ten_thousand_devices_load_fast() {
        let devices: Vec<Device> = (0..10_000)
            .map(|i| Device {
                name: format!("dev-{i}"),
                public_key: PrivateKey::from_bytes([(i % 251) as u8; 32])
                    .public_key()
                    .0
                    .map(|b| b ^ (i as u8))
                    .into(),
                address: None,
            })
            .collect();
        // keys made unique by index bytes
        let devices: Vec<Device> = devices
            .into_iter()
            .enumerate()
            .map(|(i, mut d)| {
                d.public_key.0[..4].copy_from_slice(&(i as u32).to_be_bytes());
                d
            })
            .collect();
        let text = format_devices(&devices);
        let t = std::time::Instant::now();
        let parsed = parse_devices(&text, "big").unwrap();
        let took = t.elapsed();
        assert_eq!(parsed.len(), 10_000);
        assert_eq!(parsed[9_999], devices[9_999]);
        eprintln!(
            "10,000 devices ({} KiB) parsed in {:?}",
            text.len() / 1024,
            took
        );
        assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    }
}
