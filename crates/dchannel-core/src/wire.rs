//! The dchannel wire header carried in every UDP datagram between the agents.
//!
//! Layout (network byte order, 16 bytes; docs/wire.md; byte ranges in [`field`]):
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-------+-------+---------------+-------------------------------+
//! |version| type  |     flags     |            flow id            |
//! +-------+-------+---------------+-------------------------------+
//! |                      per-flow sequence number                 |
//! +---------------------------------------------------------------+
//! |                     auth (client token, 64 bit)               |
//! |                                                               |
//! +---------------------------------------------------------------+
//! ```
//!
//! Flags (bit 0 = least significant): 0 LLC ([`FLAG_LLC`]), 1 unordered
//! ([`FLAG_UNORDERED`]), 2 duplicate ([`FLAG_DUPLICATE`]); bits 3-7 are 0 and
//! ignored on receipt.
//!
//! A data datagram carries one inner IP packet after the header. A probe
//! datagram carries a 2-byte body: probe kind (1 to 4, [`ProbeKind`]) and the
//! channel it was sent on; its `seq` field is the probe id and its flow id is 0.
//!
//! The 8-byte auth field is version 1's client token (`--insecure`). Encrypted
//! datagrams (the default; `dchannel_crypto::format`, docs/wire.md "Encrypted
//! datagrams") carry this same header with the auth field 0, in clear but
//! authenticated, behind a 13-byte prefix (type, receiver index, counter) and
//! followed by the encrypted body and a 16-byte tag.

use crate::Channel;
use std::fmt;

/// Byte ranges of the header's fields and of the probe body's (smoltcp style).
pub mod field {
    use std::ops::Range;

    /// Version (high nibble) and message type (low nibble).
    pub const VERSION_TYPE: usize = 0;
    /// [`FLAG_LLC`](super::FLAG_LLC), [`FLAG_UNORDERED`](super::FLAG_UNORDERED),
    /// [`FLAG_DUPLICATE`](super::FLAG_DUPLICATE), or 0.
    pub const FLAGS: usize = 1;
    /// The sender's flow id (u16).
    pub const FLOW_ID: Range<usize> = 2..4;
    /// Per-flow sequence number or probe id (u32).
    pub const SEQ: Range<usize> = 4..8;
    /// The auth field: version 1's client token (u64).
    pub const AUTH: Range<usize> = 8..16;
    /// First byte after the header.
    pub const BODY: usize = AUTH.end;
    /// In a probe body (offsets from its start): the probe kind.
    pub const PROBE_KIND: usize = 0;
    /// In a probe body: the channel the probe was sent on.
    pub const PROBE_CHANNEL: usize = 1;
}

/// Version this implementation speaks.
pub const VERSION: u8 = 1;
/// Bytes of the dchannel header.
pub const HEADER_LEN: usize = field::BODY;
/// Bytes of a probe body after the header.
pub const PROBE_BODY_LEN: usize = field::PROBE_CHANNEL + 1;
/// Flag bit: the sender put this datagram on the LLC (informational).
pub const FLAG_LLC: u8 = 0x01;
/// Flag bit: the inner packet carries its own ordering (the policy said so,
/// [`Decision::unordered`](crate::policy::Decision::unordered)); the receiver's
/// reorder buffer passes it on at once. A receiver that ignores it only holds
/// the packet as it would any other.
pub const FLAG_UNORDERED: u8 = 0x02;
/// Flag bit: this inner packet is sent on both channels, the two copies with
/// the same flow id and sequence number ([`Decision::duplicate`](crate::policy::Decision::duplicate));
/// the receiver delivers whichever copy arrives first and drops the other
/// ([`crate::dedupe`]). A receiver that ignores it delivers both.
pub const FLAG_DUPLICATE: u8 = 0x04;

/// What a datagram carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgType {
    /// One inner IP packet.
    Data = 0,
    /// An RTT probe (D-SYN / D-SYN-ACK / D-ACK).
    Probe = 1,
}

