//! The Noise IK handshake (`Noise_IK_25519_ChaChaPoly_BLAKE2s`, the `snow`
//! crate), one round trip:
//!
//! ```text
//! initiator -> responder   initiation: 0x21 | sender index | msg1 = e, es, s, ss, {cipher, sender index, stamp} | mac1 | mac2
//! responder -> initiator   response:   0x22 | receiver index | msg2 = e, ee, se, {sender index} | mac1
//! ```
//!
//! The initiator knows the responder's static key beforehand (IK); the
//! responder learns the initiator's from message 1 and looks it up in its
//! table. The stamp (wall-clock nanoseconds, strictly increasing per
//! initiator) lets the responder refuse a replayed message 1. The sender
//! indices travel encrypted; the response's receiver index is in clear so the
//! initiator can find its handshake. Both transport keys come from the Noise
//! split: the first encrypts initiator→responder, the second the other way.
//! Message 1 must fit [`crate::format::INITIATION_LEN`] bytes exactly and
//! message 2 [`crate::format::RESPONSE_LEN`]; anything else is invalid.
//! Each message's mac1 ([`crate::mac`], keyed by its receiver's public key)
//! is written here; the receiver checks it before calling in here, and the
//! initiation's mac2 is the caller's ([`crate::cookie`]).

use crate::aead::Cipher;
use crate::format::field::{self, init_payload};
use crate::format::{
    read_u32, read_u64, INITIATION_LEN, INIT_PAYLOAD_LEN, RESPONSE_LEN, RESP_PAYLOAD_LEN,
    TYPE_INITIATION, TYPE_RESPONSE,
};
use crate::keys::{PrivateKey, PublicKey};
use crate::mac::{self, Mac};
use crate::session::Session;
use crate::{CryptoDrop, Nanos};
use snow::params::NoiseParams;
use snow::{Builder, HandshakeState};

/// The Noise protocol name.
pub const NOISE_PATTERN: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";
/// Prologue mixed into the handshake hash (a different protocol never agrees).
pub const PROLOGUE: &[u8] = b"dchannel-crypto v1";

/// The parsed Noise parameters (parse once, clone per handshake).
pub fn params() -> NoiseParams {
    NOISE_PATTERN.parse().expect("valid Noise pattern")
}

/// An initiation we sent and await the response to.
pub struct InFlight {
    state: Box<HandshakeState>,
    /// Our index for the new session (the response's receiver index).
    pub local_index: u32,
    /// The transport cipher we proposed.
    pub cipher: Cipher,
    /// The mac1 of the initiation (a cookie reply to it is bound to it).
    pub mac1: Mac,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InFlight(index {})", self.local_index)
    }
}

/// Writes an initiation datagram to `out[..INITIATION_LEN]`, mac1 included
/// and mac2 zero.
pub fn initiate(
    params: &NoiseParams,
    local: &PrivateKey,
    remote: &PublicKey,
    cipher: Cipher,
    local_index: u32,
    stamp: u64,
    out: &mut [u8],
) -> InFlight {
    let mut state = Builder::new(params.clone())
        .local_private_key(local.as_bytes())
        .and_then(|b| b.remote_public_key(&remote.0))
        .and_then(|b| b.prologue(PROLOGUE))
        .and_then(|b| b.build_initiator())
        .expect("IK initiator with both keys");
    let mut payload = [0u8; INIT_PAYLOAD_LEN];
    payload[init_payload::CIPHER] = cipher.to_byte();
    payload[init_payload::SENDER_INDEX].copy_from_slice(&local_index.to_be_bytes());
    payload[init_payload::STAMP].copy_from_slice(&stamp.to_be_bytes());
    out[field::TYPE] = TYPE_INITIATION;
    out[field::INIT_SENDER_INDEX].copy_from_slice(&local_index.to_be_bytes());
    let n = state
        .write_message(&payload, &mut out[field::NOISE_MSG1])
        .expect("message 1 fits");
    debug_assert_eq!(n, field::NOISE_MSG1.len());
    let mac1 = mac::write(&mac::mac1_key(remote), out, field::INIT_MAC1);
    out[field::INIT_MAC2].fill(0);
    InFlight {
        state: Box::new(state),
        local_index,
        cipher,
        mac1,
    }
}

/// A valid initiation, read by the responder, not yet answered.
pub struct Received {
    state: Box<HandshakeState>,
    /// The initiator's static key (authenticated by message 1).
    pub remote_static: PublicKey,
    /// The transport cipher the initiator asked for.
    pub cipher: Cipher,
    /// The initiator's index for the session.
    pub remote_index: u32,
    /// The initiator's stamp (must exceed the last accepted one).
    pub stamp: u64,
}

