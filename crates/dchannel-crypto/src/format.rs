//! Byte layout of the encrypted datagrams (docs/wire.md, "Encrypted datagrams").
//!
//! The first byte is the message type. Its high nibble is 2, so a version-1
//! (plaintext, `0x1?`) decoder rejects every encrypted datagram as an unknown
//! version, and a driver dispatches on `byte0 >> 4`.
//!
//! ```text
//! transport    : 0x20 | receiver index u32 | counter u64 | header (H) | ciphertext | tag 16
//! keepalive    : 0x20 | receiver index u32 | counter u64 | tag 16            (no header, no payload)
//! initiation   : 0x21 | sender index u32 | Noise IK message 1 (e, s, payload: cipher u8, sender index u32, stamp u64) | mac1 16 | mac2 16
//! response     : 0x22 | receiver index u32 | Noise IK message 2 (e, payload: sender index u32) | mac1 16
//! cookie reply : 0x23 | receiver index u32 | nonce 24 | encrypted cookie 16 | tag 16
//! ```
//!
//! `mac1` covers every byte before it, `mac2` every byte before it (mac1
//! included); see [`crate::mac`] and [`crate::cookie`] (WireGuard §5.4.4–5.4.7).
//! The initiation's sender index travels in clear too (a cookie reply names
//! the initiation it answers by it); the responder uses the encrypted copy
//! and refuses an initiation whose two copies differ.
//!
//! All integers are big-endian. The associated data of a transport datagram is
//! everything before the ciphertext (type, index, counter and the header).

/// Byte ranges of the fields of the encrypted datagrams (smoltcp style).
pub mod field {
    use std::ops::Range;

    /// The message type (every datagram).
    pub const TYPE: usize = 0;
    /// Transport and response: the receiver's session index (u32).
    pub const RECEIVER_INDEX: Range<usize> = 1..5;
    /// Transport: the per-channel counter (u64).
    pub const COUNTER: Range<usize> = 5..13;
    /// Transport: where the dchannel header starts (after the prefix).
    pub const HEADER: usize = COUNTER.end;
    /// Initiation: the initiator's session index in clear (u32; a cookie
    /// reply names it as its receiver index).
    pub const INIT_SENDER_INDEX: Range<usize> = 1..5;
    /// Initiation: Noise message 1.
    pub const NOISE_MSG1: Range<usize> =
        INIT_SENDER_INDEX.end..INIT_SENDER_INDEX.end + super::NOISE_MSG1_LEN;
    /// Initiation: mac1 over every byte before it ([`crate::mac`]).
    pub const INIT_MAC1: Range<usize> = NOISE_MSG1.end..NOISE_MSG1.end + super::MAC_LEN;
    /// Initiation: mac2 over every byte before it, zero without a cookie ([`crate::cookie`]).
    pub const INIT_MAC2: Range<usize> = INIT_MAC1.end..INIT_MAC1.end + super::MAC_LEN;
    /// Response: Noise message 2.
    pub const NOISE_MSG2: Range<usize> =
        RECEIVER_INDEX.end..RECEIVER_INDEX.end + super::NOISE_MSG2_LEN;
    /// Response: mac1 over every byte before it.
    pub const RESP_MAC1: Range<usize> = NOISE_MSG2.end..NOISE_MSG2.end + super::MAC_LEN;
    /// Cookie reply: the random XChaCha20-Poly1305 nonce.
    pub const COOKIE_NONCE: Range<usize> = RECEIVER_INDEX.end..RECEIVER_INDEX.end + 24;
    /// Cookie reply: the encrypted cookie and its tag.
    pub const COOKIE_SEALED: Range<usize> =
        COOKIE_NONCE.end..COOKIE_NONCE.end + super::MAC_LEN + super::TAG_LEN;

    /// The initiation's payload, encrypted inside Noise message 1.
    pub mod init_payload {
        use std::ops::Range;

        /// The proposed cipher (1 = AES-256-GCM, 2 = ChaCha20-Poly1305).
        pub const CIPHER: usize = 0;
        /// The initiator's session index (u32).
        pub const SENDER_INDEX: Range<usize> = 1..5;
        /// The initiator's stamp (u64, wall-clock ns, strictly increasing).
        pub const STAMP: Range<usize> = 5..13;
    }

    /// The response's payload, encrypted inside Noise message 2: the
    /// responder's session index (u32).
    pub const RESP_SENDER_INDEX: Range<usize> = 0..4;
}

use std::ops::Range;

/// Type byte of a transport (data or keepalive) datagram.
pub const TYPE_TRANSPORT: u8 = 0x20;
/// Type byte of a handshake initiation.
pub const TYPE_INITIATION: u8 = 0x21;
/// Type byte of a handshake response.
pub const TYPE_RESPONSE: u8 = 0x22;
/// Type byte of a cookie reply (the responder, under load, to an initiation
/// without a valid mac2).
pub const TYPE_COOKIE_REPLY: u8 = 0x23;
/// Bytes of a handshake MAC (mac1, mac2) and of a cookie: BLAKE2s-128.
pub const MAC_LEN: usize = 16;

