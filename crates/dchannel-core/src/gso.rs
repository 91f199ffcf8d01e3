//! TUN offload: the `virtio_net_hdr` in front of every packet of a TUN opened
//! with `IFF_VNET_HDR`, and the segmentation of the TCP super-packets (up to
//! 64 KiB, TSO) that the kernel then hands over, into the packets it would
//! otherwise have sent one by one.
//!
//! Why: with TSO the kernel's TCP sends one 64 KiB packet where it would send
//! ~45 of MTU size, and the agent reads it in one syscall instead of 45. The
//! steering does not change: every segment is an ordinary packet, steered on
//! its own (docs/agent.md "TUN offload"). The segments are exactly what the
//! kernel's own software segmentation makes (`tcp_gso_segment`): the headers
//! copied, the IPv4 length, identification and checksum, the IPv6 payload
//! length, the TCP sequence number and checksum set per segment, FIN and PSH
//! only on the last segment and CWR only on the first.
//!
//! A packet that is not a super-packet may still carry a partial checksum
//! (`NEEDS_CSUM`, checksum offload): [`Segments`] completes it, as the kernel's
//! `skb_checksum_help` does.

use crate::packet::field::{ipv4, ipv6, tcp};
use crate::packet::{TCP_CWR, TCP_FIN, TCP_PSH};
use std::fmt;

/// `struct virtio_net_hdr` (virtio 1.x §5.1.6, legacy layout, host byte order
/// as the TUN driver uses it by default): what the kernel says about the packet
/// that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// [`VnetHdr::F_NEEDS_CSUM`] and friends.
    pub flags: u8,
    /// [`VnetHdr::GSO_NONE`], [`VnetHdr::GSO_TCPV4`], ..., maybe with [`VnetHdr::GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers (a hint; the segmenter measures them itself).
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS) of a super-packet.
    pub gso_size: u16,
    /// Where the checksummed part starts (the transport header).
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum field is.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Bytes of the header in front of every packet.
    pub const LEN: usize = 10;
    /// The transport checksum is partial: complete it over `csum_start..`.
    pub const F_NEEDS_CSUM: u8 = 1;
    /// Not a super-packet.
    pub const GSO_NONE: u8 = 0;
    /// A TCP/IPv4 super-packet.
    pub const GSO_TCPV4: u8 = 1;
    /// A UDP super-packet (UFO; never enabled by the agent).
    pub const GSO_UDP: u8 = 3;
    /// A TCP/IPv6 super-packet.
    pub const GSO_TCPV6: u8 = 4;
    /// Flag bit of `gso_type`: the super-packet's TCP header has CWR set.
    pub const GSO_ECN: u8 = 0x80;
    /// The header of a plain packet with nothing left to do (what the agent writes
    /// in front of every packet it delivers to the TUN).
    pub const PLAIN: [u8; Self::LEN] = [0; Self::LEN];

    /// Reads the header from the first [`VnetHdr::LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<Self, GsoError> {
        if b.len() < Self::LEN {
            return Err(GsoError::ShortHeader(b.len()));
        }
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header's bytes (the inverse of [`VnetHdr::parse`]).
    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// Why a packet read from an offloading TUN cannot be turned into packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoError {
    /// Fewer than [`VnetHdr::LEN`] bytes were read.
    ShortHeader(usize),
    /// A `gso_type` the agent never enables (UFO, USO, ...).
    UnsupportedGsoType(u8),
    /// A super-packet with `gso_size` 0.
    ZeroGsoSize,
    /// A super-packet whose IP version nibble is neither 4 nor 6.
    BadIpVersion(u8),
    /// A super-packet that is not TCP.
    NotTcp(u8),
    /// An IPv4 super-packet whose header length (IHL × 4) is below 20 bytes.
    BadIpv4HeaderLength(usize),
    /// The headers (IP, TCP) do not fit in the packet.
    TruncatedHeaders {
        /// Bytes needed for them.
        need: usize,
        /// Bytes the packet has.
        have: usize,
    },
    /// `csum_start + csum_offset + 2` lies beyond the packet.
    ChecksumOutOfRange {
        /// Where the checksum field would end.
        end: usize,
        /// Bytes the packet has.
        have: usize,
    },
}

impl fmt::Display for GsoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GsoError::ShortHeader(n) => {
                write!(
                    f,
                    "virtio_net_hdr: read {n} bytes, expected at least {}",
                    VnetHdr::LEN
                )
            }
            GsoError::UnsupportedGsoType(t) => {
                write!(
                    f,
                    "virtio_net_hdr.gso_type {t}: expected 0 (none), 1 (TCPv4) or 4 (TCPv6)"
                )
            }
            GsoError::ZeroGsoSize => write!(f, "virtio_net_hdr.gso_size 0 on a super-packet"),
            GsoError::BadIpVersion(v) => write!(f, "super-packet: IP version {v}, expected 4 or 6"),
            GsoError::NotTcp(p) => write!(f, "super-packet: IP protocol {p}, expected TCP (6)"),
            GsoError::BadIpv4HeaderLength(n) => {
                write!(f, "super-packet: IPv4 header length {n}, expected 20 to 60")
            }
            GsoError::TruncatedHeaders { need, have } => {
                write!(
                    f,
                    "super-packet: headers need {need} bytes, the packet has {have}"
                )
            }
            GsoError::ChecksumOutOfRange { end, have } => write!(
                f,
                "virtio_net_hdr: checksum field ends at byte {end}, the packet has {have}"
            ),
        }
    }
}

