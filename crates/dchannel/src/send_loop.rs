//! The `tun->udp` side: reads inner packets from the TUN, lets the send
//! half steer, encapsulate and seal each in place, sends the datagrams and
//! counts them. With TUN offloads a read may be a TCP super-packet: it is cut
//! into its packets (`dchannel_core::gso`), each steered on its own, and their
//! datagrams leave together (`sendmmsg`, batch_send.rs).
//!
//! [`Sender`] is one read at a time, so that the two drivers share it: the
//! `tun->udp` thread ([`run_sender`], busy-poll off, blocking reads) and the
//! single polling thread (poll_loop.rs, busy-poll on, non-blocking reads).

use crate::agent::Io;
use crate::batch_send::SendBatch;

use dchannel_core::endpoint::{DatagramAuth, DropReason, SendHalf, Transmit};
use dchannel_core::gso::{Segments, VnetHdr};
use dchannel_core::{Channel, Nanos};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What one [`Sender::read_once`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Read a packet (or super-packet) and handled it (sent or dropped).
    Moved,
    /// Nothing to read (the TUN is non-blocking).
    Empty,
    /// The read failed (interrupted, or an error that was logged).
    Failed,
}

/// The send half and its buffers.
pub struct Sender<A: DatagramAuth> {
    tx: SendHalf<A>,
    /// A packet at `buf[headroom..]`, sealed in place (offloads off).
    buf: Vec<u8>,
    headroom: usize,
    read_max: usize,
    /// With offloads a read is a virtio_net_hdr and a packet of up to 64 KiB,
    /// cut into the batch's slots one packet at a time.
    sup: Vec<u8>,
    batch: SendBatch,
    wake_buf: Vec<u8>,
    /// The copy of a packet sent on both channels (`realtime-dup`), sealed here.
    copy_buf: Vec<u8>,
    /// One peer (a client): the flow counts are published after every packet
    /// (cheap), so that the stats see a flow at once. Looked at again when
    /// the peer table changes (devices added to a running gateway): with
    /// many peers the count is a walk over all of them.
    one_peer: bool,
    /// The peer table generation `one_peer` was decided at.
    peers_generation: u64,
}

impl<A: DatagramAuth> Sender<A> {
    /// Buffers sized for the send half's headroom and tailroom.
    pub fn new(io: &Io, tx: SendHalf<A>) -> Self {
        let headroom = tx.headroom();
        let buf = vec![0u8; headroom + 65536 + tx.tailroom()];
        let read_max = buf.len() - headroom - tx.tailroom();
        Self {
            sup: if io.vnet_hdr {
                vec![0u8; VnetHdr::LEN + 65536]
            } else {
                Vec::new()
            },
            batch: SendBatch::new(buf.len()),
            wake_buf: vec![0u8; tx.wake_buf_len()],
            copy_buf: buf.clone(),
            one_peer: tx.shared().peers().len() == 1,
            peers_generation: tx.shared().generation(),
            buf,
            headroom,
            read_max,
            tx,
        }
    }

    /// Reads one packet (or super-packet) from the TUN and sends its datagrams.
    pub fn read_once(&mut self, io: &Io) -> Read {
        let into = if io.vnet_hdr {
            &mut self.sup[..]
        } else {
            &mut self.buf[self.headroom..self.headroom + self.read_max]
        };
        // SAFETY: reading into our own buffer.
        let n = unsafe { libc::read(io.tun.as_raw_fd(), into.as_mut_ptr().cast(), into.len()) };
        if n <= 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                ErrorKind::WouldBlock => Read::Empty,
                ErrorKind::Interrupted => Read::Failed,
                _ => {
                    tracing::warn!("TUN read failed: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    Read::Failed
                }
            };
        }
        let now = io.now();
        if io.vnet_hdr {
            self.superpacket(io, n as usize, now);
        } else if let Some(t) = steer(
            io,
            &mut self.tx,
            &mut self.buf,
            n as usize,
            (&mut self.wake_buf[..], &mut self.copy_buf[..]),
            now,
        ) {
            match io.socks[t.channel.index()].send_to(&self.buf[..t.len], t.destination) {
                Ok(_) => io.chan(t.channel).sent(t.len),
                Err(e) => {
                    io.stats.dropped(DropReason::SendError);
                    tracing::debug!("send on {} to {} failed: {e}", t.channel, t.destination);
                }
            }
        }
        let generation = self.tx.shared().generation();
        if generation != self.peers_generation {
            self.peers_generation = generation;
            self.one_peer = self.tx.shared().peers().len() == 1;
        }
        if !self.handle_timeout(io, now) && self.one_peer {
            io.stats
                .flows
                .publish(self.tx.flows(), self.tx.flow_table_stats());
        }
        Read::Moved
    }

    /// Runs the send half's due timers (flow-table expiry) and publishes the
    /// flow counts when they ran (returns true then).
    pub fn handle_timeout(&mut self, io: &Io, now: Nanos) -> bool {
        if self.tx.poll_timeout().is_some_and(|t| t <= now) {
            self.tx.handle_timeout(now);
            io.stats
                .flows
                .publish(self.tx.flows(), self.tx.flow_table_stats());
            return true;
        }
        false
    }

    /// When [`Sender::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.tx.poll_timeout()
    }

    /// Cuts the super-packet in `sup[..n]` into packets, each steered and
    /// sealed in its own slot, all sent together.
    fn superpacket(&mut self, io: &Io, n: usize, now: Nanos) {
        let segments = VnetHdr::parse(&self.sup[..n])
            .and_then(|h| Segments::new(h, &self.sup[VnetHdr::LEN..n]));
        let mut segs = match segments {
            Ok(segs) => segs,
            Err(e) => {
                io.stats.dropped(DropReason::BadOffload);
                tracing::debug!("TUN read of {n} bytes: {e}");
                return;
            }
        };
        if segs.count() > 1 {
            io.stats.tun.superpackets.fetch_add(1, Relaxed);
            io.stats
                .tun
                .segments
                .fetch_add(segs.count() as u64, Relaxed);
        }
        let (headroom, read_max) = (self.headroom, self.read_max);
        loop {
            if self.batch.is_full() {
                send_batch(io, &mut self.batch);
            }
            let slot = self.batch.slot();
            let Some(len) = segs.next_into(&mut slot[headroom..headroom + read_max]) else {
                break;
            };
            let extra = (&mut self.wake_buf[..], &mut self.copy_buf[..]);
            if let Some(t) = steer(io, &mut self.tx, slot, len, extra, now) {
                self.batch.push(t.channel, t.destination, t.len);
            }
        }
        send_batch(io, &mut self.batch);
    }
}

