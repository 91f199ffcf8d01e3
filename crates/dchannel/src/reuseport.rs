//! A gateway's worker sockets (`--threads N`): N UDP sockets per channel on
//! the same address (`SO_REUSEPORT`), and a classic BPF program on the group
//! (`SO_ATTACH_REUSEPORT_CBPF`) that hands each datagram to socket
//! `receiver index mod N`, so that worker k receives exactly the datagrams
//! of the devices it serves.
//!
//! Why the index: every session index the gateway picks for device i is
//! ≡ i (mod N) (`dchannel_crypto::Config::index_shards`), and receive worker
//! k serves the devices ≡ k (`dchannel_core::endpoint::new_workers`). A
//! transport datagram carries the index in clear at bytes 1..5 (docs/wire.md),
//! so the kernel can route it before any user-space work and no worker ever
//! hands a datagram to another. Handshake initiations have random bytes there
//! and land on any worker, which is fine: the session table is shared and
//! locks per device. The program sees the UDP payload from offset 0
//! (the kernel pulls the UDP header before running it); a datagram shorter
//! than 5 bytes ends the program at the load and goes to socket 0.

use crate::net::channel_socket;
use anyhow::{Context, Result};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Offset of the receiver index in a transport datagram (after the type byte).
const INDEX_OFFSET: u32 = 1;

/// `ld [INDEX_OFFSET]` (32 bits, network order); `A %= n`; `return A`.
fn program(n: u32) -> [libc::sock_filter; 3] {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const MOD_K: u16 = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
    const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    let insn = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    [insn(LD_W_ABS, INDEX_OFFSET), insn(MOD_K, n), insn(RET_A, 0)]
}

/// `n` sockets bound to `local` (and `dev`), in one `SO_REUSEPORT` group
/// steered by receiver index; socket k is worker k's. One socket (n = 1):
/// a plain socket, as without `--threads`.
pub fn worker_sockets(
    local: SocketAddr,
    dev: Option<&str>,
    what: &str,
    n: usize,
) -> Result<Vec<UdpSocket>> {
    if n <= 1 {
        return Ok(vec![channel_socket(local, dev, what, false)?]);
    }
    let mut socks = Vec::with_capacity(n);
    // Bound in order: the group's socket k is the k-th bound (what the program's
    // return value selects).
    for k in 0..n {
        let s = channel_socket(local, dev, &format!("{what} (worker {k})"), true)?;
        if k == 0 {
            attach_steering(&s, n as u32).with_context(|| {
                format!(
                    "{what}: SO_ATTACH_REUSEPORT_CBPF (--threads {n} needs Linux 4.6 or later; \
                     --threads 1 runs without it)"
                )
            })?;
        }
        socks.push(s);
    }
    Ok(socks)
}

/// Attaches the steering program for `n` sockets to `sock`'s reuseport group.
fn attach_steering(sock: &UdpSocket, n: u32) -> std::io::Result<()> {
    let prog = program(n);
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: setsockopt with a valid fd and a sock_fprog pointing at `prog`,
    // which outlives the call (the kernel copies the program).
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Datagrams whose bytes 1..5 (a transport datagram's receiver index,
    /// big-endian) are ≡ k (mod 3) arrive at socket k, whichever source
    /// port sent them; a 3-byte datagram (no index) at socket 0.
    #[test]
    fn the_kernel_hands_each_datagram_to_the_socket_of_its_index() {
        let free = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let socks = worker_sockets(free, None, "test", 3).unwrap();
        for s in &socks {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        let senders: Vec<UdpSocket> = (0..4)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for (i, index) in [7u32, 8, 9, 0xffff_fffe, 0x1234_5678, 3].iter().enumerate() {
            let mut d = [0x20u8; 24];
            d[1..5].copy_from_slice(&index.to_be_bytes());
            senders[i % 4].send_to(&d, free).unwrap();
            let mut buf = [0u8; 64];
            let k = (index % 3) as usize;
            let (n, _) = socks[k].recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], &d, "index {index} at socket {k}");
        }
        senders[0].send_to(&[0x20, 1, 2], free).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(socks[0].recv_from(&mut buf).unwrap().0, 3);
        // nothing went anywhere else
        for s in &socks {
            s.set_nonblocking(true).unwrap();
            assert!(s.recv_from(&mut buf).is_err());
        }
    }
}
