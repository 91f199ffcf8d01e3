//! The channel sockets' kernel prefilter: a classic BPF program
//! (`SO_ATTACH_FILTER`) that drops every datagram whose first byte and length
//! fit none of the authentication layer's [`Shape`]s, before it is queued.
//!
//! Why: a flood of garbage at a gateway's ports otherwise costs a `recvmmsg`
//! copy and a parse per datagram in the agent's receive thread, the thread
//! that also carries the legitimate traffic (docs/reliability.md "Floods").
//! Refused in the kernel's receive path, such a datagram never wakes the
//! agent. What passes the filter still has to authenticate (`open`), so the
//! filter is a cost cut, not a security boundary; it is loose on purpose.
//!
//! The kernel counts what it drops per socket (the filter's refusals and
//! datagrams that met a full receive buffer alike); [`kernel_drops`] reads
//! that count for the stats (`channels.*.kernel_drops`).

use dchannel_core::endpoint::Shape;
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};

// Classic BPF opcodes, composed as linux/filter.h does (class | size | mode,
// or class | op | source), in the order the program uses them.
use libc::{BPF_ABS, BPF_ALU, BPF_AND, BPF_B, BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JMP, BPF_K};
use libc::{BPF_LD, BPF_LEN, BPF_MEM, BPF_MISC, BPF_RET, BPF_ST, BPF_TAX, BPF_TXA, BPF_W};
/// A = skb->len.
const LD_LEN: u16 = (BPF_LD | BPF_W | BPF_LEN) as u16;
/// X = A.
const TAX: u16 = (BPF_MISC | BPF_TAX) as u16;
/// A = the byte at offset k.
const LDB_ABS: u16 = (BPF_LD | BPF_B | BPF_ABS) as u16;
/// M[k] = A.
const ST: u16 = BPF_ST as u16;
/// A = M[k].
const LD_MEM: u16 = (BPF_LD | BPF_W | BPF_MEM) as u16;
/// A &= k.
const AND_K: u16 = (BPF_ALU | BPF_AND | BPF_K) as u16;
/// A == k ?
const JEQ_K: u16 = (BPF_JMP | BPF_JEQ | BPF_K) as u16;
/// A = X.
const TXA: u16 = (BPF_MISC | BPF_TXA) as u16;
/// A >= k ?
const JGE_K: u16 = (BPF_JMP | BPF_JGE | BPF_K) as u16;
/// A > k ?
const JGT_K: u16 = (BPF_JMP | BPF_JGT | BPF_K) as u16;
/// Keep k bytes of the datagram (0: drop it).
const RET_K: u16 = (BPF_RET | BPF_K) as u16;

/// A socket filter runs with `skb->data` at the UDP header: the datagram's
/// first byte is at offset 8 and `skb->len` counts the header.
const UDP_HEADER: u32 = 8;
/// Instructions per shape (see [`program`]).
const PER_SHAPE: u8 = 7;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter for `shapes`: accept a datagram that fits any of them, drop
/// the rest (a datagram too short to have a first byte included: the load
/// past its end ends the program with "drop").
pub fn program(shapes: &[Shape]) -> Vec<libc::sock_filter> {
    let mut p = vec![
        insn(LD_LEN, 0, 0, 0),
        insn(TAX, 0, 0, 0),
        insn(LDB_ABS, 0, 0, UDP_HEADER),
        insn(ST, 0, 0, 0),
    ];
    for s in shapes {
        // Each block falls through to the next on a mismatch: jump offsets
        // count the instructions skipped after the jump.
        p.extend([
            insn(LD_MEM, 0, 0, 0),
            insn(AND_K, 0, 0, s.mask.into()),
            insn(JEQ_K, 0, PER_SHAPE - 3, (s.first & s.mask).into()),
            insn(TXA, 0, 0, 0),
            insn(JGE_K, 0, PER_SHAPE - 5, s.min_len as u32 + UDP_HEADER),
            insn(JGT_K, PER_SHAPE - 6, 0, s.max_len as u32 + UDP_HEADER),
            insn(RET_K, 0, 0, u32::MAX),
        ]);
    }
    p.push(insn(RET_K, 0, 0, 0));
    p
}

/// Attaches the filter for `shapes` to `sock` (nothing when a shape admits
/// anything).
pub fn attach(sock: &UdpSocket, shapes: &[Shape]) -> io::Result<()> {
    if shapes.contains(&Shape::ANY) {
        return Ok(());
    }
    socket2::SockRef::from(sock).attach_filter(&program(shapes))
}

