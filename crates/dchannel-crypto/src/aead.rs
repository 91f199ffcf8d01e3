//! The per-datagram AEAD of the transport: AES-256-GCM or ChaCha20-Poly1305
//! from `ring` (assembly, AES-NI/PCLMUL or AVX2), in place, no allocation.
//!
//! Nonce (96 bit): `channel (u8) | 0 0 0 | counter (u64, big-endian)`. Each
//! direction of a session has its own key and each channel its own counter
//! space, so a (key, nonce) pair is never used twice, and a datagram replayed
//! onto the other channel does not authenticate.

use crate::Channel;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use zeroize::Zeroize;

/// The transport cipher. The initiator picks it (sent in the handshake); the
/// responder follows. See docs/benchmarks.md for the measured speeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Cipher {
    /// AES-256-GCM: fastest where the CPU has AES and carry-less multiply
    /// instructions (x86-64 AES-NI + PCLMULQDQ, ARMv8 crypto extensions).
    #[default]
    Aes256Gcm = 1,
    /// ChaCha20-Poly1305: fastest on CPUs without AES instructions.
    ChaCha20Poly1305 = 2,
}

impl Cipher {
    /// The wire byte of this cipher.
    pub fn to_byte(self) -> u8 {
        self as u8
    }

    /// Parses the wire byte.
    pub fn from_byte(b: u8) -> Option<Cipher> {
        match b {
            1 => Some(Cipher::Aes256Gcm),
            2 => Some(Cipher::ChaCha20Poly1305),
            _ => None,
        }
    }

    /// Name as used in configs and docs (`aes256gcm`, `chacha20poly1305`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "aes256gcm",
            Cipher::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }

    fn algorithm(self) -> &'static aead::Algorithm {
        match self {
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
}

impl std::str::FromStr for Cipher {
    type Err = String;
    fn from_str(s: &str) -> Result<Cipher, String> {
        match s {
            "aes256gcm" | "aes-256-gcm" => Ok(Cipher::Aes256Gcm),
            "chacha20poly1305" | "chacha20-poly1305" => Ok(Cipher::ChaCha20Poly1305),
            _ => Err(format!(
                "unknown cipher {s:?}, expected aes256gcm or chacha20poly1305"
            )),
        }
    }
}

/// The key of one direction of a session.
pub struct TransportKey {
    key: LessSafeKey,
    cipher: Cipher,
}

impl std::fmt::Debug for TransportKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TransportKey({})", self.cipher.as_str())
    }
}

/// The nonce of datagram `counter` on `channel`.
pub fn nonce(channel: Channel, counter: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[0] = channel as u8;
    n[4..].copy_from_slice(&counter.to_be_bytes());
    n
}

impl TransportKey {
    /// A key from 32 bytes of key material (wiped from `raw` afterwards).
    pub fn new(cipher: Cipher, raw: &mut [u8; 32]) -> TransportKey {
        let unbound =
            UnboundKey::new(cipher.algorithm(), raw).expect("32-byte key for a 256-bit AEAD");
        raw.zeroize();
        TransportKey {
            key: LessSafeKey::new(unbound),
            cipher,
        }
    }

    /// The cipher of this key.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Encrypts `data` in place and writes the 16-byte tag to `tag`.
    pub fn seal(&self, channel: Channel, counter: u64, ad: &[u8], data: &mut [u8], tag: &mut [u8]) {
        let t = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce(channel, counter)),
                Aad::from(ad),
                data,
            )
            .expect("datagram below the AEAD length limit");
        tag.copy_from_slice(t.as_ref());
    }

    /// Decrypts `data_and_tag` (ciphertext followed by the tag) in place; on
    /// success the first `len - 16` bytes are the plaintext; a tag that does not
    /// verify is [`crate::CryptoDrop::AuthFailed`].
    pub fn open(
        &self,
        channel: Channel,
        counter: u64,
        ad: &[u8],
        data_and_tag: &mut [u8],
    ) -> Result<(), crate::CryptoDrop> {
        self.key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce(channel, counter)),
                Aad::from(ad),
                data_and_tag,
            )
            .map(|_| ())
            .map_err(|_| crate::CryptoDrop::AuthFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonce_layout() {
        assert_eq!(
            nonce(Channel::Llc, 0x0102_0304_0506_0708),
            [1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(nonce(Channel::Hbc, 0), [0; 12]);
    }

    #[test]
    fn round_trip_and_channel_binding_for_both_ciphers() {
        for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            let k = TransportKey::new(cipher, &mut [7u8; 32]);
            let mut data = *b"hello, channel";
            let mut tag = [0u8; 16];
            k.seal(Channel::Hbc, 9, b"ad", &mut data, &mut tag);
            assert_ne!(&data, b"hello, channel");
            let mut wire = data.to_vec();
            wire.extend_from_slice(&tag);
            let mut wrong_channel = wire.clone();
            assert!(k.open(Channel::Llc, 9, b"ad", &mut wrong_channel).is_err());
            let mut wrong_ad = wire.clone();
            assert!(k.open(Channel::Hbc, 9, b"aD", &mut wrong_ad).is_err());
            let mut wrong_counter = wire.clone();
            assert!(k.open(Channel::Hbc, 10, b"ad", &mut wrong_counter).is_err());
            assert!(k.open(Channel::Hbc, 9, b"ad", &mut wire).is_ok());
            assert_eq!(&wire[..14], b"hello, channel");
        }
    }

    #[test]
    fn cipher_bytes_and_names() {
        for c in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            assert_eq!(Cipher::from_byte(c.to_byte()), Some(c));
            assert_eq!(c.as_str().parse::<Cipher>(), Ok(c));
        }
        assert_eq!(Cipher::from_byte(0), None);
        assert!("rot13".parse::<Cipher>().unwrap_err().contains("rot13"));
    }
}
