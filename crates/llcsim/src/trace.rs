//! One user's page load as a list of inner packets: the input of the simulator.
//!
//! A trace file is CSV whose header starts `t_ns,dir,proto,src,sport,dst,dport,ip_len`
//! (further columns, e.g. the testbed's `channel`, are ignored), one row per
//! inner IP packet a device sent (`up`) or received (`down`), `t_ns`
//! nanoseconds since the page load began (non-decreasing). `lab/dchlab/sim`
//! writes these from the agents' decision logs (`--decision-log`: the packets
//! the policy was asked about, on both ends, on one clock).
//!
//! The steering core parses raw IP packets, so each row becomes a packet with
//! real IPv4 and TCP/UDP headers (the flow's addresses and ports, the IP length
//! as recorded) and a zero payload: everything Algorithm 1 reads (`ip_len` and
//! the flow) is exact; TCP flags and payload bytes are not recorded (policies
//! that read them, e.g. `asap`, would see ACK-only segments).

use anyhow::{bail, Context, Result};
use dchannel_core::Direction;
use std::net::Ipv4Addr;
use std::path::Path;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const IPV4_HEADER: usize = 20;
const TCP_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
/// TCP flags of a synthesized segment: ACK (bit 4).
const TCP_ACK: u8 = 0x10;

/// The trace file's first columns, exactly.
pub const HEADER: &str = "t_ns,dir,proto,src,sport,dst,dport,ip_len";

/// One inner packet of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePacket {
    /// Nanoseconds since the page load began.
    pub t: u64,
    /// Who sent it: the device (uplink) or the network (downlink).
    pub dir: Direction,
    /// A raw IP packet with the recorded addresses, ports and length.
    pub raw: Vec<u8>,
}

/// One page load of one user.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The page's name (the file's stem).
    pub name: String,
    /// Its packets in time order.
    pub packets: Vec<TracePacket>,
}

impl Trace {
    /// Time from the first to the last packet (ns).
    pub fn span(&self) -> u64 {
        self.packets.last().map_or(0, |p| p.t)
    }

    /// Reads a trace file (see the module docs); the page name is the file's stem.
    pub fn read(path: &Path) -> Result<Trace> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading trace {path:?}"))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Trace::parse(&name, &text).with_context(|| format!("trace {path:?}"))
    }

    /// Parses a trace's text (see the module docs).
    pub fn parse(name: &str, text: &str) -> Result<Trace> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h.trim() == HEADER || h.starts_with(&format!("{HEADER},")) => {}
            other => bail!(
                "line 1: header {:?}, expected {HEADER:?}",
                other.map(|(_, h)| h).unwrap_or("")
            ),
        }
        let mut packets = Vec::new();
        let mut last = 0;
        for (i, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            let p = parse_row(line).with_context(|| format!("line {}", i + 1))?;
            if p.t < last {
                bail!(
                    "line {}: t_ns {} goes back in time (previous {last})",
                    i + 1,
                    p.t
                );
            }
            last = p.t;
            packets.push(p);
        }
        Ok(Trace {
            name: name.to_string(),
            packets,
        })
    }
}

fn field<T: std::str::FromStr>(v: Option<&str>, name: &str, expected: &str) -> Result<T> {
    let v = v.with_context(|| format!("missing field {name}"))?;
    v.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{name} = {v:?}: expected {expected}"))
}

fn parse_row(line: &str) -> Result<TracePacket> {
    let mut f = line.split(',');
    let t: u64 = field(f.next(), "t_ns", "whole nanoseconds >= 0")?;
    let dir = match f.next().map(str::trim) {
        Some("up") => Direction::Uplink,
        Some("down") => Direction::Downlink,
        other => bail!("dir = {other:?}: expected up or down"),
    };
    let proto: u8 = field(f.next(), "proto", "an IP protocol number 0-255")?;
    let src: Ipv4Addr = field(f.next(), "src", "an IPv4 address")?;
    let sport: u16 = field(f.next(), "sport", "a port 0-65535")?;
    let dst: Ipv4Addr = field(f.next(), "dst", "an IPv4 address")?;
    let dport: u16 = field(f.next(), "dport", "a port 0-65535")?;
    let ip_len: usize = field(f.next(), "ip_len", "the IP packet's length in bytes")?;
    let raw = synthesize(proto, src, sport, dst, dport, ip_len)?;
    Ok(TracePacket { t, dir, raw })
}

