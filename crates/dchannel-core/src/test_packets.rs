//! Packets built the slow, obvious way for the offload tests (gso, gro): the
//! reference the fast code is compared with, byte for byte.

use crate::gso::{Segments, VnetHdr};

/// RFC 1071 the slow, obvious way: big-endian 16-bit words, end-around carry.
pub(crate) fn rfc1071(parts: &[&[u8]]) -> u16 {
    let bytes: Vec<u8> = parts.concat();
    let mut s: u32 = 0;
    for w in bytes.chunks(2) {
        let v = if w.len() == 2 {
            u16::from_be_bytes([w[0], w[1]])
        } else {
            u16::from_be_bytes([w[0], 0])
        };
        s += v as u32;
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

pub(crate) const SRC4: [u8; 4] = [198, 19, 0, 2];
pub(crate) const DST4: [u8; 4] = [198, 18, 0, 9];
pub(crate) const TCP_OPTS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]; // NOP NOP timestamps

/// A TCP header with timestamps (32 bytes), ports 443 → 50000, ack 77.
pub(crate) fn tcp_header(seq: u32, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&443u16.to_be_bytes());
    t[2..4].copy_from_slice(&50000u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&77u32.to_be_bytes());
    t[12] = (((20 + TCP_OPTS.len()) / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    t.extend_from_slice(&TCP_OPTS);
    t
}

/// A TCP/IPv4 packet with correct checksums.
pub(crate) fn tcp4(seq: u32, flags: u8, ident: u16, payload: &[u8]) -> Vec<u8> {
    let mut t = tcp_header(seq, flags);
    let tlen = (t.len() + payload.len()) as u16;
    let c = rfc1071(&[&SRC4, &DST4, &[0, 6], &tlen.to_be_bytes(), &t, payload]);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
    ip[2..4].copy_from_slice(&(20 + tlen).to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip.extend_from_slice(&SRC4);
    ip.extend_from_slice(&DST4);
    let c = rfc1071(&[&ip]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    [ip, t, payload.to_vec()].concat()
}

pub(crate) const SRC6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
pub(crate) const DST6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];

/// A TCP/IPv6 packet with a correct checksum.
pub(crate) fn tcp6(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = tcp_header(seq, flags);
    let tlen = (t.len() + payload.len()) as u16;
    let c = rfc1071(&[
        &SRC6,
        &DST6,
        &[0, 0],
        &tlen.to_be_bytes(),
        &[0, 0, 0, 6],
        &t,
        payload,
    ]);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x60, 0, 0, 0, 0, 0, 6, 64];
    ip[4..6].copy_from_slice(&tlen.to_be_bytes());
    ip.extend_from_slice(&SRC6);
    ip.extend_from_slice(&DST6);
    [ip, t, payload.to_vec()].concat()
}

/// A TSO header as the kernel writes it (partial checksum at the TCP header).
pub(crate) fn tso(gso_type: u8, mss: u16, l4: u16) -> VnetHdr {
    VnetHdr {
        flags: VnetHdr::F_NEEDS_CSUM,
        gso_type,
        hdr_len: l4 + 32,
        gso_size: mss,
        csum_start: l4,
        csum_offset: 16,
    }
}

/// `n` bytes of a pattern that repeats only every 251 × 256 bytes.
pub(crate) fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Every packet `Segments` makes of `pkt` behind the header `vh`.
pub(crate) fn all(vh: VnetHdr, pkt: &[u8]) -> Vec<Vec<u8>> {
    let mut s = Segments::new(vh, pkt).unwrap();
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::new();
    assert!(s.max_len() <= buf.len());
    while let Some(n) = s.next_into(&mut buf) {
        assert!(n <= s.max_len());
        out.push(buf[..n].to_vec());
    }
    assert_eq!(out.len(), s.count());
    out
}
