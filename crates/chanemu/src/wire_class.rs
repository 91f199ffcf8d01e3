//! Which packets a shared LLC serves first (`--control-first`, rule (d) of
//! issue 41: docs/llc_sharing.md), judged from what the emulator sees: on the
//! LLC link the packets are the agents' outer IP/UDP datagrams in the
//! dchannel wire format (docs/wire.md), so the class comes from the wire
//! format's clear bytes and sizes, never from the inner packet (encrypted by
//! default).
//!
//! **Control** (served first):
//! * handshake messages (first byte `0x21` initiation, `0x22` response,
//!   `0x23` cookie reply) and keepalives (`0x20`, 29 bytes, no header): the
//!   agents' own session set-up and liveness;
//! * probes (the dchannel header's type `1`: D-SYN, D-SYN-ACK, D-ACK, wake),
//!   readable because the header is sent in clear (authenticated, not
//!   encrypted); version 1 (`--insecure`) has the header at byte 0,
//!   version 2 after the 13-byte prefix (type, index, counter);
//! * data datagrams whose inner IP packet is at most [`CONTROL_INNER_MAX`]
//!   bytes: a TCP SYN/SYN-ACK (IPv4 with options: 60 B; IPv6: 80 B), pure
//!   ACK, FIN or RST (52 B with timestamps; IPv6: 72 B), a small QUIC
//!   short-header packet (ACK-sized: ≤ 48 UDP bytes, 76/96 B) and DNS-sized
//!   queries. The inner TCP flags are encrypted, so size is the only honest
//!   test, and the same one is used with `--insecure` so that the rule does
//!   not depend on encryption.
//!
//! **Bulk**: everything else, including QUIC long-header (handshake) packets:
//! a client's Initial is padded to at least 1200 bytes (RFC 9000 §14.1), so
//! from outside it cannot be told from data; and anything not in the wire
//! format (nothing else should be on the LLC).

/// Largest inner IP packet of a data datagram that is served first: an IPv6
/// SYN with the usual options (40 + 40 bytes) and every pure ACK, FIN, RST and
/// ACK-sized QUIC packet fit; a full-size data segment never does.
pub const CONTROL_INNER_MAX: usize = 96;

/// Bytes of the dchannel header (docs/wire.md).
const HEADER_LEN: usize = 16;
/// Version-2 transport prefix: type (1), receiver index (4), counter (8).
const V2_PREFIX: usize = 13;
/// Version-2 AEAD tag.
const V2_TAG: usize = 16;
/// A version-2 keepalive: prefix and tag only.
const V2_KEEPALIVE: usize = V2_PREFIX + V2_TAG;

/// The two classes of the shared queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Served first: handshakes, probes, keepalives, payload-free packets.
    Control = 0,
    /// Everything else, first come first served.
    Bulk = 1,
}

/// The class of the outer IP packet `pkt` (IPv4 or IPv6 carrying UDP).
pub fn classify(pkt: &[u8]) -> Class {
    match udp_payload(pkt) {
        Some(p) => classify_datagram(p),
        None => Class::Bulk,
    }
}

/// The class of one dchannel datagram (the UDP payload).
pub fn classify_datagram(d: &[u8]) -> Class {
    let Some(&first) = d.first() else {
        return Class::Bulk;
    };
    let (header, inner) = match first {
        0x21..=0x23 => return Class::Control,
        0x20 if d.len() == V2_KEEPALIVE => return Class::Control,
        0x20 if d.len() >= V2_KEEPALIVE + HEADER_LEN => {
            (&d[V2_PREFIX..], d.len() - V2_KEEPALIVE - HEADER_LEN)
        }
        0x10..=0x1f if d.len() >= HEADER_LEN => (d, d.len() - HEADER_LEN),
        _ => return Class::Bulk,
    };
    let probe = header[0] & 0x0f == 1;
    if probe || inner <= CONTROL_INNER_MAX {
        Class::Control
    } else {
        Class::Bulk
    }
}