/// Bytes before the header in a transport datagram: type, receiver index, counter.
pub const PREFIX_LEN: usize = field::HEADER;
/// Bytes of the authentication tag at the end of a transport datagram.
pub const TAG_LEN: usize = 16;
/// Bytes of a keepalive (prefix and tag only).
pub const KEEPALIVE_LEN: usize = PREFIX_LEN + TAG_LEN;

/// Payload of the initiation inside Noise message 1: cipher, sender index, stamp.
pub const INIT_PAYLOAD_LEN: usize = field::init_payload::STAMP.end;
/// Noise IK message 1: ephemeral (32), encrypted static (32 + 16), encrypted payload.
pub const NOISE_MSG1_LEN: usize = 32 + 32 + 16 + INIT_PAYLOAD_LEN + 16;
/// Bytes of an initiation datagram.
pub const INITIATION_LEN: usize = field::INIT_MAC2.end;
/// Payload of the response inside Noise message 2: the responder's sender index.
pub const RESP_PAYLOAD_LEN: usize = field::RESP_SENDER_INDEX.end;
/// Noise IK message 2: ephemeral (32), encrypted payload.
pub const NOISE_MSG2_LEN: usize = 32 + RESP_PAYLOAD_LEN + 16;
/// Bytes of a response datagram.
pub const RESPONSE_LEN: usize = field::RESP_MAC1.end;
/// Bytes of a cookie reply datagram.
pub const COOKIE_REPLY_LEN: usize = field::COOKIE_SEALED.end;
/// The largest datagram the handshake ever emits (buffer size for
/// [`crate::Peers::poll_transmit`]).
pub const MAX_HANDSHAKE_LEN: usize = INITIATION_LEN;

/// Bytes an encrypted transport datagram adds to a header of `header_len` bytes
/// and its payload: prefix and tag.
pub const fn transport_overhead() -> usize {
    PREFIX_LEN + TAG_LEN
}

/// Reads the big-endian u32 `field` (4 bytes, e.g. [`field::RECEIVER_INDEX`]).
pub(crate) fn read_u32(b: &[u8], field: Range<usize>) -> u32 {
    u32::from_be_bytes(b[field].try_into().expect("a 4-byte field"))
}

/// Reads the big-endian u64 `field` (8 bytes, e.g. [`field::COUNTER`]).
pub(crate) fn read_u64(b: &[u8], field: Range<usize>) -> u64 {
    u64::from_be_bytes(b[field].try_into().expect("an 8-byte field"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_the_documented_ones() {
        assert_eq!(PREFIX_LEN, 13);
        assert_eq!(NOISE_MSG1_LEN, 109);
        // type, clear sender index, message 1, mac1, mac2
        assert_eq!(INITIATION_LEN, 1 + 4 + 109 + 16 + 16);
        assert_eq!(INITIATION_LEN, 146);
        assert_eq!(NOISE_MSG2_LEN, 52);
        // type, receiver index, message 2, mac1
        assert_eq!(RESPONSE_LEN, 1 + 4 + 52 + 16);
        assert_eq!(RESPONSE_LEN, 73);
        // type, receiver index, nonce, cookie, tag
        assert_eq!(COOKIE_REPLY_LEN, 1 + 4 + 24 + 16 + 16);
        assert_eq!(COOKIE_REPLY_LEN, 61);
        assert_eq!(MAX_HANDSHAKE_LEN, 146);
        assert_eq!(transport_overhead(), 29);
    }

    #[test]
    fn fields_follow_each_other_as_documented() {
        assert_eq!(field::RECEIVER_INDEX.start, field::TYPE + 1);
        assert_eq!(field::COUNTER.start, field::RECEIVER_INDEX.end);
        assert_eq!(PREFIX_LEN, field::COUNTER.end);
        use field::init_payload::{CIPHER, SENDER_INDEX, STAMP};
        assert_eq!(
            (SENDER_INDEX.start, STAMP.start),
            (CIPHER + 1, SENDER_INDEX.end)
        );
        assert_eq!(INIT_PAYLOAD_LEN, 13);
        // the MACs end each handshake message, mac1 right before mac2
        assert_eq!((field::INIT_MAC1.start, field::INIT_MAC2.start), (114, 130));
        assert_eq!(field::RESP_MAC1, 57..73);
        assert_eq!((field::COOKIE_NONCE, field::COOKIE_SEALED), (5..29, 29..61));
        let mut b = [0u8; PREFIX_LEN];
        b[field::RECEIVER_INDEX].copy_from_slice(&7u32.to_be_bytes());
        b[field::COUNTER].copy_from_slice(&9u64.to_be_bytes());
        assert_eq!(read_u32(&b, field::RECEIVER_INDEX), 7);
        assert_eq!(read_u64(&b, field::COUNTER), 9);
        assert_eq!(
            b[1..5],
            [0, 0, 0, 7],
            "the index is bytes 1..5 (docs/wire.md)"
        );
    }
}
