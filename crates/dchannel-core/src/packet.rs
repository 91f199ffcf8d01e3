//! Parsing of inner IP packets (IPv4/IPv6 with TCP/UDP/ICMP) into the few
//! fields steering needs, and the flow key (5-tuple + direction).
//!
//! Never panics and never allocates: every offset is bounds-checked, and a
//! packet that cannot be parsed yields a [`ParseError`] naming the layer, the
//! field and what was expected. Every byte offset into an IP, TCP, UDP or ICMP
//! header is named once, in [`field`]; code elsewhere asks this module
//! ([`src_addr`], [`dst_addr`], [`parse`]) instead of indexing packets itself.

use crate::quic;
use crate::Direction;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;

/// TCP flag FIN.
pub const TCP_FIN: u8 = 0x01;
/// TCP flag SYN.
pub const TCP_SYN: u8 = 0x02;
/// TCP flag RST.
pub const TCP_RST: u8 = 0x04;
/// TCP flag PSH.
pub const TCP_PSH: u8 = 0x08;
/// TCP flag ACK.
pub const TCP_ACK: u8 = 0x10;
/// TCP flag CWR (congestion window reduced, RFC 3168).
pub const TCP_CWR: u8 = 0x80;

/// Byte offsets of the header fields this crate reads or writes, named once
/// (as smoltcp's `mod field`). A range is a multi-byte field in network byte
/// order; a plain `usize` a single byte.
pub mod field {
    /// A multi-byte field: its byte range within the header.
    pub type Field = std::ops::Range<usize>;

    /// IPv4 header (RFC 791).
    pub mod ipv4 {
        use super::Field;
        /// Version (high nibble) and header length in 32-bit words (low nibble).
        pub const VER_IHL: usize = 0;
        /// Total length of the packet, header included.
        pub const LENGTH: Field = 2..4;
        /// Identification (of fragments; incremented per segment by TSO).
        pub const IDENT: Field = 4..6;
        /// Flags (3 bits) and fragment offset (13 bits, in 8-byte units).
        pub const FLG_OFF: Field = 6..8;
        /// Mask of the fragment offset within [`FLG_OFF`].
        pub const FRAG_OFF_MASK: u16 = 0x1fff;
        /// The more-fragments flag within [`FLG_OFF`].
        pub const MORE_FRAGMENTS: u16 = 0x2000;
        /// Time to live.
        pub const TTL: usize = 8;
        /// Transport protocol number.
        pub const PROTOCOL: usize = 9;
        /// Header checksum.
        pub const CHECKSUM: Field = 10..12;
        /// Source address.
        pub const SRC_ADDR: Field = 12..16;
        /// Destination address.
        pub const DST_ADDR: Field = 16..20;
        /// Length of a header without options.
        pub const MIN_HEADER_LEN: usize = 20;
    }

    /// IPv6 fixed header (RFC 8200).
    pub mod ipv6 {
        use super::Field;
        /// Length of what follows the fixed header.
        pub const PAYLOAD_LEN: Field = 4..6;
        /// Type of the next header.
        pub const NEXT_HEADER: usize = 6;
        /// Source address.
        pub const SRC_ADDR: Field = 8..24;
        /// Destination address.
        pub const DST_ADDR: Field = 24..40;
        /// Length of the fixed header.
        pub const HEADER_LEN: usize = 40;
    }

    /// IPv6 extension headers (hop-by-hop, routing, fragment, destination
    /// options, authentication), relative to the extension header's start.
    pub mod ipv6_ext {
        use super::Field;
        /// Type of the next header.
        pub const NEXT_HEADER: usize = 0;
        /// Length: in 8-byte units not counting the first 8 (AH: 4-byte units minus 2).
        pub const LENGTH: usize = 1;
        /// Fragment header: offset (13 bits, in 8-byte units) and flags (low 3 bits).
        pub const FRAG_OFF: Field = 2..4;
        /// Shortest extension header (and the fragment header's length).
        pub const MIN_LEN: usize = 8;
        /// Next-header numbers of the extension headers the parser walks.
        pub const HOP_BY_HOP: u8 = 0;
        /// Routing header.
        pub const ROUTING: u8 = 43;
        /// Fragment header.
        pub const FRAGMENT: u8 = 44;
        /// Authentication header.
        pub const AUTH: u8 = 51;
        /// Destination options.
        pub const DEST_OPTS: u8 = 60;
    }