/// The UDP payload of IPv4/IPv6 packet `pkt`, if it carries UDP directly.
fn udp_payload(pkt: &[u8]) -> Option<&[u8]> {
    let (proto, l4) = match pkt.first()? >> 4 {
        4 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            (*pkt.get(9)?, pkt.get(ihl..)?)
        }
        6 => (*pkt.get(6)?, pkt.get(40..)?),
        _ => return None,
    };
    (proto == 17).then(|| l4.get(8..)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/UDP packet carrying `payload`.
    fn udp4(payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[9] = 17;
        p.extend_from_slice(payload);
        p
    }

    /// A version-2 transport datagram: prefix, a header of `msg_type`, an
    /// inner packet of `inner` bytes (ciphertext) and the tag.
    fn v2(msg_type: u8, inner: usize) -> Vec<u8> {
        let mut d = vec![0x20];
        d.extend_from_slice(&[0; 12]);
        let mut h = [0u8; HEADER_LEN];
        h[0] = 0x20 | msg_type;
        d.extend_from_slice(&h);
        d.extend(std::iter::repeat(0xaa).take(inner));
        d.extend_from_slice(&[0; V2_TAG]);
        d
    }

    #[test]
    fn handshakes_keepalives_and_probes_are_control() {
        for (t, len) in [(0x21u8, 146), (0x22, 73), (0x23, 61)] {
            let mut d = vec![t];
            d.resize(len, 0);
            assert_eq!(classify(&udp4(&d)), Class::Control, "type {t:#x}");
        }
        let mut keepalive = vec![0x20];
        keepalive.resize(29, 0);
        assert_eq!(classify(&udp4(&keepalive)), Class::Control);
        // a probe body is 2 bytes (kind, channel)
        assert_eq!(classify(&udp4(&v2(1, 2))), Class::Control);
        // version 1 (--insecure): the header at byte 0, type 1 = probe
        let mut v1 = vec![0x11];
        v1.resize(HEADER_LEN + 2, 0);
        assert_eq!(classify(&udp4(&v1)), Class::Control);
    }

    #[test]
    fn data_is_control_up_to_the_size_of_a_syn_and_bulk_above() {
        // 52 B: an IPv4 pure ACK with timestamps; 96 B: the limit; 97 B over
        assert_eq!(classify(&udp4(&v2(0, 52))), Class::Control);
        assert_eq!(classify(&udp4(&v2(0, CONTROL_INNER_MAX))), Class::Control);
        assert_eq!(classify(&udp4(&v2(0, CONTROL_INNER_MAX + 1))), Class::Bulk);
        // a QUIC Initial (>= 1200 B) is bulk: it cannot be told from data
        assert_eq!(classify(&udp4(&v2(0, 1228))), Class::Bulk);
        // version 1: the same size rule
        let mut v1 = vec![0x10];
        v1.resize(HEADER_LEN + 1400, 0);
        assert_eq!(classify(&udp4(&v1)), Class::Bulk);
        v1.truncate(HEADER_LEN + 60);
        assert_eq!(classify(&udp4(&v1)), Class::Control);
    }

    #[test]
    fn anything_outside_the_wire_format_is_bulk() {
        assert_eq!(classify(&[]), Class::Bulk);
        assert_eq!(classify(&udp4(&[])), Class::Bulk);
        assert_eq!(classify(&udp4(&[0x99; 40])), Class::Bulk);
        // a transport datagram too short for a header, not a keepalive
        assert_eq!(classify(&udp4(&[0x20; 35])), Class::Bulk);
        // TCP, not UDP
        let mut tcp = udp4(&v2(1, 2));
        tcp[9] = 6;
        assert_eq!(classify(&tcp), Class::Bulk);
        // IPv6/UDP is read at offset 40
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[6] = 17;
        v6.extend_from_slice(&v2(1, 2));
        assert_eq!(classify(&v6), Class::Control);
    }
}
