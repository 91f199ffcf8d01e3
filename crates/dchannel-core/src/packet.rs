//! Parsing of inner IP packets (IPv4/IPv6 with TCP/UDP/ICMP) into the few
//! fields steering needs, and the flow key (5-tuple + direction).
//!
//! Never panics and never allocates: every offset is bounds-checked, and a
//! packet that cannot be parsed yields a [`ParseError`] naming the layer, the
//! field and what was expected.

use crate::Direction;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

/// Unidirectional flow identity: 5-tuple plus the direction of travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
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
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Transport protocol number (after IPv6 extension headers).
    pub proto: u8,
    /// Ports for TCP/UDP; the echo identifier (both fields) for ICMP echo; else 0.
    pub sport: u16,
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
}

impl PacketInfo {
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

    pub fn is_tcp(&self) -> bool {
        self.proto == PROTO_TCP && !self.fragment
    }

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
    Empty,
    UnknownIpVersion(u8),
    /// `layer`'s `field` needs `need` bytes but only `have` are present.
    Truncated {
        layer: &'static str,
        field: &'static str,
        have: usize,
        need: usize,
    },
    /// A header length field is below its minimum.
    BadLength {
        layer: &'static str,
        field: &'static str,
        value: usize,
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
    need(pkt, 20, "IPv4", "header")?;
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(ParseError::BadLength {
            layer: "IPv4",
            field: "IHL",
            value: ihl,
            min: 20,
        });
    }
    let total = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
    if total < ihl {
        return Err(ParseError::BadLength {
            layer: "IPv4",
            field: "total length",
            value: total,
            min: ihl,
        });
    }
    need(pkt, total, "IPv4", "total length")?;
    let frag_off = u16::from_be_bytes([pkt[6], pkt[7]]) & 0x1fff;
    let src = IpAddr::V4(Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]));
    let proto = pkt[9];
    l4(&pkt[..total], ihl, src, dst, proto, frag_off != 0, total)
}

fn parse_v6(pkt: &[u8]) -> Result<PacketInfo, ParseError> {
    need(pkt, 40, "IPv6", "header")?;
    let payload = usize::from(u16::from_be_bytes([pkt[4], pkt[5]]));
    let total = 40 + payload;
    need(pkt, total, "IPv6", "payload length")?;
    let pkt = &pkt[..total];
    let mut a = [0u8; 16];
    a.copy_from_slice(&pkt[8..24]);
    let src = IpAddr::V6(Ipv6Addr::from(a));
    a.copy_from_slice(&pkt[24..40]);
    let dst = IpAddr::V6(Ipv6Addr::from(a));
    let mut next = pkt[6];
    let mut off = 40;
    let mut fragment = false;
    // Walk at most 8 extension headers: enough for any sane packet, bounded for floods.
    for _ in 0..8 {
        match next {
            0 | 43 | 60 => {
                need(pkt, off + 8, "IPv6", "extension header")?;
                let len = (usize::from(pkt[off + 1]) + 1) * 8;
                need(pkt, off + len, "IPv6", "extension header length")?;
                next = pkt[off];
                off += len;
            }
            44 => {
                need(pkt, off + 8, "IPv6", "fragment header")?;
                let frag_off = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]) >> 3;
                fragment |= frag_off != 0;
                next = pkt[off];
                off += 8;
            }
            51 => {
                need(pkt, off + 8, "IPv6", "AH header")?;
                let len = (usize::from(pkt[off + 1]) + 2) * 4;
                need(pkt, off + len, "IPv6", "AH header length")?;
                next = pkt[off];
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
    };
    if fragment {
        return Ok(info);
    }
    let seg = &pkt[off.min(pkt.len())..];
    match proto {
        PROTO_TCP => {
            need(seg, 20, "TCP", "header")?;
            let doff = usize::from(seg[12] >> 4) * 4;
            if doff < 20 {
                return Err(ParseError::BadLength {
                    layer: "TCP",
                    field: "data offset",
                    value: doff,
                    min: 20,
                });
            }
            need(seg, doff, "TCP", "data offset")?;
            info.sport = u16::from_be_bytes([seg[0], seg[1]]);
            info.dport = u16::from_be_bytes([seg[2], seg[3]]);
            info.tcp_flags = seg[13];
            info.payload_off = off + doff;
            info.payload_len = seg.len() - doff;
        }
        PROTO_UDP => {
            need(seg, 8, "UDP", "header")?;
            info.sport = u16::from_be_bytes([seg[0], seg[1]]);
            info.dport = u16::from_be_bytes([seg[2], seg[3]]);
            info.payload_off = off + 8;
            info.payload_len = seg.len() - 8;
        }
        PROTO_ICMP | PROTO_ICMPV6 => {
            need(seg, 8, "ICMP", "header")?;
            let echo = matches!(
                (proto, seg[0]),
                (PROTO_ICMP, 0 | 8) | (PROTO_ICMPV6, 128 | 129)
            );
            if echo {
                // The echo identifier ties requests and replies of one ping together.
                let id = u16::from_be_bytes([seg[4], seg[5]]);
                info.sport = id;
                info.dport = id;
            }
            info.payload_off = off + 8;
            info.payload_len = seg.len() - 8;
        }
        _ => {}
    }
    Ok(info)
}

/// Test helpers that build real packets (checksums are not needed by the parser).
#[doc(hidden)]
pub mod build {
    use super::*;

    /// An IPv4 TCP packet with `payload` bytes of payload and the given flags.
    pub fn tcp4(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        flags: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let total = 20 + 20 + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags;
        p[40..].copy_from_slice(payload);
        p
    }

    /// An IPv4 UDP packet.
    pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let total = 20 + 8 + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = PROTO_UDP;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        p[28..].copy_from_slice(payload);
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