/// The probe messages: the three of the RTT handshake (NSDI'23 §4.2) and
/// the one-way wake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// Sent by the initiator (client) on each channel every probe interval.
    DSyn = 1,
    /// The responder's answer, on the same channel: the initiator samples the RTT.
    DSynAck = 2,
    /// The initiator's answer to the D-SYN-ACK: the responder samples the RTT.
    DAck = 3,
    /// One-way and never answered: sent by the client on the HBC only to wake
    /// the device's HBC radio from its sleep cycle (DRX) before a reply comes
    /// back on it (the `prewarm` policy). The receiver counts it as traffic
    /// heard on the channel and nothing else.
    Wake = 4,
}

impl ProbeKind {
    fn from_u8(v: u8) -> Option<ProbeKind> {
        match v {
            1 => Some(ProbeKind::DSyn),
            2 => Some(ProbeKind::DSynAck),
            3 => Some(ProbeKind::DAck),
            4 => Some(ProbeKind::Wake),
            _ => None,
        }
    }
}

/// The decoded 16-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Data or probe.
    pub msg_type: MsgType,
    /// [`FLAG_LLC`], [`FLAG_UNORDERED`] and [`FLAG_DUPLICATE`], or 0.
    pub flags: u8,
    /// The sender's id of the unidirectional flow; 0 = no flow (probes, unparsable packets).
    pub flow_id: u16,
    /// Per-flow sequence number (probes: the probe id).
    pub seq: u32,
    /// The 64-bit auth field: version 1 carries the client token. Filled in
    /// by the endpoint's [`DatagramAuth`](crate::endpoint::DatagramAuth).
    pub token: u64,
}

/// Why a datagram was rejected. Each variant has its own malformed counter
/// (`DropReason::from` in the endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the header (or than the probe body for a probe).
    Truncated {
        /// Bytes received.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Version field is not [`VERSION`].
    UnknownVersion(u8),
    /// Type field is neither data nor probe.
    UnknownType(u8),
    /// A probe with an unknown probe kind or channel byte.
    BadProbe {
        /// The probe kind byte.
        kind: u8,
        /// The channel byte.
        channel: u8,
    },
    /// A data datagram with no inner packet.
    EmptyData,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { len, need } => {
                write!(
                    f,
                    "datagram truncated: {len} bytes, expected at least {need}"
                )
            }
            WireError::UnknownVersion(v) => {
                write!(f, "unknown header version {v}, expected {VERSION}")
            }
            WireError::UnknownType(t) => {
                write!(
                    f,
                    "unknown message type {t}, expected 0 (data) or 1 (probe)"
                )
            }
            WireError::BadProbe { kind, channel } => write!(
                f,
                "bad probe body: kind {kind} (expected 1..=4), channel {channel} (expected 0 or 1)"
            ),
            WireError::EmptyData => write!(f, "data datagram without an inner packet"),
        }
    }
}

impl std::error::Error for WireError {}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    ///
    /// Panics if `out` is shorter than [`HEADER_LEN`] (a driver bug, never input).
    pub fn encode(&self, out: &mut [u8]) {
        out[field::VERSION_TYPE] = (VERSION << 4) | (self.msg_type as u8);
        out[field::FLAGS] = self.flags;
        out[field::FLOW_ID].copy_from_slice(&self.flow_id.to_be_bytes());
        out[field::SEQ].copy_from_slice(&self.seq.to_be_bytes());
        out[field::AUTH].copy_from_slice(&self.token.to_be_bytes());
    }

    /// Parses the header; never panics on any input.
    pub fn decode(buf: &[u8]) -> Result<Header, WireError> {
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                len: buf.len(),
                need: HEADER_LEN,
            });
        }
        let version = buf[field::VERSION_TYPE] >> 4;
        if version != VERSION {
            return Err(WireError::UnknownVersion(version));
        }
        let msg_type = match buf[field::VERSION_TYPE] & 0x0f {
            0 => MsgType::Data,
            1 => MsgType::Probe,
            t => return Err(WireError::UnknownType(t)),
        };
        Ok(Header {
            msg_type,
            flags: buf[field::FLAGS],
            flow_id: u16::from_be_bytes(buf[field::FLOW_ID].try_into().expect("2 bytes")),
            seq: u32::from_be_bytes(buf[field::SEQ].try_into().expect("4 bytes")),
            token: u64::from_be_bytes(buf[field::AUTH].try_into().expect("8 bytes")),
        })
    }
}

