//! Sending the datagrams of one TUN read (the segments of a TCP super-packet)
//! with one `sendmmsg(2)` per channel socket instead of one `sendto` each.
//!
//! The send loop seals each segment in its own slot ([`SendBatch::slot`]),
//! records where it goes ([`SendBatch::push`]) and sends them all with
//! [`SendBatch::flush`]: per channel in the order they were pushed (the order
//! TCP sent them in), so batching reorders nothing on a path.

use dchannel_core::Channel;
use socket2::SockAddr;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams per flush at most: a 64 KiB super-packet at a 1,400-byte MSS is 47
/// segments; smaller MSSs flush in several rounds.
pub const MAX: usize = 64;

/// What one `flush` did on one channel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams the kernel took.
    pub datagrams: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Datagrams it refused (full send buffer, unreachable, ...): dropped, counted.
    pub failed: u64,
}

/// Up to [`MAX`] sealed datagrams waiting to be sent.
pub struct SendBatch {
    bufs: Vec<Vec<u8>>,
    entries: Vec<(Channel, SockAddr, usize)>,
    slot_len: usize,
}

impl SendBatch {
    /// A batch whose slots hold `slot_len` bytes (headroom + packet + tailroom).
    pub fn new(slot_len: usize) -> Self {
        SendBatch {
            bufs: Vec::new(),
            entries: Vec::with_capacity(MAX),
            slot_len,
        }
    }

    /// Whether [`MAX`] datagrams wait: flush before taking another slot.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= MAX
    }

    /// The buffer for the next datagram (valid until [`SendBatch::push`] or the
    /// next `slot`).
    pub fn slot(&mut self) -> &mut [u8] {
        let i = self.entries.len();
        if self.bufs.len() <= i {
            self.bufs.push(vec![0u8; self.slot_len]);
        }
        &mut self.bufs[i]
    }

    /// The datagram in the current slot (its first `len` bytes) goes to
    /// `destination` on `channel`.
    pub fn push(&mut self, channel: Channel, destination: SocketAddr, len: usize) {
        debug_assert!(!self.is_full());
        self.entries
            .push((channel, SockAddr::from(destination), len));
    }

    /// Sends what waits, per channel in push order, and empties the batch.
    pub fn flush(&mut self, socks: &[UdpSocket; 2]) -> [Sent; 2] {
        let mut out = [Sent::default(); 2];
        for ch in Channel::ALL {
            let idx: Vec<usize> = (0..self.entries.len())
                .filter(|&i| self.entries[i].0 == ch)
                .collect();
            if idx.is_empty() {
                continue;
            }
            out[ch.index()] = self.send_on(socks[ch.index()].as_raw_fd(), &idx);
        }
        self.entries.clear();
        out
    }

    fn send_on(&mut self, fd: i32, idx: &[usize]) -> Sent {
        let mut sent = Sent::default();
        // SAFETY: iovec and mmsghdr are plain C structs; all-zero is valid.
        let mut iovs: Vec<libc::iovec> =
            idx.iter().map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut hdrs: Vec<libc::mmsghdr> =
            idx.iter().map(|_| unsafe { std::mem::zeroed() }).collect();
        for (k, &i) in idx.iter().enumerate() {
            let (_, addr, len) = &self.entries[i];
            iovs[k] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: *len,
            };
            let h = &mut hdrs[k].msg_hdr;
            h.msg_name = addr.as_ptr() as *mut libc::c_void;
            h.msg_namelen = addr.len();
            h.msg_iov = &mut iovs[k];
            h.msg_iovlen = 1;
        }
        let mut start = 0;
        while start < hdrs.len() {
            // SAFETY: hdrs[start..] are initialised headers pointing into self.bufs,
            // self.entries and iovs, all alive and untouched during the call.
            let rc = unsafe {
                libc::sendmmsg(
                    fd,
                    hdrs[start..].as_mut_ptr(),
                    (hdrs.len() - start) as libc::c_uint,
                    0,
                )
            };
            if rc <= 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first datagram was refused: drop it, go on with the rest.
                tracing::debug!("sendmmsg: {e}");
                sent.failed += 1;
                start += 1;
                continue;
            }
            for h in &hdrs[start..start + rc as usize] {
                sent.datagrams += 1;
                sent.bytes += h.msg_len as u64;
            }
            start += rc as usize;
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_gets_its_datagrams_in_push_order() {
        let rx = [
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        ];
        let tx = [
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        ];
        let mut b = SendBatch::new(2048);
        // 100 datagrams (two flushes' worth), alternating in runs between channels
        let mut sent = [Sent::default(); 2];
        for i in 0..100u32 {
            if b.is_full() {
                for (s, f) in sent.iter_mut().zip(b.flush(&tx)) {
                    s.datagrams += f.datagrams;
                    s.bytes += f.bytes;
                }
            }
            let ch = if (i / 3) % 2 == 0 {
                Channel::Hbc
            } else {
                Channel::Llc
            };
            let len = 10 + i as usize;
            b.slot()[..4].copy_from_slice(&i.to_be_bytes());
            b.push(ch, rx[ch.index()].local_addr().unwrap(), len);
        }
        for (s, f) in sent.iter_mut().zip(b.flush(&tx)) {
            s.datagrams += f.datagrams;
            s.bytes += f.bytes;
        }
        let mut got = [Vec::new(), Vec::new()];
        for ch in Channel::ALL {
            let r = &rx[ch.index()];
            r.set_read_timeout(Some(std::time::Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = r.recv_from(&mut buf) {
                assert_eq!(
                    from,
                    tx[ch.index()].local_addr().unwrap(),
                    "sent from its channel's socket"
                );
                let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
                assert_eq!(n, 10 + i as usize);
                got[ch.index()].push(i);
            }
        }
        let want = |c: u32| (0..100u32).filter(|i| (i / 3) % 2 == c).collect::<Vec<_>>();
        assert_eq!(got[0], want(0));
        assert_eq!(got[1], want(1));
        assert_eq!(sent[0].datagrams + sent[1].datagrams, 100);
        assert_eq!(
            sent[0].bytes + sent[1].bytes,
            (0..100u64).map(|i| 10 + i).sum::<u64>()
        );
    }
}