/// Datagrams the kernel dropped at `fd` since it was opened: refused by the
/// prefilter or arriving at a full receive buffer (`SK_MEMINFO_DROPS`).
pub fn kernel_drops(fd: RawFd) -> u64 {
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < std::mem::size_of_val(&info) {
        return 0;
    }
    info[libc::SK_MEMINFO_DROPS as usize].into()
}

/// The raw descriptors of both channel sockets, for [`kernel_drops`].
pub fn fds(socks: &[UdpSocket; 2]) -> [RawFd; 2] {
    [socks[0].as_raw_fd(), socks[1].as_raw_fd()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use dchannel_base::testing::{can_run, in_ns, sh, unique_tag};
    use std::time::Duration;

    #[test]
    fn opcodes_are_the_kernels_numbers() {
        let ops = [
            LD_LEN, TAX, LDB_ABS, ST, LD_MEM, AND_K, JEQ_K, TXA, JGE_K, JGT_K, RET_K,
        ];
        let want = [
            0x80, 0x07, 0x30, 0x02, 0x60, 0x54, 0x15, 0x87, 0x35, 0x25, 0x06,
        ];
        assert_eq!(ops, want);
    }

    const ENCRYPTED: [Shape; 4] = [
        Shape {
            mask: 0xff,
            first: 0x20,
            min_len: 29,
            max_len: 65535,
        },
        Shape {
            mask: 0xff,
            first: 0x21,
            min_len: 146,
            max_len: 146,
        },
        Shape {
            mask: 0xff,
            first: 0x22,
            min_len: 73,
            max_len: 73,
        },
        Shape {
            mask: 0xff,
            first: 0x23,
            min_len: 61,
            max_len: 61,
        },
    ];

    fn dg(first: u8, len: usize) -> Vec<u8> {
        let mut v = vec![0xa5; len];
        if len > 0 {
            v[0] = first;
        }
        v
    }

    /// The kernel runs the program: in a namespace of its own, datagrams of
    /// every shape and of none go to a filtered socket over loopback; exactly
    /// the fitting ones arrive, in order, and the kernel counts the rest.
    #[test]
    fn the_kernel_delivers_exactly_the_datagrams_that_fit() {
        if !can_run(false) {
            return;
        }
        let ns = format!("dchpf{}", unique_tag());
        sh(&["ip", "netns", "add", &ns]);
        sh(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        let cases: Vec<(Vec<u8>, bool)> = vec![
            (dg(0x20, 29), true),    // a keepalive
            (dg(0x20, 1400), true),  // a data datagram
            (dg(0x20, 28), false),   // cut inside the tag
            (dg(0x21, 146), true),   // an initiation
            (dg(0x21, 147), false),  // one byte too many
            (dg(0x21, 145), false),  // one byte short
            (dg(0x21, 110), false),  // an initiation of the format before mac1/mac2
            (dg(0x22, 73), true),    // a response
            (dg(0x22, 1000), false), // a response of the wrong size
            (dg(0x23, 61), true),    // a cookie reply
            (dg(0x23, 62), false),   // one byte too many
            (dg(0x10, 100), false),  // a version-1 (plaintext) header
            (dg(0xff, 1400), false), // anything else
            (dg(0x00, 0), false),    // nothing at all
            (dg(0x20, 65000), true), // the largest kind, far from its bound
        ];
        let expect: Vec<Vec<u8>> = cases
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(d, _)| d.clone())
            .collect();
        let refused = cases.len() - expect.len();
        let (got, drops) = in_ns(&ns, move || {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            attach(&rx, &ENCRYPTED).unwrap();
            rx.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            for (d, _) in &cases {
                tx.send_to(d, rx.local_addr().unwrap()).unwrap();
            }
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = rx.recv(&mut buf) {
                got.push(buf[..n].to_vec());
            }
            (got, kernel_drops(rx.as_raw_fd()))
        })
        .join()
        .unwrap();
        sh(&["ip", "netns", "del", &ns]);
        let lens = |v: &[Vec<u8>]| {
            v.iter()
                .map(|d| (d.first().copied(), d.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(lens(&got), lens(&expect));
        assert_eq!(got, expect, "byte-exact");
        assert_eq!(drops, refused as u64, "every refusal counted");
    }

    #[test]
    fn a_layer_that_accepts_anything_gets_no_filter() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        attach(&s, &[Shape::ANY]).unwrap();
        assert_eq!(kernel_drops(s.as_raw_fd()), 0);
        // four loads, seven instructions a shape, one final drop
        assert_eq!(program(&ENCRYPTED).len(), 4 + 4 * 7 + 1);
    }
}