impl std::error::Error for GsoError {}

/// The packets one read from an offloading TUN stands for: one (a plain packet,
/// its partial checksum completed) or the segments of a TCP super-packet.
/// Pull them with [`Segments::next_into`]; nothing is allocated.
pub struct Segments<'a> {
    pkt: &'a [u8],
    kind: Kind,
    /// Bytes of IP + TCP headers copied in front of every segment.
    hdr: usize,
    /// Offset of the TCP header.
    l4: usize,
    mss: usize,
    /// Payload offset of the next segment (relative to the payload start).
    next: usize,
    /// Index of the next segment.
    index: usize,
    count: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Copy as it is.
    Plain,
    /// Copy and complete the checksum at `at` over `from..`.
    Csum { from: usize, at: usize },
    /// Segment a TCP super-packet (IPv4 when `v4`).
    Tcp { v4: bool },
}

impl<'a> Segments<'a> {
    /// The packets of `pkt` (what followed the header `vh`).
    pub fn new(vh: VnetHdr, pkt: &'a [u8]) -> Result<Self, GsoError> {
        let plain = |kind| Segments {
            pkt,
            kind,
            hdr: 0,
            l4: 0,
            mss: 0,
            next: 0,
            index: 0,
            count: 1,
        };
        let gso = vh.gso_type & !VnetHdr::GSO_ECN;
        if gso == VnetHdr::GSO_NONE {
            if vh.flags & VnetHdr::F_NEEDS_CSUM == 0 {
                return Ok(plain(Kind::Plain));
            }
            let (from, at) = (
                vh.csum_start as usize,
                vh.csum_start as usize + vh.csum_offset as usize,
            );
            if at + 2 > pkt.len() {
                return Err(GsoError::ChecksumOutOfRange {
                    end: at + 2,
                    have: pkt.len(),
                });
            }
            return Ok(plain(Kind::Csum { from, at }));
        }
        if gso != VnetHdr::GSO_TCPV4 && gso != VnetHdr::GSO_TCPV6 {
            return Err(GsoError::UnsupportedGsoType(vh.gso_type));
        }
        if vh.gso_size == 0 {
            return Err(GsoError::ZeroGsoSize);
        }
        let truncated = |need| GsoError::TruncatedHeaders {
            need,
            have: pkt.len(),
        };
        let version = pkt.first().ok_or(truncated(1))? >> 4;
        let (v4, l4) = match version {
            4 => {
                let ihl = ((pkt[0] & 0x0f) as usize) * 4;
                if ihl < ipv4::MIN_HEADER_LEN {
                    return Err(GsoError::BadIpv4HeaderLength(ihl));
                }
                if pkt.len() < ipv4::MIN_HEADER_LEN.max(ihl) {
                    return Err(truncated(ipv4::MIN_HEADER_LEN.max(ihl)));
                }
                if pkt[ipv4::PROTOCOL] != crate::packet::PROTO_TCP {
                    return Err(GsoError::NotTcp(pkt[ipv4::PROTOCOL]));
                }
                (true, ihl)
            }
            6 => {
                if pkt.len() < ipv6::HEADER_LEN {
                    return Err(truncated(ipv6::HEADER_LEN));
                }
                // The kernel points csum_start at the TCP header (past any
                // extension headers); without it, only a bare header is known.
                let l4 = if vh.flags & VnetHdr::F_NEEDS_CSUM != 0 {
                    vh.csum_start as usize
                } else if pkt[ipv6::NEXT_HEADER] == crate::packet::PROTO_TCP {
                    ipv6::HEADER_LEN
                } else {
                    return Err(GsoError::NotTcp(pkt[ipv6::NEXT_HEADER]));
                };
                (false, l4.max(ipv6::HEADER_LEN))
            }
            v => return Err(GsoError::BadIpVersion(v)),
        };
        if pkt.len() < l4 + tcp::MIN_HEADER_LEN {
            return Err(truncated(l4 + tcp::MIN_HEADER_LEN));
        }
        let thl = ((pkt[l4 + tcp::DATA_OFF] >> 4) as usize) * 4;
        let hdr = l4 + thl.max(tcp::MIN_HEADER_LEN);
        if pkt.len() < hdr {
            return Err(truncated(hdr));
        }
        let mss = vh.gso_size as usize;
        let payload = pkt.len() - hdr;
        Ok(Segments {
            pkt,
            kind: Kind::Tcp { v4 },
            hdr,
            l4,
            mss,
            next: 0,
            index: 0,
            count: payload.div_ceil(mss).max(1),
        })
    }