/// A fully decoded datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// One inner IP packet.
    Data {
        /// The decoded header.
        header: Header,
        /// The inner IP packet (the whole body).
        inner: &'a [u8],
    },
    /// An RTT probe.
    Probe {
        /// The decoded header (`seq` is the probe id).
        header: Header,
        /// D-SYN, D-SYN-ACK, D-ACK or wake.
        kind: ProbeKind,
        /// The channel the sender put it on.
        channel: Channel,
    },
}

impl Datagram<'_> {
    /// The header of either kind of datagram.
    pub fn header(&self) -> &Header {
        match self {
            Datagram::Data { header, .. } | Datagram::Probe { header, .. } => header,
        }
    }
}

/// Decodes a whole datagram (header plus body); never panics on any input.
pub fn decode(buf: &[u8]) -> Result<Datagram<'_>, WireError> {
    let header = Header::decode(buf)?;
    decode_body(header, &buf[HEADER_LEN..])
}

/// Decodes the body that follows an already decoded `header` (after the
/// endpoint has authenticated the datagram, and decrypted it once datagrams
/// are encrypted); never panics on any input.
pub fn decode_body(header: Header, body: &[u8]) -> Result<Datagram<'_>, WireError> {
    match header.msg_type {
        MsgType::Data => {
            if body.is_empty() {
                return Err(WireError::EmptyData);
            }
            Ok(Datagram::Data {
                header,
                inner: body,
            })
        }
        MsgType::Probe => {
            if body.len() < PROBE_BODY_LEN {
                return Err(WireError::Truncated {
                    len: HEADER_LEN + body.len(),
                    need: HEADER_LEN + PROBE_BODY_LEN,
                });
            }
            let (kind_byte, channel_byte) = (body[field::PROBE_KIND], body[field::PROBE_CHANNEL]);
            let kind = ProbeKind::from_u8(kind_byte);
            let channel = match channel_byte {
                0 => Some(Channel::Hbc),
                1 => Some(Channel::Llc),
                _ => None,
            };
            match (kind, channel) {
                (Some(kind), Some(channel)) => Ok(Datagram::Probe {
                    header,
                    kind,
                    channel,
                }),
                _ => Err(WireError::BadProbe {
                    kind: kind_byte,
                    channel: channel_byte,
                }),
            }
        }
    }
}

/// The flags byte of a datagram sent on `channel`.
pub fn channel_flags(channel: Channel) -> u8 {
    if channel == Channel::Llc {
        FLAG_LLC
    } else {
        0
    }
}

/// The header of probe `id` of `kind` sent on `channel` (auth field left 0
/// for the endpoint's [`DatagramAuth`](crate::endpoint::DatagramAuth)).
pub fn probe_header(id: u32, channel: Channel) -> Header {
    Header {
        msg_type: MsgType::Probe,
        flags: channel_flags(channel),
        flow_id: 0,
        seq: id,
        token: 0,
    }
}

/// Writes a probe body (kind, channel) into the first [`PROBE_BODY_LEN`] bytes of `out`.
pub fn encode_probe_body(out: &mut [u8], kind: ProbeKind, channel: Channel) {
    out[field::PROBE_KIND] = kind as u8;
    out[field::PROBE_CHANNEL] = channel as u8;
}

