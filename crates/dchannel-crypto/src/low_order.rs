//! Rule: a public key whose low 255 bits are one of the seven small-order
//! X25519 encodings below is no key at all, and is refused wherever a public
//! key enters the configuration (devices file, `--gateway-key`).
//!
//! Why: X25519 with such a point gives the same output (all zeros) for every
//! private key (clamped scalars are multiples of 8, and these points have
//! order 1, 2, 4 or 8). In Noise IK the initiator proves it holds the private
//! key of its static public key only through `ss` = DH(its static, the
//! responder's static); with a device key of small order `ss` is zero, so
//! anyone who knows the gateway's public key could pose as that device. An
//! all-zero key (a placeholder left in a devices file) is the common case.
//!
//! The list is libsodium's `has_small_order` blacklist
//! (src/libsodium/crypto_scalarmult/curve25519/ref10/x25519_ref10.c): 0, 1,
//! the two points of order 8, and p−1, p, p+1 (p = 2^255 − 19; p and p+1 are
//! non-canonical encodings of 0 and 1), compared with the top bit ignored as
//! RFC 7748 §5 requires of every decoder. Bernstein's list of twelve
//! (https://cr.yp.to/ecdh.html, "How do I validate Curve25519 public keys?")
//! is the same set for decoders that do not ignore the top bit; WireGuard
//! (Linux `curve25519()` and wireguard-go) refuses the same keys at run time
//! by refusing an all-zero DH result. The tests check every entry by that
//! very property.

use crate::keys::KEY_LEN;

/// The small-order encodings (little-endian u-coordinates, top bit clear).
const SMALL_ORDER: [[u8; KEY_LEN]; 7] = [
    // 0 (order 4)
    [0; 32],
    // 1 (order 1)
    [
        1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0,
    ],
    // 325606250916557431795983626356110631294008115727848805560023387167927233504 (order 8)
    [
        0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4,
        0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49,
        0xb8, 0x00,
    ],
    // 39382357235489614581723060781553021112529911719440698176882885853963445705823 (order 8)
    [
        0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef,
        0x5b, 0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f,
        0x11, 0x57,
    ],
    // p - 1 (order 2)
    p_plus(0xec),
    // p (= 0)
    p_plus(0xed),
    // p + 1 (= 1)
    p_plus(0xee),
];

/// p − 1, p or p + 1 by its lowest byte (0xec, 0xed, 0xee): 0xff… then 0x7f.
const fn p_plus(low: u8) -> [u8; KEY_LEN] {
    let mut b = [0xff; KEY_LEN];
    b[0] = low;
    b[31] = 0x7f;
    b
}

/// Whether `key` is one of the small-order encodings (top bit ignored).
/// Constant in time is not needed: public keys are public.
pub fn is_small_order(key: &[u8; KEY_LEN]) -> bool {
    let mut low = *key;
    low[31] &= 0x7f;
    SMALL_ORDER.contains(&low)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::PrivateKey;
    use curve25519_dalek::montgomery::MontgomeryPoint;

    #[test]
    fn every_listed_point_gives_an_all_zero_shared_secret() {
        // The property the list stands for (RFC 7748 §6.1: "check for the all-zero
        // value"), for two random private keys, with the top bit clear and set.
        for _ in 0..2 {
            let k = PrivateKey::generate();
            for p in SMALL_ORDER {
                for top in [0, 0x80] {
                    let mut u = p;
                    u[31] |= top;
                    assert!(is_small_order(&u), "{u:02x?}");
                    let shared = MontgomeryPoint(u).mul_clamped(*k.as_bytes());
                    assert_eq!(shared.to_bytes(), [0; 32], "{u:02x?}");
                }
            }
        }
    }

    #[test]
    fn real_keys_are_not_small_order_and_the_list_has_no_duplicates() {
        for _ in 0..1000 {
            assert!(!is_small_order(&PrivateKey::generate().public_key().0));
        }
        // 2: a point of large order right next to 0 and 1.
        let mut two = [0u8; 32];
        two[0] = 2;
        assert!(!is_small_order(&two));
        for (i, a) in SMALL_ORDER.iter().enumerate() {
            assert!(SMALL_ORDER[i + 1..].iter().all(|b| b != a));
            assert_eq!(a[31] & 0x80, 0, "stored with the top bit clear");
        }
    }
}
