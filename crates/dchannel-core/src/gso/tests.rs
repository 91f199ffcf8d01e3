//! The segmenter against packets built independently: the segments of a
//! super-packet must be byte for byte the packets the kernel would have sent
//! without TSO (same headers, RFC 1071 checksums computed here word by word).

use super::*;
use crate::test_packets::*;
use proptest::prelude::*;

#[test]
fn an_ipv4_super_packet_becomes_the_packets_tcp_would_have_sent() {
    let p = payload(2500);
    let flags = crate::packet::TCP_ACK | TCP_PSH | TCP_FIN | TCP_CWR;
    // the kernel leaves a partial checksum in the super-packet: the segmenter ignores it
    let mut sup = tcp4(0xffff_fc00, flags, 0xfffe, &p);
    sup[20 + 16..20 + 18].copy_from_slice(&[0x12, 0x34]);
    let got = all(tso(VnetHdr::GSO_TCPV4, 1000, 20), &sup);
    let ack = crate::packet::TCP_ACK;
    let want = vec![
        tcp4(0xffff_fc00, ack | TCP_CWR, 0xfffe, &p[..1000]),
        tcp4(
            0xffff_fc00u32.wrapping_add(1000),
            ack,
            0xffff,
            &p[1000..2000],
        ),
        // sequence numbers and identifications wrap
        tcp4(
            0xffff_fc00u32.wrapping_add(2000),
            ack | TCP_PSH | TCP_FIN,
            0,
            &p[2000..],
        ),
    ];
    assert_eq!(got, want);
}

#[test]
fn an_ipv6_super_packet_becomes_the_packets_tcp_would_have_sent() {
    let p = payload(3000);
    let ack = crate::packet::TCP_ACK;
    let sup = tcp6(5, ack | TCP_PSH, &p);
    let got = all(tso(VnetHdr::GSO_TCPV6, 1440, 40), &sup);
    let want = vec![
        tcp6(5, ack, &p[..1440]),
        tcp6(5 + 1440, ack, &p[1440..2880]),
        tcp6(5 + 2880, ack | TCP_PSH, &p[2880..]),
    ];
    assert_eq!(got, want);
}

#[test]
fn a_payload_of_exactly_n_segments_makes_n_and_the_ecn_bit_is_understood() {
    let p = payload(2000);
    let sup = tcp4(1, crate::packet::TCP_ACK, 9, &p);
    let got = all(tso(VnetHdr::GSO_TCPV4 | VnetHdr::GSO_ECN, 1000, 20), &sup);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1], tcp4(1001, crate::packet::TCP_ACK, 10, &p[1000..]));
}

#[test]
fn a_plain_packet_passes_unchanged() {
    let pkt = tcp4(1, crate::packet::TCP_ACK, 3, b"hello");
    assert_eq!(all(VnetHdr::default(), &pkt), vec![pkt.clone()]);
    assert_eq!(VnetHdr::parse(&VnetHdr::PLAIN).unwrap(), VnetHdr::default());
}