    /// TCP header (RFC 9293).
    pub mod tcp {
        use super::Field;
        /// Source port.
        pub const SRC_PORT: Field = 0..2;
        /// Destination port.
        pub const DST_PORT: Field = 2..4;
        /// Sequence number.
        pub const SEQ_NUM: Field = 4..8;
        /// Acknowledgment number.
        pub const ACK_NUM: Field = 8..12;
        /// Data offset in 32-bit words (high nibble).
        pub const DATA_OFF: usize = 12;
        /// Flags (CWR ECE URG ACK PSH RST SYN FIN).
        pub const FLAGS: usize = 13;
        /// Checksum (over a pseudo-header, the header and the payload).
        pub const CHECKSUM: Field = 16..18;
        /// Length of a header without options.
        pub const MIN_HEADER_LEN: usize = 20;
    }

    /// UDP header (RFC 768).
    pub mod udp {
        use super::Field;
        /// Source port.
        pub const SRC_PORT: Field = 0..2;
        /// Destination port.
        pub const DST_PORT: Field = 2..4;
        /// Length of header and payload.
        pub const LENGTH: Field = 4..6;
        /// Length of the header.
        pub const HEADER_LEN: usize = 8;
    }

    /// ICMP and ICMPv6 headers (RFC 792, RFC 4443).
    pub mod icmp {
        use super::Field;
        /// Message type.
        pub const TYPE: usize = 0;
        /// Echo request/reply identifier.
        pub const ECHO_IDENT: Field = 4..6;
        /// Length of the header (with the echo identifier and sequence).
        pub const HEADER_LEN: usize = 8;
    }
}

use field::{icmp, ipv4, ipv6, ipv6_ext, tcp, udp};

fn be16(b: &[u8], f: field::Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

fn v4_addr(pkt: &[u8], f: field::Field) -> Ipv4Addr {
    let b: [u8; 4] = pkt[f].try_into().expect("4-byte field");
    Ipv4Addr::from(b)
}

fn v6_addr(pkt: &[u8], f: field::Field) -> Ipv6Addr {
    let b: [u8; 16] = pkt[f].try_into().expect("16-byte field");
    Ipv6Addr::from(b)
}

/// Source address of an IPv4/IPv6 packet whose fixed header is complete;
/// `None` for anything else. Reads no further than the addresses.
pub fn src_addr(pkt: &[u8]) -> Option<IpAddr> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= ipv4::MIN_HEADER_LEN => Some(v4_addr(pkt, ipv4::SRC_ADDR).into()),
        6 if pkt.len() >= ipv6::HEADER_LEN => Some(v6_addr(pkt, ipv6::SRC_ADDR).into()),
        _ => None,
    }
}

/// Destination address of an IPv4/IPv6 packet whose fixed header is complete;
/// `None` for anything else.
pub fn dst_addr(pkt: &[u8]) -> Option<IpAddr> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= ipv4::MIN_HEADER_LEN => Some(v4_addr(pkt, ipv4::DST_ADDR).into()),
        6 if pkt.len() >= ipv6::HEADER_LEN => Some(v6_addr(pkt, ipv6::DST_ADDR).into()),
        _ => None,
    }
}

/// Unidirectional flow identity: 5-tuple plus the direction of travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Inner source address.
    pub src: IpAddr,
    /// Inner destination address.
    pub dst: IpAddr,
    /// Transport protocol number.
    pub proto: u8,
    /// Source port (ICMP echo: the identifier; else 0).
    pub sport: u16,
    /// Destination port (ICMP echo: the identifier; else 0).
    pub dport: u16,
    /// Direction of travel.
    pub dir: Direction,
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self.proto {
            PROTO_TCP => "tcp",
            PROTO_UDP => "udp",
            PROTO_ICMP => "icmp",
            PROTO_ICMPV6 => "icmp6",
            _ => "ip",
        };
        write!(
            f,
            "{p} {}:{}>{}:{} {}",
            self.src,
            self.sport,
            self.dst,
            self.dport,
            self.dir.name()
        )
    }
}

