//! Sending the datagrams of one TUN read (the segments of a TCP super-packet)
//! with one `sendmmsg(2)` per channel socket instead of one `sendto` each, and
//! equal-sized datagrams to one destination as one UDP GSO send (`UDP_SEGMENT`:
//! one trip through the kernel's UDP/IP stack for up to 64 datagrams).
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
    /// Per channel: UDP GSO (`UDP_SEGMENT`) works on its path; off after the
    /// first refusal.
    gso: [bool; 2],
}

impl SendBatch {
    /// A batch whose slots hold `slot_len` bytes (headroom + packet + tailroom).
    pub fn new(slot_len: usize) -> Self {
        SendBatch {
            bufs: Vec::new(),
            entries: Vec::with_capacity(MAX),
            slot_len,
            gso: [true; 2],
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
            out[ch.index()] = self.send_on(socks[ch.index()].as_raw_fd(), ch, &idx);
        }
        self.entries.clear();
        out
    }

    /// Sends the datagrams `idx` (in order) on socket `fd`: runs of equal-sized
    /// datagrams to one destination as one UDP GSO send each (while the path
    /// allows it), everything in one `sendmmsg` loop.
    fn send_on(&mut self, fd: i32, ch: Channel, idx: &[usize]) -> Sent {
        let mut sent = Sent::default();
        let runs = self.runs(ch, idx);
        // SAFETY (all three): plain C structs for which all-zero is valid.
        let mut iovs: Vec<libc::iovec> =
            idx.iter().map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut hdrs: Vec<libc::mmsghdr> =
            runs.iter().map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut cmsgs: Vec<[u64; 3]> = vec![[0; 3]; runs.len()];
        for (k, &i) in idx.iter().enumerate() {
            iovs[k] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: self.entries[i].2,
            };
        }
        for (r, &(first, count)) in runs.iter().enumerate() {
            let addr = &self.entries[idx[first]].1;
            let h = &mut hdrs[r].msg_hdr;
            h.msg_name = addr.as_ptr() as *mut libc::c_void;
            h.msg_namelen = addr.len();
            h.msg_iov = &mut iovs[first];
            h.msg_iovlen = count;
            if count > 1 {
                // cmsg UDP_SEGMENT: the kernel cuts the run into datagrams of the
                // first one's size (the last may be shorter).
                let seg = self.entries[idx[first]].2 as u16;
                let c = cmsgs[r].as_mut_ptr().cast::<libc::cmsghdr>();
                // SAFETY: cmsgs[r] is 24 bytes, 8-aligned: CMSG_SPACE(2) fits.
                unsafe {
                    (*c).cmsg_len = libc::CMSG_LEN(2) as usize;
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
                    h.msg_control = c.cast();
                    h.msg_controllen = libc::CMSG_SPACE(2) as usize;
                }
            }
        }
        let mut start = 0;
        while start < hdrs.len() {
            // SAFETY: hdrs[start..] are initialised headers pointing into self.bufs,
            // self.entries, iovs and cmsgs, all alive and untouched during the call.
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
                let (first, count) = runs[start];
                let refused = matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL));
                if count > 1 && self.gso[ch.index()] && refused {
                    // This path cannot segment UDP (EIO: no checksum offload on the
                    // device, e.g. chanemu's TUN): send one by one from now on.
                    tracing::debug!("UDP GSO on {ch} refused ({e}): sending datagrams one by one");
                    self.gso[ch.index()] = false;
                    let rest: Vec<usize> = idx[first..].to_vec();
                    let more = self.send_on(fd, ch, &rest);
                    sent.datagrams += more.datagrams;
                    sent.bytes += more.bytes;
                    sent.failed += more.failed;
                    return sent;
                }
                // The run was refused (full send buffer, unreachable, ...): drop it.
                tracing::debug!("sendmmsg on {ch}: {e}");
                sent.failed += count as u64;
                start += 1;
                continue;
            }
            for (r, h) in hdrs[start..start + rc as usize].iter().enumerate() {
                sent.datagrams += runs[start + r].1 as u64;
                sent.bytes += h.msg_len as u64;
            }
            start += rc as usize;
        }
        sent
    }

    /// Splits `idx` into runs `(first, count)`: datagrams of one size to one
    /// destination (the last of a run may be shorter), within UDP GSO's limits;
    /// every datagram a run of its own where GSO is off.
    fn runs(&self, ch: Channel, idx: &[usize]) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut bytes = 0;
        for (k, &i) in idx.iter().enumerate() {
            let (_, addr, len) = &self.entries[i];
            if let Some((first, count)) = runs.last_mut() {
                let (_, a0, l0) = &self.entries[idx[*first]];
                let last_len = self.entries[idx[*first + *count - 1]].2;
                let joins = self.gso[ch.index()]
                    && a0 == addr
                    && *len <= *l0
                    && last_len == *l0
                    && *count < GSO_MAX_SEGMENTS
                    && bytes + len <= GSO_MAX_BYTES;
                if joins {
                    *count += 1;
                    bytes += len;
                    continue;
                }
            }
            runs.push((k, 1));
            bytes = *len;
        }
        runs
    }
}

/// `UDP_SEGMENT` (linux/udp.h): the cmsg and socket option of UDP GSO.
const UDP_SEGMENT: libc::c_int = 103;
/// Datagrams per UDP GSO send at most (the kernel's UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Payload bytes per UDP GSO send at most: one IP packet's 65,535 less the headers.
const GSO_MAX_BYTES: usize = 65_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_datagrams_leave_as_one_gso_send_and_arrive_as_they_were() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = [
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        ];
        let mut b = SendBatch::new(2048);
        // 60 datagrams of 1200 bytes and a short last one: two runs, as the
        // 65,000-byte limit allows 54 × 1200; the short one ends the second run
        let lens: Vec<usize> = (0..60).map(|_| 1200).chain([77]).collect();
        for (i, len) in lens.iter().enumerate() {
            b.slot()[..4].copy_from_slice(&(i as u32).to_be_bytes());
            b.push(Channel::Hbc, rx.local_addr().unwrap(), *len);
        }
        let idx: Vec<usize> = (0..lens.len()).collect();
        assert_eq!(b.runs(Channel::Hbc, &idx), vec![(0, 54), (54, 7)]);
        let s = b.flush(&tx);
        assert_eq!(
            s[0],
            Sent {
                datagrams: 61,
                bytes: 60 * 1200 + 77,
                failed: 0
            }
        );
        rx.set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 4096];
        for (i, len) in lens.iter().enumerate() {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(
                (n, u32::from_be_bytes(buf[..4].try_into().unwrap())),
                (*len, i as u32)
            );
        }
    }

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