#[test]
fn a_partial_checksum_is_completed_as_the_kernel_would() {
    // UDP/IPv4 (odd payload): the field holds the pseudo-header's sum, not complemented
    let data = b"odd-length payload!";
    let ulen = (8 + data.len()) as u16;
    let mut udp = vec![0x30, 0x39, 0x01, 0xbb];
    udp.extend_from_slice(&ulen.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    let want = rfc1071(&[&SRC4, &DST4, &[0, 17], &ulen.to_be_bytes(), &udp, data]);
    let pseudo = !rfc1071(&[&SRC4, &DST4, &[0, 17], &ulen.to_be_bytes()]);
    udp[6..8].copy_from_slice(&pseudo.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&(20 + ulen).to_be_bytes());
    ip.extend_from_slice(&SRC4);
    ip.extend_from_slice(&DST4);
    let pkt = [ip, udp, data.to_vec()].concat();
    let vh = VnetHdr {
        flags: VnetHdr::F_NEEDS_CSUM,
        csum_start: 20,
        csum_offset: 6,
        ..VnetHdr::default()
    };
    let got = all(vh, &pkt);
    assert_eq!(got.len(), 1);
    assert_eq!(u16::from_be_bytes([got[0][26], got[0][27]]), want);
    assert_eq!(got[0][..26], pkt[..26]);
}

#[test]
fn bad_headers_are_refused_with_what_was_expected() {
    let sup = tcp4(1, 0x10, 1, &payload(3000));
    assert_eq!(VnetHdr::parse(&[0; 9]), Err(GsoError::ShortHeader(9)));
    let e = |vh, pkt: &[u8]| Segments::new(vh, pkt).err().unwrap();
    assert_eq!(
        e(tso(VnetHdr::GSO_UDP, 1000, 20), &sup),
        GsoError::UnsupportedGsoType(3)
    );
    assert_eq!(
        e(tso(VnetHdr::GSO_TCPV4, 0, 20), &sup),
        GsoError::ZeroGsoSize
    );
    assert_eq!(
        e(tso(VnetHdr::GSO_TCPV4, 1000, 20), &sup[..40]),
        GsoError::TruncatedHeaders { need: 52, have: 40 }
    );
    let mut v5 = sup.clone();
    v5[0] = 0x55;
    assert_eq!(
        e(tso(VnetHdr::GSO_TCPV4, 1000, 20), &v5),
        GsoError::BadIpVersion(5)
    );
    let mut udp = sup.clone();
    udp[9] = 17;
    assert_eq!(
        e(tso(VnetHdr::GSO_TCPV4, 1000, 20), &udp),
        GsoError::NotTcp(17)
    );
    let vh = VnetHdr {
        flags: VnetHdr::F_NEEDS_CSUM,
        csum_start: 3000,
        csum_offset: 40,
        ..VnetHdr::default()
    };
    assert_eq!(
        e(vh, &sup[..100]),
        GsoError::ChecksumOutOfRange {
            end: 3042,
            have: 100
        }
    );
    assert!(GsoError::UnsupportedGsoType(3)
        .to_string()
        .contains("expected 0 (none), 1 (TCPv4) or 4 (TCPv6)"));
}

proptest! {
    /// Any payload and MSS: the segments are the packets TCP would have sent, and
    /// garbage in front of a super-packet's header never panics.
    #[test]
    fn segments_match_per_packet_sends(len in 0usize..6000, mss in 1u16..2000, seq: u32, ident: u16) {
        let p = payload(len);
        let ack = crate::packet::TCP_ACK;
        let got = all(tso(VnetHdr::GSO_TCPV4, mss, 20), &tcp4(seq, ack | TCP_PSH, ident, &p));
        let chunks: Vec<&[u8]> = if p.is_empty() { vec![&p[..]] } else { p.chunks(mss as usize).collect() };
        prop_assert_eq!(got.len(), chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let flags = if last { ack | TCP_PSH } else { ack };
            let off = (i * mss as usize) as u32;
            prop_assert_eq!(&got[i], &tcp4(seq.wrapping_add(off), flags, ident.wrapping_add(i as u16), c));
        }
    }

    /// Arbitrary virtio headers before arbitrary bytes (IPv4/IPv6/TCP-looking
    /// often enough to be accepted): never a panic, and whatever is accepted
    /// is cut as announced: `count()` packets, none over `max_len()`; a plain
    /// packet comes out unchanged (but for a completed checksum); TCP segments
    /// share one header length, are full-sized but for the last, and their
    /// payloads put end to end are the super-packet's payload.
    #[test]
    fn garbage_never_panics_and_what_is_accepted_is_cut_as_announced(
        hdr in proptest::collection::vec(any::<u8>(), 10),
        gso in prop_oneof![Just(VnetHdr::GSO_NONE), Just(VnetHdr::GSO_TCPV4), Just(VnetHdr::GSO_TCPV6), any::<u8>()],
        mss in prop_oneof![1u16..64, any::<u16>()],
        first in prop_oneof![Just(0x45u8), Just(0x60u8), any::<u8>()],
        mut pkt in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut vh = VnetHdr::parse(&hdr).unwrap();
        vh.gso_type = gso;
        vh.gso_size = mss;
        if let Some(b) = pkt.first_mut() {
            *b = first;
        }
        if pkt.len() > 9 && first == 0x45 {
            pkt[9] = crate::packet::PROTO_TCP;
        }
        let Ok(mut s) = Segments::new(vh, &pkt) else { return Ok(()) };
        let mut buf = vec![0u8; s.max_len()];
        let mut got = Vec::new();
        while let Some(n) = s.next_into(&mut buf) {
            prop_assert!(n <= s.max_len());
            got.push(buf[..n].to_vec());
        }
        prop_assert_eq!(got.len(), s.count());
        prop_assert!(!got.is_empty());
        let kind = gso & !VnetHdr::GSO_ECN;
        if kind == VnetHdr::GSO_NONE {
            prop_assert_eq!(got.len(), 1);
            prop_assert_eq!(got[0].len(), pkt.len());
            if vh.flags & VnetHdr::F_NEEDS_CSUM == 0 {
                prop_assert_eq!(&got[0], &pkt);
            } else {
                let at = vh.csum_start as usize + vh.csum_offset as usize;
                prop_assert_eq!(&got[0][..at], &pkt[..at]);
                prop_assert_eq!(&got[0][at + 2..], &pkt[at + 2..]);
            }
        } else if got.len() == 1 {
            prop_assert_eq!(got[0].len(), pkt.len(), "one segment: the whole packet");
        } else {
            // len_i = hdr + chunk_i, chunks sum to pkt.len() - hdr
            let total: usize = got.iter().map(Vec::len).sum();
            let extra = total - pkt.len();
            prop_assert_eq!(extra % (got.len() - 1), 0);
            let h = extra / (got.len() - 1);
            let mss = mss as usize;
            for g in &got[..got.len() - 1] {
                prop_assert_eq!(g.len(), h + mss);
            }
            let last = got.last().unwrap().len() - h;
            prop_assert!(last >= 1 && last <= mss);
            let payload: Vec<u8> = got.iter().flat_map(|g| g[h..].to_vec()).collect();
            prop_assert_eq!(&payload[..], &pkt[h..]);
        }
    }
}