/// What steering needs to know about one inner packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Transport protocol number (after IPv6 extension headers).
    pub proto: u8,
    /// Ports for TCP/UDP; the echo identifier (both fields) for ICMP echo; else 0.
    pub sport: u16,
    /// Destination port (see `sport`).
    pub dport: u16,
    /// Length of the whole IP packet (IPv4 total length / IPv6 40 + payload length).
    pub ip_len: usize,
    /// TCP flags byte (0 for other protocols).
    pub tcp_flags: u8,
    /// Offset of the transport payload (after the TCP/UDP/ICMP header).
    pub payload_off: usize,
    /// Bytes of transport payload (0 for a bare TCP ACK/SYN/FIN/RST).
    pub payload_len: usize,
    /// A non-first fragment: no transport header, ports unknown (0).
    pub fragment: bool,
    /// What QUIC packet it is taken for ([`quic::classify`]; None: not QUIC). Worked out
    /// once here, so that the policies' QUIC rules and the agents' packet class
    /// (crate::packet_class) read it instead of classifying the packet again.
    pub quic: Option<quic::Kind>,
}

impl PacketInfo {
    /// The flow key of this packet when it travels in direction `dir`.
    pub fn key(&self, dir: Direction) -> FlowKey {
        FlowKey {
            src: self.src,
            dst: self.dst,
            proto: self.proto,
            sport: self.sport,
            dport: self.dport,
            dir,
        }
    }

    /// A TCP segment (not a non-first fragment).
    pub fn is_tcp(&self) -> bool {
        self.proto == PROTO_TCP && !self.fragment
    }

    /// A UDP datagram (not a non-first fragment).
    pub fn is_udp(&self) -> bool {
        self.proto == PROTO_UDP && !self.fragment
    }

    /// A TCP segment without payload: SYN, SYN-ACK, pure ACK, FIN or RST.
    pub fn is_tcp_control(&self) -> bool {
        self.is_tcp() && self.payload_len == 0
    }

    /// The transport payload inside `pkt` (the buffer this info was parsed from).
    pub fn payload<'a>(&self, pkt: &'a [u8]) -> &'a [u8] {
        let end = (self.payload_off + self.payload_len).min(pkt.len());
        pkt.get(self.payload_off.min(end)..end).unwrap_or(&[])
    }
}

/// Why an inner packet could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Zero bytes.
    Empty,
    /// The version nibble is neither 4 nor 6.
    UnknownIpVersion(u8),
    /// `layer`'s `field` needs `need` bytes but only `have` are present.
    Truncated {
        /// Protocol layer, e.g. `IPv4`.
        layer: &'static str,
        /// Field that did not fit, e.g. `total length`.
        field: &'static str,
        /// Bytes present.
        have: usize,
        /// Bytes the field needs.
        need: usize,
    },
    /// A header length field is below its minimum.
    BadLength {
        /// Protocol layer, e.g. `TCP`.
        layer: &'static str,
        /// Length field, e.g. `data offset`.
        field: &'static str,
        /// Its value in bytes.
        value: usize,
        /// The smallest valid value.
        min: usize,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => write!(f, "empty packet"),
            ParseError::UnknownIpVersion(v) => {
                write!(f, "IP version {v}, expected 4 or 6")
            }
            ParseError::Truncated {
                layer,
                field,
                have,
                need,
            } => write!(
                f,
                "{layer} {field}: packet has {have} bytes, expected at least {need}"
            ),
            ParseError::BadLength {
                layer,
                field,
                value,
                min,
            } => write!(f, "{layer} {field} is {value}, expected at least {min}"),
        }
    }
}

impl std::error::Error for ParseError {}

fn need(buf: &[u8], n: usize, layer: &'static str, field: &'static str) -> Result<(), ParseError> {
    if buf.len() < n {
        Err(ParseError::Truncated {
            layer,
            field,
            have: buf.len(),
            need: n,
        })
    } else {
        Ok(())
    }
}

/// `layer`'s length field `field` reads `value` bytes, which must be at least `min`.
fn at_least(
    value: usize,
    min: usize,
    layer: &'static str,
    field: &'static str,
) -> Result<(), ParseError> {
    if value < min {
        Err(ParseError::BadLength {
            layer,
            field,
            value,
            min,
        })
    } else {
        Ok(())
    }
}