/// Reads an initiation datagram (type byte included; its MACs checked by the
/// caller). Costs two X25519 operations: rate-limit before calling.
pub fn read_initiation(
    params: &NoiseParams,
    local: &PrivateKey,
    dgram: &[u8],
) -> Result<Received, CryptoDrop> {
    if dgram.len() != INITIATION_LEN {
        return Err(if dgram.len() < INITIATION_LEN {
            CryptoDrop::Truncated
        } else {
            CryptoDrop::HandshakeInvalid
        });
    }
    let mut state = Builder::new(params.clone())
        .local_private_key(local.as_bytes())
        .and_then(|b| b.prologue(PROLOGUE))
        .and_then(|b| b.build_responder())
        .expect("IK responder with a local key");
    let mut payload = [0u8; 64];
    let n = state
        .read_message(&dgram[field::NOISE_MSG1], &mut payload)
        .map_err(|_| CryptoDrop::HandshakeInvalid)?;
    // the clear copy of the sender index must be the authenticated one
    if n != INIT_PAYLOAD_LEN
        || payload[init_payload::SENDER_INDEX] != dgram[field::INIT_SENDER_INDEX]
    {
        return Err(CryptoDrop::HandshakeInvalid);
    }
    let cipher =
        Cipher::from_byte(payload[init_payload::CIPHER]).ok_or(CryptoDrop::HandshakeInvalid)?;
    let rs: [u8; 32] = state
        .get_remote_static()
        .and_then(|k| k.try_into().ok())
        .ok_or(CryptoDrop::HandshakeInvalid)?;
    Ok(Received {
        state: Box::new(state),
        remote_static: PublicKey(rs),
        cipher,
        remote_index: read_u32(&payload, init_payload::SENDER_INDEX),
        stamp: read_u64(&payload, init_payload::STAMP),
    })
}

impl Received {
    /// Writes the response (mac1 keyed by the initiator's public key) to
    /// `out[..RESPONSE_LEN]` and returns the new session (responder side).
    pub fn respond(mut self, local_index: u32, now: Nanos, out: &mut [u8]) -> Session {
        out[field::TYPE] = TYPE_RESPONSE;
        out[field::RECEIVER_INDEX].copy_from_slice(&self.remote_index.to_be_bytes());
        let n = self
            .state
            .write_message(&local_index.to_be_bytes(), &mut out[field::NOISE_MSG2])
            .expect("message 2 fits");
        debug_assert_eq!(n, field::NOISE_MSG2.len());
        mac::write(&mac::mac1_key(&self.remote_static), out, field::RESP_MAC1);
        let (mut i2r, mut r2i) = self.state.dangerously_get_raw_split();
        Session::new(
            self.cipher,
            &mut r2i,
            &mut i2r,
            local_index,
            self.remote_index,
            now,
            false,
        )
    }
}

/// The receiver index of a response datagram, if it is long enough to have one.
pub fn response_index(dgram: &[u8]) -> Option<u32> {
    (dgram.len() >= field::RECEIVER_INDEX.end).then(|| read_u32(dgram, field::RECEIVER_INDEX))
}

