//! The other direction of TUN offload: consecutive TCP segments of one flow,
//! delivered in one receive batch, are written to the TUN as one super-packet
//! (a `virtio_net_hdr` asking for TCP segmentation), as a NIC's GRO would
//! hand them to the kernel. One write and one trip through the kernel's stack
//! instead of one per segment; the kernel's TCP receives what it would have
//! received, and a forwarding gateway's kernel cuts the super-packet again
//! exactly along the original segments.
//!
//! Segments join only when nothing but what segmentation changes differs:
//! the IP header except length, identification (consecutive) and checksum;
//! the TCP header except sequence number (contiguous), PSH and checksum; every
//! segment but the last carries exactly the first one's payload length; PSH
//! ends a super-packet; SYN, FIN, RST, URG and CWR never join. Anything else is
//! written as it came. wireguard-go's `tcpGRO` follows the same rules.

use crate::gso::{fold, get16, sum, tcp_seq, VnetHdr};
use crate::packet::field::{ipv4, ipv6, tcp};
use crate::packet::{PROTO_TCP, TCP_ACK, TCP_PSH};

/// Largest IP packet a super-packet may become (the IPv4 total-length field).
const MAX_LEN: usize = 65535;

/// Collects delivered packets and emits TUN writes: `(virtio_net_hdr, packet)`.
#[derive(Default)]
pub struct Gro {
    /// The open super-packet (or a lone packet that may become one).
    buf: Vec<u8>,
    open: Option<Open>,
}

#[derive(Clone, Copy)]
struct Open {
    v4: bool,
    /// Offset of the TCP header; `hdr` = bytes of IP + TCP headers.
    l4: usize,
    hdr: usize,
    /// Payload bytes of the first segment (the MSS of the super-packet).
    mss: usize,
    segments: usize,
    next_seq: u32,
    /// The last segment joined was shorter than `mss` or had PSH: closed.
    closed: bool,
}

/// Where a TCP segment's headers are, if it may join a super-packet.
fn candidate(pkt: &[u8]) -> Option<(bool, usize, usize)> {
    let (v4, l4) = match pkt.first()? >> 4 {
        4 => {
            // No options, not a fragment, TCP.
            let ok = pkt.len() >= ipv4::MIN_HEADER_LEN
                && pkt[ipv4::VER_IHL] == 0x45
                && pkt[ipv4::PROTOCOL] == PROTO_TCP
                && get16(pkt, ipv4::FLG_OFF) & (ipv4::FRAG_OFF_MASK | ipv4::MORE_FRAGMENTS) == 0
                && get16(pkt, ipv4::LENGTH) as usize == pkt.len();
            if !ok {
                return None;
            }
            (true, ipv4::MIN_HEADER_LEN)
        }
        6 => {
            let ok = pkt.len() >= ipv6::HEADER_LEN
                && pkt[ipv6::NEXT_HEADER] == PROTO_TCP
                && get16(pkt, ipv6::PAYLOAD_LEN) as usize + ipv6::HEADER_LEN == pkt.len();
            if !ok {
                return None;
            }
            (false, ipv6::HEADER_LEN)
        }
        _ => return None,
    };
    if pkt.len() < l4 + tcp::MIN_HEADER_LEN {
        return None;
    }
    let hdr = l4 + ((pkt[l4 + tcp::DATA_OFF] >> 4) as usize) * 4;
    let flags = pkt[l4 + tcp::FLAGS];
    // ACK and maybe PSH, nothing else; a payload to join.
    let ok = hdr >= l4 + tcp::MIN_HEADER_LEN
        && pkt.len() > hdr
        && flags & TCP_ACK != 0
        && flags & !(TCP_ACK | TCP_PSH) == 0;
    ok.then_some((v4, l4, hdr))
}

impl Gro {
    /// A coalescer with nothing open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Offers the next delivered packet. Emits whatever must be written before
    /// it (the open super-packet it cannot join), and the packet itself when it
    /// cannot start or join one.
    pub fn push(&mut self, pkt: &[u8], emit: &mut impl FnMut(&[u8; VnetHdr::LEN], &[u8])) {
        let Some((v4, l4, hdr)) = candidate(pkt) else {
            self.finish(emit);
            emit(&VnetHdr::PLAIN, pkt);
            return;
        };
        if self.joins(pkt, v4, l4, hdr) {
            let o = self.open.as_mut().expect("joins checked it");
            let payload = &pkt[hdr..];
            self.buf.extend_from_slice(payload);
            o.segments += 1;
            o.next_seq = o.next_seq.wrapping_add(payload.len() as u32);
            let psh = pkt[l4 + tcp::FLAGS] & TCP_PSH != 0;
            if psh {
                self.buf[l4 + tcp::FLAGS] |= TCP_PSH;
            }
            o.closed = psh || payload.len() < o.mss;
            return;
        }
        self.finish(emit);
        self.buf.clear();
        self.buf.extend_from_slice(pkt);
        let mss = pkt.len() - hdr;
        self.open = Some(Open {
            v4,
            l4,
            hdr,
            mss,
            segments: 1,
            next_seq: tcp_seq(pkt, l4).wrapping_add(mss as u32),
            closed: pkt[l4 + tcp::FLAGS] & TCP_PSH != 0,
        });
    }