/// Parses an inner IP packet as read from a TUN device (no packet-info prefix).
pub fn parse(pkt: &[u8]) -> Result<PacketInfo, ParseError> {
    let first = *pkt.first().ok_or(ParseError::Empty)?;
    match first >> 4 {
        4 => parse_v4(pkt),
        6 => parse_v6(pkt),
        v => Err(ParseError::UnknownIpVersion(v)),
    }
}

fn parse_v4(pkt: &[u8]) -> Result<PacketInfo, ParseError> {
    need(pkt, ipv4::MIN_HEADER_LEN, "IPv4", "header")?;
    let ihl = usize::from(pkt[ipv4::VER_IHL] & 0x0f) * 4;
    at_least(ihl, ipv4::MIN_HEADER_LEN, "IPv4", "IHL")?;
    let total = usize::from(be16(pkt, ipv4::LENGTH));
    at_least(total, ihl, "IPv4", "total length")?;
    need(pkt, total, "IPv4", "total length")?;
    let frag_off = be16(pkt, ipv4::FLG_OFF) & ipv4::FRAG_OFF_MASK;
    let src = IpAddr::V4(v4_addr(pkt, ipv4::SRC_ADDR));
    let dst = IpAddr::V4(v4_addr(pkt, ipv4::DST_ADDR));
    let proto = pkt[ipv4::PROTOCOL];
    l4(&pkt[..total], ihl, src, dst, proto, frag_off != 0, total)
}

fn parse_v6(pkt: &[u8]) -> Result<PacketInfo, ParseError> {
    need(pkt, ipv6::HEADER_LEN, "IPv6", "header")?;
    let total = ipv6::HEADER_LEN + usize::from(be16(pkt, ipv6::PAYLOAD_LEN));
    need(pkt, total, "IPv6", "payload length")?;
    let pkt = &pkt[..total];
    let src = IpAddr::V6(v6_addr(pkt, ipv6::SRC_ADDR));
    let dst = IpAddr::V6(v6_addr(pkt, ipv6::DST_ADDR));
    let mut next = pkt[ipv6::NEXT_HEADER];
    let mut off = ipv6::HEADER_LEN;
    let mut fragment = false;
    // Walk at most 8 extension headers: enough for any sane packet, bounded for floods.
    for _ in 0..8 {
        let ext = &pkt[off..];
        match next {
            ipv6_ext::HOP_BY_HOP | ipv6_ext::ROUTING | ipv6_ext::DEST_OPTS => {
                need(ext, ipv6_ext::MIN_LEN, "IPv6", "extension header")?;
                let len = (usize::from(ext[ipv6_ext::LENGTH]) + 1) * 8;
                need(ext, len, "IPv6", "extension header length")?;
                next = ext[ipv6_ext::NEXT_HEADER];
                off += len;
            }
            ipv6_ext::FRAGMENT => {
                need(ext, ipv6_ext::MIN_LEN, "IPv6", "fragment header")?;
                let frag_off = be16(ext, ipv6_ext::FRAG_OFF) >> 3;
                fragment |= frag_off != 0;
                next = ext[ipv6_ext::NEXT_HEADER];
                off += ipv6_ext::MIN_LEN;
            }
            ipv6_ext::AUTH => {
                need(ext, ipv6_ext::MIN_LEN, "IPv6", "AH header")?;
                let len = (usize::from(ext[ipv6_ext::LENGTH]) + 2) * 4;
                need(ext, len, "IPv6", "AH header length")?;
                next = ext[ipv6_ext::NEXT_HEADER];
                off += len;
            }
            _ => break,
        }
    }
    l4(pkt, off, src, dst, next, fragment, total)
}