/// The `tun->udp` thread (busy-poll off): blocking TUN reads. Never returns.
pub fn run_sender<A: DatagramAuth>(io: Arc<Io>, tx: SendHalf<A>) {
    let mut s = Sender::new(&io, tx);
    loop {
        s.read_once(&io);
    }
}

/// Steers and seals the packet at `buf[headroom..headroom + len]` in place and
/// counts the decision; the datagram is `buf[..t.len]`, for the caller to send.
/// A wake probe or a copy on the other channel the decision asks for is sealed
/// into `wake_buf` / `copy_buf` and sent here.
fn steer<A: DatagramAuth>(
    io: &Io,
    tx: &mut SendHalf<A>,
    buf: &mut [u8],
    len: usize,
    (wake_buf, copy_buf): (&mut [u8], &mut [u8]),
    now: Nanos,
) -> Option<Transmit> {
    let t = match tx.handle_tun(now, buf, len) {
        Ok(t) => t,
        Err(reason) => {
            io.stats.dropped(reason);
            return None;
        }
    };
    let st = &t.steered;
    if st.flow_id == 0 {
        io.stats.dropped(DropReason::UnparsableInner);
    }
    io.decided(st.decision.outcome, t.channel);
    io.classified(st.class, t.channel, st.new_burst);
    if let Some(log) = &io.log {
        log.record(now, t.peer, st, t.channel);
    }
    if let Some(w) = tx.poll_wake(now, wake_buf) {
        // `prewarm`: a one-way probe on the HBC wakes the device's radio before
        // the reply to this LLC packet comes down the HBC.
        match io.socks[w.channel.index()].send_to(&wake_buf[..w.len], w.destination) {
            Ok(_) => _ = io.chan(w.channel).wake_tx.fetch_add(1, Relaxed),
            Err(_) => io.stats.dropped(DropReason::SendError),
        }
    }
    if let Some(c) = tx.poll_copy(now, copy_buf) {
        // `realtime-dup`: the same packet on the other channel; the receiver
        // delivers whichever copy arrives first.
        match io.socks[c.channel.index()].send_to(&copy_buf[..c.len], c.destination) {
            Ok(_) => {
                let chan = io.chan(c.channel);
                chan.sent(c.len);
                chan.dup_sent.fetch_add(1, Relaxed);
            }
            Err(_) => io.stats.dropped(DropReason::SendError),
        }
    }
    Some(t)
}

/// Sends a batch of sealed segments and counts them.
fn send_batch(io: &Io, batch: &mut SendBatch) {
    for (ch, s) in Channel::ALL.into_iter().zip(batch.flush(&io.socks)) {
        let c = io.chan(ch);
        c.tx_pkts.fetch_add(s.datagrams, Relaxed);
        c.tx_bytes.fetch_add(s.bytes, Relaxed);
        for _ in 0..s.failed {
            io.stats.dropped(DropReason::SendError);
        }
    }
}

/// Sets `O_NONBLOCK` on the TUN (its writes never block either way).
pub fn set_nonblocking(fd: libc::c_int) {
    // SAFETY: fcntl on a descriptor we own, integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}