/// An IPv4 packet of `ip_len` bytes with the given flow, zero payload.
pub fn synthesize(
    proto: u8,
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    ip_len: usize,
) -> Result<Vec<u8>> {
    let l4 = match proto {
        PROTO_TCP => TCP_HEADER,
        PROTO_UDP => UDP_HEADER,
        _ => 0,
    };
    if ip_len < IPV4_HEADER + l4 || ip_len > usize::from(u16::MAX) {
        bail!(
            "ip_len = {ip_len}: expected {}..=65535 for protocol {proto}",
            IPV4_HEADER + l4
        );
    }
    let mut p = vec![0u8; ip_len];
    p[0] = 0x45; // version 4, 5-word header
    p[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    p[8] = 64; // TTL
    p[9] = proto;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let seg = &mut p[IPV4_HEADER..];
    if l4 > 0 {
        seg[0..2].copy_from_slice(&sport.to_be_bytes());
        seg[2..4].copy_from_slice(&dport.to_be_bytes());
    }
    if proto == PROTO_TCP {
        seg[12] = 5 << 4; // data offset: 5 words
        seg[13] = TCP_ACK;
    } else if proto == PROTO_UDP {
        seg[4..6].copy_from_slice(&((ip_len - IPV4_HEADER) as u16).to_be_bytes());
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dchannel_core::packet;

    #[test]
    fn rows_become_packets_the_core_parses_with_their_flow_and_length() {
        let text = format!(
            "{HEADER},channel\n0,up,6,198.19.0.2,40000,198.18.0.1,443,52,hbc\n\
             1500,down,17,198.19.255.53,53,198.19.0.2,10300,65,llc\n"
        );
        let t = Trace::parse("p", &text).unwrap();
        assert_eq!(t.packets.len(), 2);
        assert_eq!(t.span(), 1500);
        let tcp = packet::parse(&t.packets[0].raw).unwrap();
        assert_eq!((tcp.ip_len, tcp.proto), (52, 6));
        let k = tcp.key(Direction::Uplink);
        assert_eq!(k.to_string(), "tcp 198.19.0.2:40000>198.18.0.1:443 up");
        let udp = packet::parse(&t.packets[1].raw).unwrap();
        assert_eq!((udp.ip_len, udp.proto, udp.payload_len), (65, 17, 37));
        assert_eq!(t.packets[1].dir, Direction::Downlink);
    }

    #[test]
    fn bad_rows_name_the_line_and_field() {
        let bad = |body: &str| {
            let e = Trace::parse("p", &format!("{HEADER}\n{body}\n")).unwrap_err();
            format!("{e:#}")
        };
        assert!(bad("0,sideways,6,1.1.1.1,1,2.2.2.2,2,40").contains("line 2: dir"));
        assert!(bad("0,up,6,1.1.1.1,1,2.2.2.2,2,39").contains("ip_len = 39"));
        assert!(bad("0,up,6,1.1.1,1,2.2.2.2,2,40").contains("src"));
        let e = bad("5,up,6,1.1.1.1,1,2.2.2.2,2,40\n4,up,6,1.1.1.1,1,2.2.2.2,2,40");
        assert!(e.contains("line 3: t_ns 4 goes back"), "{e}");
        let e = Trace::parse("p", "t,dir\n").unwrap_err().to_string();
        assert!(e.contains("line 1: header"), "{e}");
    }
}