fn l4(
    pkt: &[u8],
    off: usize,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    fragment: bool,
    ip_len: usize,
) -> Result<PacketInfo, ParseError> {
    let mut info = PacketInfo {
        src,
        dst,
        proto,
        sport: 0,
        dport: 0,
        ip_len,
        tcp_flags: 0,
        payload_off: off,
        payload_len: pkt.len().saturating_sub(off),
        fragment,
        quic: None,
    };
    if fragment {
        return Ok(info);
    }
    let seg = &pkt[off.min(pkt.len())..];
    match proto {
        PROTO_TCP => {
            need(seg, tcp::MIN_HEADER_LEN, "TCP", "header")?;
            let doff = usize::from(seg[tcp::DATA_OFF] >> 4) * 4;
            at_least(doff, tcp::MIN_HEADER_LEN, "TCP", "data offset")?;
            need(seg, doff, "TCP", "data offset")?;
            info.sport = be16(seg, tcp::SRC_PORT);
            info.dport = be16(seg, tcp::DST_PORT);
            info.tcp_flags = seg[tcp::FLAGS];
            info.payload_off = off + doff;
            info.payload_len = seg.len() - doff;
        }
        PROTO_UDP => {
            need(seg, udp::HEADER_LEN, "UDP", "header")?;
            info.sport = be16(seg, udp::SRC_PORT);
            info.dport = be16(seg, udp::DST_PORT);
            info.payload_off = off + udp::HEADER_LEN;
            info.payload_len = seg.len() - udp::HEADER_LEN;
            info.quic = quic::classify(&info, pkt);
        }
        PROTO_ICMP | PROTO_ICMPV6 => {
            need(seg, icmp::HEADER_LEN, "ICMP", "header")?;
            let echo = matches!(
                (proto, seg[icmp::TYPE]),
                (PROTO_ICMP, 0 | 8) | (PROTO_ICMPV6, 128 | 129)
            );
            if echo {
                // The echo identifier ties requests and replies of one ping together.
                let id = be16(seg, icmp::ECHO_IDENT);
                info.sport = id;
                info.dport = id;
            }
            info.payload_off = off + icmp::HEADER_LEN;
            info.payload_len = seg.len() - icmp::HEADER_LEN;
        }
        _ => {}
    }
    Ok(info)
}

/// Test helpers that build real packets (checksums are not needed by the parser).
#[doc(hidden)]
pub mod build {
    use super::*;