    /// Whether `pkt` continues the open super-packet.
    fn joins(&self, pkt: &[u8], v4: bool, l4: usize, hdr: usize) -> bool {
        let Some(o) = self.open else { return false };
        let b = &self.buf;
        if o.closed || o.v4 != v4 || o.l4 != l4 || o.hdr != hdr {
            return false;
        }
        let payload = pkt.len() - hdr;
        if payload > o.mss || b.len() + payload > MAX_LEN || tcp_seq(pkt, l4) != o.next_seq {
            return false;
        }
        // The IP header: equal but for what segmentation sets per segment.
        let ip_same = if v4 {
            let id = get16(b, ipv4::IDENT).wrapping_add(o.segments as u16);
            pkt[ipv4::IDENT] == id.to_be_bytes()
                && pkt[..ipv4::LENGTH.start] == b[..ipv4::LENGTH.start]
                && pkt[ipv4::FLG_OFF.start..ipv4::CHECKSUM.start]
                    == b[ipv4::FLG_OFF.start..ipv4::CHECKSUM.start]
                && pkt[ipv4::CHECKSUM.end..l4] == b[ipv4::CHECKSUM.end..l4]
        } else {
            pkt[..ipv6::PAYLOAD_LEN.start] == b[..ipv6::PAYLOAD_LEN.start]
                && pkt[ipv6::PAYLOAD_LEN.end..l4] == b[ipv6::PAYLOAD_LEN.end..l4]
        };
        // The TCP header: ports, ack, window, options equal; flags equal but PSH.
        let (t, u) = (&pkt[l4..hdr], &b[l4..hdr]);
        ip_same
            && t[..tcp::SEQ_NUM.start] == u[..tcp::SEQ_NUM.start]
            && t[tcp::ACK_NUM.start..tcp::FLAGS] == u[tcp::ACK_NUM.start..tcp::FLAGS]
            && t[tcp::FLAGS] & !TCP_PSH == u[tcp::FLAGS] & !TCP_PSH
            && t[tcp::FLAGS + 1..tcp::CHECKSUM.start] == u[tcp::FLAGS + 1..tcp::CHECKSUM.start]
            && t[tcp::CHECKSUM.end..] == u[tcp::CHECKSUM.end..]
    }

    /// Emits the open super-packet (or lone packet), if any.
    pub fn finish(&mut self, emit: &mut impl FnMut(&[u8; VnetHdr::LEN], &[u8])) {
        let Some(o) = self.open.take() else { return };
        if o.segments == 1 {
            emit(&VnetHdr::PLAIN, &self.buf);
            return;
        }
        let len = self.buf.len();
        let b = &mut self.buf;
        if o.v4 {
            b[ipv4::LENGTH].copy_from_slice(&(len as u16).to_be_bytes());
            b[ipv4::CHECKSUM].copy_from_slice(&[0, 0]);
            let c = !fold(sum(&b[..o.l4], 0));
            b[ipv4::CHECKSUM].copy_from_slice(&c.to_ne_bytes());
        } else {
            b[ipv6::PAYLOAD_LEN].copy_from_slice(&((len - ipv6::HEADER_LEN) as u16).to_be_bytes());
        }
        // A partial checksum, as the kernel's own TCP leaves it for offload: the
        // pseudo-header's sum, folded, not complemented.
        let tcp_len = (len - o.l4) as u16;
        let addrs = if o.v4 {
            ipv4::SRC_ADDR.start..ipv4::DST_ADDR.end
        } else {
            ipv6::SRC_ADDR.start..ipv6::DST_ADDR.end
        };
        let [hi, lo] = tcp_len.to_be_bytes();
        let pseudo = fold(sum(&[0, PROTO_TCP, hi, lo], sum(&b[addrs], 0)));
        let at = o.l4 + tcp::CHECKSUM.start;
        b[at..at + 2].copy_from_slice(&pseudo.to_ne_bytes());
        let vh = VnetHdr {
            flags: VnetHdr::F_NEEDS_CSUM,
            gso_type: if o.v4 {
                VnetHdr::GSO_TCPV4
            } else {
                VnetHdr::GSO_TCPV6
            },
            hdr_len: o.hdr as u16,
            gso_size: o.mss as u16,
            csum_start: o.l4 as u16,
            csum_offset: tcp::CHECKSUM.start as u16,
        };
        emit(&vh.to_bytes(), &self.buf);
    }
}

#[cfg(test)]
mod tests;
