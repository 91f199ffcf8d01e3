//! The coalescer against the segmenter: what GRO joins, GSO must cut back into
//! exactly the segments that went in; what may not join is written as it came.

use super::*;
use crate::packet::TCP_FIN;
use crate::test_packets::*;
use proptest::prelude::*;

/// Every write the coalescer emits for `pkts`: (header, packet).
fn writes(pkts: &[Vec<u8>]) -> Vec<(VnetHdr, Vec<u8>)> {
    let mut g = Gro::new();
    let mut out = Vec::new();
    let mut emit =
        |h: &[u8; VnetHdr::LEN], p: &[u8]| out.push((VnetHdr::parse(h).unwrap(), p.to_vec()));
    for p in pkts {
        g.push(p, &mut emit);
    }
    g.finish(&mut emit);
    out
}

/// What the kernel makes of the writes: each cut back into packets.
fn cut(ws: &[(VnetHdr, Vec<u8>)]) -> Vec<Vec<u8>> {
    ws.iter().flat_map(|(h, p)| all(*h, p)).collect()
}

/// The packets TCP sends for `len` payload bytes at `mss` (flags on the last).
fn segments4(seq: u32, ident: u16, len: usize, mss: u16, flags: u8) -> Vec<Vec<u8>> {
    all(
        tso(VnetHdr::GSO_TCPV4, mss, 20),
        &tcp4(seq, flags, ident, &payload(len)),
    )
}

#[test]
fn segments_of_one_burst_become_one_super_packet_that_cuts_back_exactly() {
    let segs = segments4(0xffff_f000, 0xfffe, 10_000, 1400, TCP_ACK | TCP_PSH);
    assert_eq!(segs.len(), 8);
    let ws = writes(&segs);
    assert_eq!(ws.len(), 1);
    let (h, p) = &ws[0];
    assert_eq!(
        (h.flags, h.gso_type, h.gso_size, h.csum_start, h.csum_offset),
        (VnetHdr::F_NEEDS_CSUM, VnetHdr::GSO_TCPV4, 1400, 20, 16)
    );
    assert_eq!(p.len(), 20 + 32 + 10_000);
    assert_eq!(cut(&ws), segs);
    // The partial checksum is the kernel's kind: completing it gives a valid one.
    let done = all(
        VnetHdr {
            gso_type: VnetHdr::GSO_NONE,
            ..*h
        },
        p,
    );
    let tlen = ((p.len() - 20) as u16).to_be_bytes();
    assert_eq!(rfc1071(&[&SRC4, &DST4, &[0, 6], &tlen, &done[0][20..]]), 0);
    assert_eq!(rfc1071(&[&done[0][..20]]), 0, "IPv4 header checksum");
}

#[test]
fn ipv6_segments_join_and_cut_back() {
    let segs = all(
        tso(VnetHdr::GSO_TCPV6, 1000, 40),
        &tcp6(7, TCP_ACK, &payload(4500)),
    );
    let ws = writes(&segs);
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].0.gso_type, VnetHdr::GSO_TCPV6);
    assert_eq!(cut(&ws), segs);
    let done = all(
        VnetHdr {
            gso_type: VnetHdr::GSO_NONE,
            ..ws[0].0
        },
        &ws[0].1,
    );
    let tlen = ((ws[0].1.len() - 40) as u16).to_be_bytes();
    let pseudo: &[&[u8]] = &[&SRC6, &DST6, &[0, 0], &tlen, &[0, 0, 0, 6], &done[0][40..]];
    assert_eq!(rfc1071(pseudo), 0);
}

#[test]
fn what_may_not_join_is_written_as_it_came_in_order() {
    let a = segments4(1000, 1, 3000, 1000, TCP_ACK); // 3 full segments
    let mut other_ts = tcp4(4000, TCP_ACK, 4, &payload(1000));
    other_ts[20 + 31] ^= 1; // contiguous, but another TCP timestamp
    let gap = tcp4(9000, TCP_ACK, 5, &payload(1000)); // a sequence gap
    let fin = tcp4(10_000, TCP_ACK | TCP_FIN, 6, b"bye");
    let psh_first = tcp4(20_000, TCP_ACK | TCP_PSH, 7, &payload(1000));
    let after_psh = tcp4(21_000, TCP_ACK, 8, &payload(1000));
    let pkts = [a, vec![other_ts, gap, fin, psh_first, after_psh]].concat();
    let ws = writes(&pkts);
    let kinds: Vec<(u8, usize)> = ws.iter().map(|(h, p)| (h.gso_type, p.len())).collect();
    // a joins; each of the others is written alone (after_psh too: PSH closed
    // psh_first, and a lone packet is written as it came)
    let lone = |p: &Vec<u8>| (VnetHdr::GSO_NONE, p.len());
    let want: Vec<(u8, usize)> = std::iter::once((VnetHdr::GSO_TCPV4, 52 + 3000))
        .chain(pkts[3..].iter().map(lone))
        .collect();
    assert_eq!(kinds, want);
    assert_eq!(cut(&ws), pkts, "every packet written, in order, unchanged");
}

#[test]
fn a_short_segment_ends_a_super_packet() {
    let mut pkts = segments4(1, 10, 2500, 1000, TCP_ACK); // 1000, 1000, 500
    pkts.extend(segments4(2501, 13, 2000, 1000, TCP_ACK)); // contiguous, after the short one
    let ws = writes(&pkts);
    assert_eq!(ws.len(), 2);
    assert_eq!(cut(&ws), pkts);
}

#[test]
fn identifications_must_follow_each_other() {
    let mut pkts = segments4(1, 10, 3000, 1000, TCP_ACK);
    pkts[2] = tcp4(2001, TCP_ACK, 99, &payload(3000)[2000..]);
    let ws = writes(&pkts);
    assert_eq!(ws.len(), 2);
    assert_eq!(cut(&ws), pkts);
}

proptest! {
    /// Any run of bursts, each of any length and MSS, with non-TCP packets in
    /// between: the writes cut back into exactly the packets that went in.
    #[test]
    fn writes_cut_back_into_the_packets(
        bursts in proptest::collection::vec((0usize..5000, 1u16..1500, any::<u32>(), any::<bool>()), 1..6)
    ) {
        let mut pkts = Vec::new();
        for (i, (len, mss, seq, psh)) in bursts.iter().enumerate() {
            let flags = if *psh { TCP_ACK | TCP_PSH } else { TCP_ACK };
            pkts.extend(segments4(*seq, i as u16 * 100, *len, *mss, flags));
            if i % 2 == 1 {
                pkts.push(vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
            }
        }
        let ws = writes(&pkts);
        prop_assert!(ws.iter().all(|(_, p)| p.len() <= 65535));
        prop_assert_eq!(cut(&ws), pkts);
    }
}