    /// An IPv4 header for a packet of `total` bytes carrying `proto`.
    fn ipv4(total: usize, proto: u8, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; total];
        p[ipv4::VER_IHL] = 0x45;
        p[ipv4::LENGTH].copy_from_slice(&(total as u16).to_be_bytes());
        p[ipv4::TTL] = 64;
        p[ipv4::PROTOCOL] = proto;
        p[ipv4::SRC_ADDR].copy_from_slice(&src);
        p[ipv4::DST_ADDR].copy_from_slice(&dst);
        p
    }

    /// An IPv4 TCP packet with `payload` bytes of payload and the given flags.
    pub fn tcp4(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        flags: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let l4 = ipv4::MIN_HEADER_LEN;
        let mut p = ipv4(
            l4 + tcp::MIN_HEADER_LEN + payload.len(),
            PROTO_TCP,
            src,
            dst,
        );
        let seg = &mut p[l4..];
        seg[tcp::SRC_PORT].copy_from_slice(&sport.to_be_bytes());
        seg[tcp::DST_PORT].copy_from_slice(&dport.to_be_bytes());
        seg[tcp::DATA_OFF] = 5 << 4;
        seg[tcp::FLAGS] = flags;
        seg[tcp::MIN_HEADER_LEN..].copy_from_slice(payload);
        p
    }

    /// An IPv4 UDP packet.
    pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let l4 = ipv4::MIN_HEADER_LEN;
        let mut p = ipv4(l4 + udp::HEADER_LEN + payload.len(), PROTO_UDP, src, dst);
        let seg = &mut p[l4..];
        seg[udp::SRC_PORT].copy_from_slice(&sport.to_be_bytes());
        seg[udp::DST_PORT].copy_from_slice(&dport.to_be_bytes());
        seg[udp::LENGTH].copy_from_slice(&((udp::HEADER_LEN + payload.len()) as u16).to_be_bytes());
        seg[udp::HEADER_LEN..].copy_from_slice(payload);
        p
    }

    /// An IPv4 packet of exactly `total` bytes: UDP 1000 -> 2000 padded with zeros.
    pub fn udp4_sized(total: usize) -> Vec<u8> {
        udp4(
            [198, 19, 0, 2],
            [198, 18, 0, 1],
            1000,
            2000,
            &vec![0u8; total - 28],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    #[test]
    fn tcp_syn_v4() {
        let p = tcp4([10, 0, 0, 1], [10, 0, 0, 2], 40000, 443, TCP_SYN, &[]);
        let i = parse(&p).unwrap();
        assert_eq!(i.proto, PROTO_TCP);
        assert_eq!((i.sport, i.dport), (40000, 443));
        assert_eq!(i.ip_len, 40);
        assert!(i.is_tcp_control());
        assert_eq!(i.tcp_flags, TCP_SYN);
    }

    #[test]
    fn tcp_data_v4_payload() {
        let p = tcp4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            1,
            2,
            TCP_ACK | TCP_PSH,
            b"GET /",
        );
        let i = parse(&p).unwrap();
        assert_eq!(i.payload_len, 5);
        assert_eq!(i.payload(&p), b"GET /");
        assert!(!i.is_tcp_control());
    }

    #[test]
    fn trailing_padding_is_ignored() {
        let mut p = udp4([1, 1, 1, 1], [2, 2, 2, 2], 53, 5353, b"abc");
        p.extend_from_slice(&[0; 10]);
        let i = parse(&p).unwrap();
        assert_eq!(i.ip_len, 31);
        assert_eq!(i.payload_len, 3);
    }

    #[test]
    fn icmp_echo_uses_identifier() {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[3] = 28;
        p[9] = PROTO_ICMP;
        p[20] = 8;
        p[24..26].copy_from_slice(&777u16.to_be_bytes());
        let i = parse(&p).unwrap();
        assert_eq!((i.sport, i.dport), (777, 777));
    }

    #[test]
    fn ipv6_udp_after_hop_by_hop() {
        let mut p = vec![0u8; 40 + 8 + 8 + 2];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&18u16.to_be_bytes());
        p[6] = 0; // hop-by-hop
        p[8 + 15] = 1;
        p[24 + 15] = 2;
        p[40] = PROTO_UDP; // next header after hop-by-hop
        p[41] = 0; // 8 bytes
        p[48..50].copy_from_slice(&53u16.to_be_bytes());
        p[50..52].copy_from_slice(&4000u16.to_be_bytes());
        let i = parse(&p).unwrap();
        assert_eq!(i.proto, PROTO_UDP);
        assert_eq!((i.sport, i.dport), (53, 4000));
        assert_eq!(i.payload_len, 2);
        assert_eq!(i.ip_len, 58);
        assert_eq!(i.src, "::1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn v4_non_first_fragment_has_no_ports() {
        let mut p = udp4([1, 1, 1, 1], [2, 2, 2, 2], 53, 53, b"xx");
        p[7] = 10; // fragment offset 10*8
        let i = parse(&p).unwrap();
        assert!(i.fragment);
        assert_eq!((i.sport, i.dport), (0, 0));
    }

    #[test]
    fn addresses_without_a_full_parse() {
        let p = udp4([198, 19, 0, 2], [198, 18, 3, 2], 1, 2, b"x");
        assert_eq!(src_addr(&p), Some("198.19.0.2".parse().unwrap()));
        assert_eq!(dst_addr(&p), Some("198.18.3.2".parse().unwrap()));
        // Only the fixed header must be there; anything shorter or not IP is None.
        assert_eq!(src_addr(&p[..20]), Some("198.19.0.2".parse().unwrap()));
        assert_eq!(src_addr(&p[..19]), None);
        assert_eq!(dst_addr(&[0x55; 40]), None);
        assert_eq!(src_addr(&[]), None);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[8 + 15] = 1; // ::1
        v6[24 + 15] = 2; // ::2
        assert_eq!(src_addr(&v6), Some("::1".parse().unwrap()));
        assert_eq!(dst_addr(&v6), Some("::2".parse().unwrap()));
        assert_eq!(dst_addr(&v6[..39]), None);
    }

    #[test]
    fn errors_name_layer_and_field() {
        assert_eq!(parse(&[]), Err(ParseError::Empty));
        assert_eq!(parse(&[0x55]), Err(ParseError::UnknownIpVersion(5)));
        let p = tcp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0, &[]);
        let e = parse(&p[..30]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "IPv4 total length: packet has 30 bytes, expected at least 40"
        );
        let mut q = p.clone();
        q[32] = 2 << 4;
        assert_eq!(
            parse(&q).unwrap_err().to_string(),
            "TCP data offset is 8, expected at least 20"
        );
    }
}