/// Encodes a probe datagram into `out` and returns its length.
pub fn encode_probe(
    out: &mut [u8; HEADER_LEN + PROBE_BODY_LEN],
    token: u64,
    id: u32,
    kind: ProbeKind,
    channel: Channel,
) -> usize {
    Header {
        token,
        ..probe_header(id, channel)
    }
    .encode(&mut out[..HEADER_LEN]);
    encode_probe_body(&mut out[HEADER_LEN..], kind, channel);
    HEADER_LEN + PROBE_BODY_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_tile_the_header_and_the_probe_body() {
        assert_eq!(field::FLAGS, field::VERSION_TYPE + 1);
        assert_eq!(field::FLOW_ID.start, field::FLAGS + 1);
        assert_eq!(field::SEQ.start, field::FLOW_ID.end);
        assert_eq!(field::AUTH.start, field::SEQ.end);
        assert_eq!((HEADER_LEN, PROBE_BODY_LEN), (16, 2), "docs/wire.md");
        let mut body = [0u8; PROBE_BODY_LEN];
        encode_probe_body(&mut body, ProbeKind::Wake, Channel::Llc);
        assert_eq!(body, [4, 1], "kind 4 (wake) is a valid probe kind");
        // the flags are bits 0, 1 and 2 of the flags byte (docs/wire.md)
        assert_eq!([FLAG_LLC, FLAG_UNORDERED, FLAG_DUPLICATE], [1, 2, 4]);
    }

    #[test]
    fn header_round_trip_and_exact_bytes() {
        let h = Header {
            msg_type: MsgType::Data,
            flags: FLAG_LLC,
            flow_id: 0x1234,
            seq: 0xdead_beef,
            token: 0x0102_0304_0506_0708,
        };
        let mut buf = [0u8; HEADER_LEN];
        h.encode(&mut buf);
        assert_eq!(
            buf,
            [0x10, 0x01, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(Header::decode(&buf), Ok(h));
    }

    #[test]
    fn data_datagram_round_trip() {
        let mut buf = vec![0u8; HEADER_LEN + 3];
        let h = Header {
            msg_type: MsgType::Data,
            flags: 0,
            flow_id: 7,
            seq: 9,
            token: 42,
        };
        h.encode(&mut buf);
        buf[HEADER_LEN..].copy_from_slice(&[0x45, 0, 0]);
        assert_eq!(
            decode(&buf),
            Ok(Datagram::Data {
                header: h,
                inner: &[0x45, 0, 0]
            })
        );
    }

    #[test]
    fn probe_round_trip() {
        let mut buf = [0u8; HEADER_LEN + PROBE_BODY_LEN];
        let n = encode_probe(&mut buf, 99, 5, ProbeKind::DSynAck, Channel::Llc);
        assert_eq!(n, 18);
        match decode(&buf).unwrap() {
            Datagram::Probe {
                header,
                kind,
                channel,
            } => {
                assert_eq!(header.seq, 5);
                assert_eq!(header.token, 99);
                assert_eq!(kind, ProbeKind::DSynAck);
                assert_eq!(channel, Channel::Llc);
            }
            d => panic!("unexpected {d:?}"),
        }
    }

    #[test]
    fn rejects_bad_input_with_named_reason() {
        assert_eq!(
            decode(&[0x10; 5]),
            Err(WireError::Truncated { len: 5, need: 16 })
        );
        let mut buf = [0u8; 20];
        buf[0] = 0x20;
        assert_eq!(decode(&buf), Err(WireError::UnknownVersion(2)));
        buf[0] = 0x17;
        assert_eq!(decode(&buf), Err(WireError::UnknownType(7)));
        buf[0] = 0x10;
        assert_eq!(decode(&buf[..16]), Err(WireError::EmptyData));
        buf[0] = 0x11;
        buf[16] = 9;
        assert_eq!(
            decode(&buf[..18]),
            Err(WireError::BadProbe {
                kind: 9,
                channel: 0
            })
        );
        assert_eq!(
            decode(&buf[..17]),
            Err(WireError::Truncated { len: 17, need: 18 })
        );
        assert!(WireError::UnknownVersion(2)
            .to_string()
            .contains("version 2"));
    }
}