    /// How many packets in all.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The largest packet [`Segments::next_into`] writes.
    pub fn max_len(&self) -> usize {
        match self.kind {
            Kind::Tcp { .. } => self.hdr + self.mss.min(self.pkt.len() - self.hdr),
            _ => self.pkt.len(),
        }
    }

    /// Writes the next packet into `dst` (at least [`Segments::max_len`] bytes)
    /// and returns its length; `None` when all were written.
    pub fn next_into(&mut self, dst: &mut [u8]) -> Option<usize> {
        if self.index >= self.count {
            return None;
        }
        self.index += 1;
        let pkt = self.pkt;
        match self.kind {
            Kind::Plain => {
                dst[..pkt.len()].copy_from_slice(pkt);
                Some(pkt.len())
            }
            Kind::Csum { from, at } => {
                let out = &mut dst[..pkt.len()];
                out.copy_from_slice(pkt);
                // The field holds the pseudo-header's sum: summing over it completes it.
                let c = !fold(sum(&out[from..], 0));
                // As skb_checksum_help: a computed 0 is sent as 0xffff (UDP's "none").
                let c = if c == 0 { 0xffff } else { c };
                out[at..at + 2].copy_from_slice(&c.to_ne_bytes());
                Some(pkt.len())
            }
            Kind::Tcp { v4 } => {
                let (hdr, l4) = (self.hdr, self.l4);
                let first = self.next == 0;
                let chunk = self.mss.min(pkt.len() - hdr - self.next);
                let last = self.index == self.count;
                let len = hdr + chunk;
                let out = &mut dst[..len];
                out[..hdr].copy_from_slice(&pkt[..hdr]);
                out[hdr..].copy_from_slice(&pkt[hdr + self.next..hdr + self.next + chunk]);
                let i = (self.index - 1) as u16;
                if v4 {
                    put16(out, ipv4::LENGTH, len as u16);
                    let id = get16(pkt, ipv4::IDENT).wrapping_add(i);
                    put16(out, ipv4::IDENT, id);
                    put16(out, ipv4::CHECKSUM, 0);
                    let c = !fold(sum(&out[..l4], 0));
                    out[ipv4::CHECKSUM].copy_from_slice(&c.to_ne_bytes());
                } else {
                    put16(out, ipv6::PAYLOAD_LEN, (len - ipv6::HEADER_LEN) as u16);
                }
                let t = &mut out[l4..];
                let seq = tcp_seq(pkt, l4).wrapping_add(self.next as u32);
                t[tcp::SEQ_NUM].copy_from_slice(&seq.to_be_bytes());
                if !last {
                    t[tcp::FLAGS] &= !(TCP_FIN | TCP_PSH);
                }
                if !first {
                    t[tcp::FLAGS] &= !TCP_CWR;
                }
                put16(t, tcp::CHECKSUM, 0);
                // Pseudo-header (RFC 9293 §3.1): addresses, protocol, TCP length.
                let tcp_len = (len - l4) as u16;
                let mut s = if v4 {
                    sum(&out[ipv4::SRC_ADDR.start..ipv4::DST_ADDR.end], 0)
                } else {
                    sum(&out[ipv6::SRC_ADDR.start..ipv6::DST_ADDR.end], 0)
                };
                let [hi, lo] = tcp_len.to_be_bytes();
                s = sum(&[0, crate::packet::PROTO_TCP, hi, lo], s);
                let c = !fold(sum(&out[l4..], s));
                out[l4 + tcp::CHECKSUM.start..l4 + tcp::CHECKSUM.end]
                    .copy_from_slice(&c.to_ne_bytes());
                self.next += chunk;
                Some(len)
            }
        }
    }
}

/// The TCP sequence number of `pkt`, whose TCP header starts at `l4`.
pub(crate) fn tcp_seq(pkt: &[u8], l4: usize) -> u32 {
    let f = l4 + tcp::SEQ_NUM.start..l4 + tcp::SEQ_NUM.end;
    u32::from_be_bytes(pkt[f].try_into().expect("4 bytes"))
}

/// A 16-bit field in network byte order.
pub(crate) fn get16(b: &[u8], f: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

fn put16(b: &mut [u8], f: std::ops::Range<usize>, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// The Internet checksum's running sum (RFC 1071) of `data` added to `acc`, in
/// host byte order (§2(B): the sum is byte-order independent, so the folded,
/// complemented result is stored with `to_ne_bytes`). `data` must start at an
/// even offset of the checksummed whole; only the last piece may be odd.
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    let rest = words.remainder();
    let mut pair = rest.chunks_exact(2);
    for w in &mut pair {
        acc += u16::from_ne_bytes([w[0], w[1]]) as u64;
    }
    if let [b] = pair.remainder() {
        acc += u16::from_ne_bytes([*b, 0]) as u64;
    }
    acc
}

/// Folds a running [`sum`] to 16 bits with end-around carries.
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests;
