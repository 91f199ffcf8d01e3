//! Byte layout of the encrypted datagrams (docs/wire.md, "Encrypted datagrams").
//!
//! The first byte is the message type. Its high nibble is 2, so a version-1
//! (plaintext, `0x1?`) decoder rejects every encrypted datagram as an unknown
//! version, and a driver dispatches on `byte0 >> 4`.
//!
//! ```text
//! transport  : 0x20 | receiver index u32 | counter u64 | header (H) | ciphertext | tag 16
//! keepalive  : 0x20 | receiver index u32 | counter u64 | tag 16            (no header, no payload)
//! initiation : 0x21 | Noise IK message 1 (e, s, payload: cipher u8, sender index u32, stamp u64)
//! response   : 0x22 | receiver index u32 | Noise IK message 2 (e, payload: sender index u32)
//! ```
//!
//! All integers are big-endian. The associated data of a transport datagram is
//! everything before the ciphertext (type, index, counter and the header).

/// Type byte of a transport (data or keepalive) datagram.
pub const TYPE_TRANSPORT: u8 = 0x20;
/// Type byte of a handshake initiation.
pub const TYPE_INITIATION: u8 = 0x21;
/// Type byte of a handshake response.
pub const TYPE_RESPONSE: u8 = 0x22;

/// Bytes before the header in a transport datagram: type, receiver index, counter.
pub const PREFIX_LEN: usize = 1 + 4 + 8;
/// Bytes of the authentication tag at the end of a transport datagram.
pub const TAG_LEN: usize = 16;
/// Bytes of a keepalive (prefix and tag only).
pub const KEEPALIVE_LEN: usize = PREFIX_LEN + TAG_LEN;

/// Payload of the initiation inside Noise message 1: cipher, sender index, stamp.
pub const INIT_PAYLOAD_LEN: usize = 1 + 4 + 8;
/// Noise IK message 1: ephemeral (32), encrypted static (32 + 16), encrypted payload.
pub const NOISE_MSG1_LEN: usize = 32 + 32 + 16 + INIT_PAYLOAD_LEN + 16;
/// Bytes of an initiation datagram.
pub const INITIATION_LEN: usize = 1 + NOISE_MSG1_LEN;
/// Payload of the response inside Noise message 2: the responder's sender index.
pub const RESP_PAYLOAD_LEN: usize = 4;
/// Noise IK message 2: ephemeral (32), encrypted payload.
pub const NOISE_MSG2_LEN: usize = 32 + RESP_PAYLOAD_LEN + 16;
/// Bytes of a response datagram.
pub const RESPONSE_LEN: usize = 1 + 4 + NOISE_MSG2_LEN;
/// The largest datagram the handshake ever emits (buffer size for
/// [`crate::Peers::poll_transmit`]).
pub const MAX_HANDSHAKE_LEN: usize = INITIATION_LEN;

/// Bytes an encrypted transport datagram adds to a header of `header_len` bytes
/// and its payload: prefix and tag.
pub const fn transport_overhead() -> usize {
    PREFIX_LEN + TAG_LEN
}

/// Reads the receiver index of a transport datagram or response (bytes 1..5).
pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a big-endian u64 at `at`.
pub(crate) fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_the_documented_ones() {
        assert_eq!(PREFIX_LEN, 13);
        assert_eq!(NOISE_MSG1_LEN, 109);
        assert_eq!(INITIATION_LEN, 110);
        assert_eq!(NOISE_MSG2_LEN, 52);
        assert_eq!(RESPONSE_LEN, 57);
        assert_eq!(transport_overhead(), 29);
    }
}
