//! Receiving up to [`BATCH`] datagrams from one UDP socket in one `recvmmsg(2)`
//! call: the receive loop's syscall cost is paid once per batch, not once per
//! datagram (a flood of bad datagrams at the gateway's ports costs the
//! legitimate transfer beside it less; docs/reliability.md "Floods").
//!
//! The batch owns its buffers; the loop takes each received buffer out with
//! [`Batch::take`] (the receive half keeps it, as it keeps a `recv_from`
//! buffer) and the batch refills the slot from the loop's pool before the next
//! call.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Datagrams per `recvmmsg` call: 32 × 1500 B fits a socket's default receive
/// burst and keeps the buffers (~48 KiB) in cache.
pub const BATCH: usize = 32;

/// One received datagram of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Bytes received into the slot's buffer.
    pub len: usize,
    /// The sender's address.
    pub from: SocketAddr,
    /// The datagram was longer than the buffer (`MSG_TRUNC`) or filled it: possibly
    /// cut short, never to be forwarded.
    pub truncated: bool,
}

/// Buffers and kernel headers for one `recvmmsg` call, reused across calls.
pub struct Batch {
    bufs: Vec<Vec<u8>>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    hdrs: Vec<libc::mmsghdr>,
    metas: Vec<Meta>,
    buf_len: usize,
}

// SAFETY: the raw pointers inside iovs/hdrs only ever point into this Batch's own
// buffers and are rebuilt before each call; the Batch moves between threads whole.
unsafe impl Send for Batch {}

impl Batch {
    /// A batch of [`BATCH`] buffers of `buf_len` bytes each.
    pub fn new(buf_len: usize) -> Self {
        Batch {
            bufs: (0..BATCH).map(|_| vec![0u8; buf_len]).collect(),
            // SAFETY: iovec, sockaddr_storage and mmsghdr are plain C structs for
            // which all-zero is a valid value.
            iovs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            addrs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            hdrs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            metas: Vec::with_capacity(BATCH),
            buf_len,
        }
    }

    /// Receives what is waiting on `fd` (non-blocking), at most [`BATCH`]
    /// datagrams; returns their metadata in arrival order (slot i = index i).
    /// `Err(WouldBlock)` when nothing is waiting. Empty slots are refilled from
    /// `pool` first.
    pub fn recv(&mut self, fd: RawFd, pool: &mut Vec<Vec<u8>>) -> io::Result<&[Meta]> {
        for i in 0..BATCH {
            let b = &mut self.bufs[i];
            if b.len() != self.buf_len {
                if b.capacity() == 0 {
                    *b = pool.pop().unwrap_or_default();
                }
                b.resize(self.buf_len, 0);
            }
            self.iovs[i] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: hdrs holds BATCH initialised headers whose buffers (bufs, addrs,
        // iovs) live in self and are not touched until the call returns.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.metas.clear();
        for i in 0..rc as usize {
            let h = &self.hdrs[i];
            let len = h.msg_len as usize;
            self.metas.push(Meta {
                len,
                from: sockaddr_to_std(&self.addrs[i]).unwrap_or(UNSPECIFIED),
                truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len >= self.buf_len,
            });
        }
        Ok(&self.metas)
    }

    /// Slot `i`'s metadata from the last [`Batch::recv`].
    pub fn meta(&self, i: usize) -> Meta {
        self.metas[i]
    }

    /// Takes slot `i`'s buffer, cut to the datagram's length (the slot is refilled
    /// before the next [`Batch::recv`]).
    pub fn take(&mut self, i: usize) -> Vec<u8> {
        let mut b = std::mem::take(&mut self.bufs[i]);
        b.truncate(self.metas[i].len);
        b
    }
}

/// Stands for a sender address the kernel gave in a family we do not speak
/// (never for UDP over IPv4/IPv6; the receive half then drops it as unknown).
const UNSPECIFIED: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0));

fn sockaddr_to_std(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn pair() -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        (rx, tx)
    }

    #[test]
    fn nothing_waiting_is_would_block() {
        let (rx, _) = pair();
        let mut b = Batch::new(1500);
        let e = b.recv(rx.as_raw_fd(), &mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_burst_arrives_whole_in_order_with_its_sender_and_slots_refill() {
        let (rx, tx) = pair();
        let me = tx.local_addr().unwrap();
        let dst = rx.local_addr().unwrap();
        // 40 datagrams: more than one batch; sizes 1..=40 bytes, content = index
        for i in 0..40u8 {
            tx.send_to(&vec![i; i as usize + 1], dst).unwrap();
        }
        let mut b = Batch::new(1500);
        let mut pool = Vec::new();
        let mut got = Vec::new();
        while got.len() < 40 {
            let metas = b.recv(rx.as_raw_fd(), &mut pool).unwrap().to_vec();
            assert!(metas.len() <= BATCH);
            for (i, m) in metas.iter().enumerate() {
                assert_eq!((m.from, m.truncated), (me, false));
                got.push(b.take(i));
            }
        }
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d, &vec![i as u8; i + 1], "datagram {i}");
        }
    }

    #[test]
    fn a_datagram_longer_than_the_buffer_is_marked_truncated() {
        let (rx, tx) = pair();
        tx.send_to(&[9u8; 200], rx.local_addr().unwrap()).unwrap();
        tx.send_to(&[8u8; 99], rx.local_addr().unwrap()).unwrap();
        let mut b = Batch::new(100);
        let metas = b.recv(rx.as_raw_fd(), &mut Vec::new()).unwrap().to_vec();
        assert_eq!(metas.len(), 2);
        assert!(metas[0].truncated && metas[0].len == 100);
        assert!(!metas[1].truncated && metas[1].len == 99);
        assert_eq!(b.take(1), vec![8u8; 99]);
    }
}
