//! The rule: every handshake message ends with `mac1`, a MAC keyed by the
//! *receiver's* static public key over every byte before it, and the receiver
//! checks it before it spends anything on the message: no rate-limit token,
//! no state, no Diffie-Hellman (WireGuard, Donenfeld, NDSS 2017, §5.4.4).
//!
//! ```text
//! mac1 = MAC(HASH("mac1----" || receiver's static public key), msg[..mac1 offset])
//! HASH = BLAKE2s-256                MAC(key, x) = keyed BLAKE2s with a 16-byte output
//! ```
//!
//! Why: an initiation costs the responder two X25519 operations to read and
//! two more to answer; without mac1 any 146 bytes of the right type reach
//! that code (and, before it, the rate limiter that genuine devices share).
//! With it, a sender must know the gateway's public key to cost it more than
//! one BLAKE2s; a junk flood is dropped (`bad_mac1`) for about the price of
//! receiving it. mac1 is not authentication (the key is public to every
//! device): Noise does that; mac1 only makes the message "addressed to us".
//! The second MAC (`mac2`, keyed by a cookie proving the source address) is in
//! [`crate::cookie`].

use crate::format::MAC_LEN;
use crate::keys::PublicKey;
use blake2::digest::{FixedOutput, KeyInit, Mac as _, Update};
use blake2::{Blake2s256, Blake2sMac, Digest};
use std::ops::Range;

/// A handshake MAC or a cookie (16 bytes).
pub type Mac = [u8; MAC_LEN];

/// Keyed BLAKE2s with a 16-byte output (the output length is part of
/// BLAKE2's parameter block: this is not a truncated 32-byte MAC).
type Blake2sMac128 = Blake2sMac<blake2::digest::consts::U16>;

/// Label of the mac1 key.
const LABEL_MAC1: &[u8; 8] = b"mac1----";
/// Label of the key that encrypts cookie replies.
const LABEL_COOKIE: &[u8; 8] = b"cookie--";

/// BLAKE2s-256 of `label || key`: the key derivations of §5.4.4 and §5.4.7.
fn hash(label: &[u8; 8], key: &PublicKey) -> [u8; 32] {
    let mut h = Blake2s256::new();
    Digest::update(&mut h, label);
    Digest::update(&mut h, key.0);
    h.finalize().into()
}

/// The key of the mac1 of messages sent to `receiver`.
pub fn mac1_key(receiver: &PublicKey) -> [u8; 32] {
    hash(LABEL_MAC1, receiver)
}

/// The XChaCha20-Poly1305 key of the cookie replies `responder` sends.
pub fn cookie_key(responder: &PublicKey) -> [u8; 32] {
    hash(LABEL_COOKIE, responder)
}

fn keyed(key: &[u8]) -> Blake2sMac128 {
    // BLAKE2s takes keys of 1 to 32 bytes; ours are 32 (a hash) or 16 (a cookie).
    <Blake2sMac128 as KeyInit>::new_from_slice(key).expect("a key of 1 to 32 bytes")
}

/// `MAC(key, data)`: keyed BLAKE2s-128.
pub fn mac(key: &[u8], data: &[u8]) -> Mac {
    let mut m = keyed(key);
    Update::update(&mut m, data);
    m.finalize_fixed().into()
}

/// Writes `msg[at]` = MAC(`key`, `msg[..at.start]`) and returns it (mac1 and
/// mac2 alike: each covers every byte before it).
pub fn write(key: &[u8], msg: &mut [u8], at: Range<usize>) -> Mac {
    let m = mac(key, &msg[..at.start]);
    msg[at].copy_from_slice(&m);
    m
}

/// Whether `msg[at]` is MAC(`key`, `msg[..at.start]`), compared in constant
/// time. `msg` must be long enough (the caller checked the message's length).
pub fn verify(key: &[u8], msg: &[u8], at: Range<usize>) -> bool {
    let mut m = keyed(key);
    Update::update(&mut m, &msg[..at.start]);
    m.verify_slice(&msg[at]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Expected values computed independently with Python's hashlib
    /// (`hashlib.blake2s(data, key=key, digest_size=16)` and
    /// `hashlib.blake2s(b"mac1----" + pub)`), the construction of WireGuard
    /// §5.4.4: a MAC with a 16-byte *parameter* differs from a truncated
    /// 32-byte one.
    #[test]
    fn constructions_match_an_independent_blake2s() {
        let pk = PublicKey([7u8; 32]);
        assert_eq!(
            mac1_key(&pk).to_vec(),
            hex("ad12395d018396ce38e3746dec16720d5fb99e24b77324cbb3a760369d8c9970"),
            "BLAKE2s-256(\"mac1----\" || 07*32)"
        );
        assert_eq!(
            cookie_key(&pk).to_vec(),
            hex("b3b0667561efd4db785bd400e3efbda65838093a56466300d7f65b6e01de3d72"),
            "BLAKE2s-256(\"cookie--\" || 07*32)"
        );
        assert_eq!(
            mac(&[1u8; 32], b"abc").to_vec(),
            hex("6c5a9b2dd4324520e222cce7e29e8711"),
            "keyed BLAKE2s-128"
        );
        assert_eq!(
            mac(&[2u8; 16], b"").to_vec(),
            hex("826d93c0f0f9194a1316dc4fa1735024")
        );
        // the first half of the 32-byte keyed BLAKE2s of "abc" is another value
        assert_ne!(
            mac(&[1u8; 32], b"abc").to_vec(),
            hex("cc2b80f11299bdf9f7d3c77a4e696c87")
        );
    }

    #[test]
    fn write_then_verify_and_any_flipped_bit_fails() {
        let key = mac1_key(&PublicKey([9u8; 32]));
        let mut msg = [0x5au8; 48];
        let m = write(&key, &mut msg, 32..48);
        assert_eq!(msg[32..48], m);
        assert_eq!(m, mac(&key, &[0x5au8; 32]));
        assert!(verify(&key, &msg, 32..48));
        for i in 0..48 {
            let mut bad = msg;
            bad[i] ^= 0x01;
            assert!(!verify(&key, &bad, 32..48), "byte {i} flipped");
        }
        let other = mac1_key(&PublicKey([8u8; 32]));
        assert!(!verify(&other, &msg, 32..48), "another receiver's key");
    }
}
