//! The `udp->tun` side: receives datagrams from both channel sockets in
//! batches (`recvmmsg`), hands each to the receive half (which authenticates
//! and decrypts it), writes what it delivers to the TUN (with TUN offload,
//! consecutive TCP segments of a flow in a batch as one super-packet:
//! `dchannel_core::gro`), sends the probes and handshake messages it asks for,
//! and runs its timers (probe rounds, handshake retries, rekeys).
//!
//! [`Receiver`] is one step at a time, so that the two drivers share it: the
//! `udp->tun` thread ([`run_receiver`], busy-poll off) and the single polling
//! thread (poll_loop.rs, busy-poll on).

use crate::agent::Io;
use crate::batch_recv::{Batch, BATCH};

use dchannel_core::endpoint::{DatagramAuth, DropReason, Event, ReceiveHalf, Received};
use dchannel_core::gro::Gro;
use dchannel_core::liveness::Change;
use dchannel_core::{Channel, Nanos, MS};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The receive half and its buffers (a pool: nothing is allocated per packet
/// once it is warm).
pub struct Receiver<A: DatagramAuth> {
    rx: ReceiveHalf<Vec<u8>, A>,
    pool: Vec<Vec<u8>>,
    batch: Batch,
    gro: Gro,
    probe_buf: Vec<u8>,
}

impl<A: DatagramAuth> Receiver<A> {
    /// Sets both channel sockets non-blocking (every receive is a drain).
    pub fn new(io: &Io, rx: ReceiveHalf<Vec<u8>, A>) -> Self {
        for s in &io.socks {
            s.set_nonblocking(true).expect("nonblocking socket");
        }
        Self {
            probe_buf: vec![0u8; rx.probe_buf_len()],
            rx,
            pool: Vec::new(),
            batch: Batch::new(io.max_datagram),
            gro: Gro::new(),
        }
    }

    /// Runs the receive half's due timers and sends what they ask for.
    pub fn handle_timeout(&mut self, io: &Io, now: Nanos) {
        self.rx.handle_timeout(now);
        self.flush(io, now);
        io.finish_gro(&mut self.gro);
    }

    /// When [`Receiver::handle_timeout`] is next due (at most a second away).
    pub fn poll_timeout(&self, now: Nanos) -> Nanos {
        self.rx.poll_timeout().unwrap_or(now + 1000 * MS)
    }

    /// Receives what `ch`'s socket holds, up to 8 batches so that one channel
    /// cannot starve the other; returns the datagrams received.
    pub fn drain(&mut self, io: &Io, ch: Channel) -> usize {
        let fd = io.socks[ch.index()].as_raw_fd();
        let mut total = 0;
        for _ in 0..8 {
            let n = match self.batch.recv(fd, &mut self.pool) {
                Ok(metas) => metas.len(),
                Err(e) => {
                    if e.kind() != ErrorKind::WouldBlock {
                        tracing::debug!("recv on {ch}: {e}");
                    }
                    break;
                }
            };
            for i in 0..n {
                let m = self.batch.meta(i);
                if m.truncated {
                    // Filled the buffer: possibly cut short, never forward it.
                    io.stats.dropped(DropReason::Truncated);
                    tracing::debug!("oversized datagram from {} on {ch}", m.from);
                    continue; // the slot keeps its buffer
                }
                let now = io.now();
                let r = self.rx.handle_datagram(now, ch, m.from, self.batch.take(i));
                received(io, r, ch, now, &mut self.pool);
                self.flush(io, now);
            }
            io.finish_gro(&mut self.gro);
            total += n;
            if n < BATCH {
                break; // the socket is drained
            }
        }
        total
    }

    /// Answers the main thread's request for a last publication (final_publish.rs).
    pub fn publish_final(&mut self, io: &Io) {
        self.rx.publish_now(io.now());
        io.final_publish.answer();
    }

    /// Writes deliveries to the TUN, sends queued probes and handshake messages, logs events.
    fn flush(&mut self, io: &Io, now: Nanos) {
        let (rx, pool, gro) = (&mut self.rx, &mut self.pool, &mut self.gro);
        for d in rx.deliveries() {
            if io.vnet_hdr {
                // Joined with the next segments of its flow where it can be (gro.rs);
                // written when the batch ends.
                gro.push(d.packet(), &mut |h, p| io.write_tun_offload(h, p));
            } else {
                io.write_tun(d.packet());
            }
            if pool.len() < 4096 {
                pool.push(d.buf);
            }
        }
        let probe_buf = &mut self.probe_buf;
        while let Some(p) = rx.poll_transmit(now, probe_buf) {
            match io.socks[p.channel.index()].send_to(&probe_buf[..p.len], p.destination) {
                Ok(_) => {
                    let c = io.chan(p.channel);
                    if p.control {
                        c.control_tx.fetch_add(1, Relaxed);
                    } else {
                        c.probe_tx.fetch_add(1, Relaxed);
                    }
                }
                Err(e) => {
                    io.stats.dropped(DropReason::SendError);
                    tracing::debug!("probe on {} to {} failed: {e}", p.channel, p.destination);
                }
            }
        }
        while let Some(event) = rx.poll_event() {
            match event {
                Event::EndpointMoved {
                    peer,
                    channel,
                    from,
                    to,
                } => {
                    if let Some(p) = rx.shared().peer(peer) {
                        let name = p.name();
                        tracing::info!("client {name} on {channel}: endpoint {to} (was {from:?})");
                    }
                }
                Event::ChannelChanged { peer, change } => {
                    if let Some(p) = rx.shared().peer(peer) {
                        log_channel_change(p.name(), change);
                    }
                }
            }
        }
    }
}

/// The `udp->tun` thread (busy-poll off): sleeps in `poll(2)` on both channel
/// sockets and the final-publication request until one is readable or a timer
/// is due. Never returns.
pub fn run_receiver<A: DatagramAuth>(io: Arc<Io>, rx: ReceiveHalf<Vec<u8>, A>) {
    let mut r = Receiver::new(&io, rx);
    // Both channel sockets (index = Channel), then the final-publication request.
    let mut pfds = [
        io.socks[0].as_raw_fd(),
        io.socks[1].as_raw_fd(),
        io.final_publish.fd(),
    ]
    .map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    loop {
        let now = io.now();
        r.handle_timeout(&io, now);
        let wait_ms = r
            .poll_timeout(now)
            .saturating_sub(now)
            .div_ceil(MS)
            .min(1000);
        // SAFETY: pfds is a valid array of three pollfd structs.
        if unsafe { libc::poll(pfds.as_mut_ptr(), 3, wait_ms as libc::c_int) } <= 0 {
            continue;
        }
        for ch in Channel::ALL {
            if pfds[ch.index()].revents != 0 {
                r.drain(&io, ch);
            }
        }
        // After the sockets were drained, so that what had arrived is counted.
        if pfds[2].revents != 0 {
            r.publish_final(&io);
        }
    }
}

/// Counts (and logs) what the receive half made of one datagram.
fn received(io: &Io, r: Received<Vec<u8>>, ch: Channel, now: Nanos, pool: &mut Vec<Vec<u8>>) {
    match r {
        Received::Data(arrival) => {
            io.chan(ch).received(arrival.datagram_len);
            if let Some(log) = &io.arrivals {
                log.record(now, &arrival, ch);
            }
        }
        Received::Duplicate { arrival, buf } => {
            // the second copy of a packet sent on both channels: received on
            // this channel, not delivered
            let chan = io.chan(ch);
            chan.received(arrival.datagram_len);
            chan.dup_dropped.fetch_add(1, Relaxed);
            pool.push(buf);
        }
        Received::Probe { buf, .. } => {
            io.chan(ch).probe_rx.fetch_add(1, Relaxed);
            pool.push(buf);
        }
        Received::Control { buf, .. } => {
            io.chan(ch).control_rx.fetch_add(1, Relaxed);
            pool.push(buf);
        }
        Received::Dropped { reason, buf } => {
            io.stats.dropped(reason);
            tracing::debug!("datagram on {ch}: {reason}");
            pool.push(buf);
        }
    }
}

/// "LLC down" (warn) / "LLC up" (info), with the peer and the silence or outage.
fn log_channel_change(peer: &str, c: Change) {
    let ch = c.channel.name().to_uppercase();
    let ms = c.after / 1_000_000;
    if c.up {
        tracing::info!("{ch} up (peer {peer}): replies again after {ms} ms down");
    } else {
        tracing::warn!("{ch} down (peer {peer}): no reply for {ms} ms");
    }
}