impl InFlight {
    /// Reads the response; on success returns the new session (initiator side).
    /// On failure the handshake stays usable for the genuine response.
    pub fn complete(&mut self, dgram: &[u8], now: Nanos) -> Result<Session, CryptoDrop> {
        if dgram.len() != RESPONSE_LEN {
            return Err(if dgram.len() < RESPONSE_LEN {
                CryptoDrop::Truncated
            } else {
                CryptoDrop::HandshakeInvalid
            });
        }
        let mut payload = [0u8; 64];
        let n = self
            .state
            .read_message(&dgram[field::NOISE_MSG2], &mut payload)
            .map_err(|_| CryptoDrop::HandshakeInvalid)?;
        if n != RESP_PAYLOAD_LEN {
            return Err(CryptoDrop::HandshakeInvalid);
        }
        let remote_index = read_u32(&payload, field::RESP_SENDER_INDEX);
        let (mut i2r, mut r2i) = self.state.dangerously_get_raw_split();
        Ok(Session::new(
            self.cipher,
            &mut i2r,
            &mut r2i,
            self.local_index,
            remote_index,
            now,
            true,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{PREFIX_LEN, TAG_LEN};
    use crate::Channel;

    #[test]
    fn ik_round_trip_gives_matching_sessions() {
        let p = params();
        let (ik, rk) = (PrivateKey::generate(), PrivateKey::generate());
        let mut m1 = [0u8; INITIATION_LEN];
        let mut fl = initiate(
            &p,
            &ik,
            &rk.public_key(),
            Cipher::ChaCha20Poly1305,
            111,
            42,
            &mut m1,
        );
        let rx = read_initiation(&p, &rk, &m1).unwrap();
        assert_eq!(rx.remote_static, ik.public_key());
        assert_eq!(
            (rx.cipher, rx.remote_index, rx.stamp),
            (Cipher::ChaCha20Poly1305, 111, 42)
        );
        let mut m2 = [0u8; RESPONSE_LEN];
        let mut rs = rx.respond(222, 5, &mut m2);
        assert_eq!(response_index(&m2), Some(111));
        let mut is = fl.complete(&m2, 6).unwrap();
        assert_eq!((is.local_index, is.remote_index), (111, 222));
        assert_eq!((rs.local_index, rs.remote_index), (222, 111));
        let mut buf = [0u8; PREFIX_LEN + 3 + TAG_LEN];
        buf[PREFIX_LEN..PREFIX_LEN + 3].copy_from_slice(b"abc");
        let n = is.seal(Channel::Hbc, &mut buf, 0, 3);
        rs.open(Channel::Hbc, &mut buf[..n], 0, u64::MAX).unwrap();
        assert_eq!(&buf[PREFIX_LEN..PREFIX_LEN + 3], b"abc");
        let mut buf = [0u8; PREFIX_LEN + 3 + TAG_LEN];
        let n = rs.seal(Channel::Llc, &mut buf, 0, 3);
        is.open(Channel::Llc, &mut buf[..n], 0, u64::MAX).unwrap();
    }

    #[test]
    fn each_message_carries_its_receivers_mac1_and_the_clear_index_must_match() {
        let p = params();
        let (ik, rk) = (PrivateKey::generate(), PrivateKey::generate());
        let mut m1 = [0u8; INITIATION_LEN];
        let fl = initiate(&p, &ik, &rk.public_key(), Cipher::Aes256Gcm, 77, 1, &mut m1);
        let for_responder = mac::mac1_key(&rk.public_key());
        assert!(mac::verify(&for_responder, &m1, field::INIT_MAC1));
        assert_eq!(fl.mac1, m1[field::INIT_MAC1]);
        assert_eq!(m1[field::INIT_MAC2], [0; 16], "no cookie: zero mac2");
        assert_eq!(m1[field::INIT_SENDER_INDEX], 77u32.to_be_bytes());
        let mut m2 = [0u8; RESPONSE_LEN];
        let _ = read_initiation(&p, &rk, &m1)
            .unwrap()
            .respond(5, 0, &mut m2);
        let for_initiator = mac::mac1_key(&ik.public_key());
        assert!(mac::verify(&for_initiator, &m2, field::RESP_MAC1));
        assert!(!mac::verify(&for_responder, &m2, field::RESP_MAC1));
        // a clear index that is not the encrypted one
        let mut other = m1;
        other[field::INIT_SENDER_INDEX].copy_from_slice(&78u32.to_be_bytes());
        assert_eq!(
            read_initiation(&p, &rk, &other).err(),
            Some(CryptoDrop::HandshakeInvalid)
        );
    }

    #[test]
    fn wrong_responder_key_and_tampering_are_invalid() {
        let p = params();
        let (ik, rk, other) = (
            PrivateKey::generate(),
            PrivateKey::generate(),
            PrivateKey::generate(),
        );
        let mut m1 = [0u8; INITIATION_LEN];
        let mut fl = initiate(&p, &ik, &rk.public_key(), Cipher::Aes256Gcm, 1, 1, &mut m1);
        assert_eq!(
            read_initiation(&p, &other, &m1).err(),
            Some(CryptoDrop::HandshakeInvalid)
        );
        let mut bad = m1;
        bad[60] ^= 1;
        assert_eq!(
            read_initiation(&p, &rk, &bad).err(),
            Some(CryptoDrop::HandshakeInvalid)
        );
        assert_eq!(
            read_initiation(&p, &rk, &m1[..50]).err(),
            Some(CryptoDrop::Truncated)
        );
        // a forged response does not spoil the handshake for the real one
        let mut m2 = [0u8; RESPONSE_LEN];
        let _rs = read_initiation(&p, &rk, &m1)
            .unwrap()
            .respond(9, 0, &mut m2);
        let mut forged = m2;
        forged[30] ^= 0x80;
        assert_eq!(
            fl.complete(&forged, 0).err(),
            Some(CryptoDrop::HandshakeInvalid)
        );
        assert!(fl.complete(&m2, 0).is_ok());
    }
}
