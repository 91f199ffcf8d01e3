//! The agent driver: two threads of I/O around the sans-I/O endpoint
//! (`dchannel_core::endpoint`), which makes every decision.
//!
//! * `tun->udp` (`send_loop::run_sender`, send_loop.rs): reads an inner
//!   packet (or a TCP super-packet, cut into packets) from the TUN behind the
//!   send half's headroom (dchannel header, and the encryption prefix), lets
//!   the send half steer, encapsulate and seal it in place, sends the
//!   datagrams and counts them.
//! * `udp->tun` ([`run_receiver`]): polls both channel sockets, receives
//!   their datagrams in batches (`recvmmsg`), hands every datagram to the
//!   receive half (which authenticates and decrypts it), writes what it
//!   delivers to the TUN (with TUN offload, consecutive TCP segments of a flow
//!   in a batch as one super-packet: `dchannel_core::gro`), sends the probes and handshake
//!   messages it asks for, and sleeps until its next timeout (probe rounds,
//!   handshake retries, rekeys).
//!
//! The threads share only the endpoint's `Shared` (inside the halves), the
//! stats atomics and the logs. Buffers come from a per-thread pool: nothing is
//! allocated per packet once the pool is warm.

use crate::arrival_log::ArrivalLog;
use crate::batch_recv::{Batch, BATCH};
use crate::busy_poll::{BusyPoll, Side};
use crate::decision_log::DecisionLog;
use crate::stats::{Malformed, Stats};
use dchannel_core::endpoint::{DatagramAuth, Event, ReceiveHalf, Received};
use dchannel_core::gro::Gro;
use dchannel_core::gso::VnetHdr;
use dchannel_core::{Channel, Nanos, MS};
use std::fs::File;
use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// What both loops need besides their half.
pub struct Io {
    /// One UDP socket per channel (index = Channel).
    pub socks: [UdpSocket; 2],
    /// The TUN device.
    pub tun: File,
    /// Counters shared with the stats writer and the metrics endpoint.
    pub stats: Arc<Stats>,
    /// `now` = 0 (the endpoint's clock is ns since this instant).
    pub epoch: Instant,
    /// `--decision-log`: every steered packet (send thread only).
    pub log: Option<Arc<DecisionLog>>,
    /// `--arrival-log`: every data datagram received (receive thread only).
    pub arrivals: Option<Arc<ArrivalLog>>,
    /// Largest datagram we expect (outer MTU minus outer IP/UDP headers, with margin).
    pub max_datagram: usize,
    /// Asks the receive thread for a last publication before the stats are written.
    pub final_publish: crate::final_publish::FinalPublish,
    /// The TUN has offloads on (`--tun-offload`): every read and write starts
    /// with a `virtio_net_hdr`, and reads may be TCP super-packets.
    pub vnet_hdr: bool,
    /// `--busy-poll-us`: when the threads poll instead of sleeping.
    pub busy: BusyPoll,
}

impl Io {
    pub(crate) fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    pub(crate) fn write_tun(&self, pkt: &[u8]) {
        if self.vnet_hdr {
            self.write_tun_offload(&VnetHdr::PLAIN, pkt);
            return;
        }
        // SAFETY: writing our own initialised buffer to the TUN fd.
        let rc = unsafe { libc::write(self.tun.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if rc < 0 {
            self.stats.bad(Malformed::TunWriteError);
        }
    }

    /// Writes `pkt` behind the virtio_net_hdr `hdr` (TUN offload on).
    fn write_tun_offload(&self, hdr: &[u8; VnetHdr::LEN], pkt: &[u8]) {
        let iov = [
            libc::iovec {
                iov_base: hdr.as_ptr() as *mut libc::c_void,
                iov_len: VnetHdr::LEN,
            },
            libc::iovec {
                iov_base: pkt.as_ptr() as *mut libc::c_void,
                iov_len: pkt.len(),
            },
        ];
        // SAFETY: both iovecs point at initialised memory that outlives the call.
        if unsafe { libc::writev(self.tun.as_raw_fd(), iov.as_ptr(), 2) } < 0 {
            self.stats.bad(Malformed::TunWriteError);
        }
    }

    /// Writes what the coalescer holds (TUN offload on).
    fn finish_gro(&self, gro: &mut Gro) {
        gro.finish(&mut |h, p| {
            if *h != VnetHdr::PLAIN {
                let vh = VnetHdr::parse(h).expect("a whole header");
                let payload = p.len() - vh.hdr_len as usize;
                self.stats.tun.gro_superpackets.fetch_add(1, Relaxed);
                self.stats
                    .tun
                    .gro_segments
                    .fetch_add(payload.div_ceil(vh.gso_size as usize) as u64, Relaxed);
            }
            self.write_tun_offload(h, p)
        });
    }
}

/// Receive loop: UDP -> receive half -> TUN, probes and timers. Never returns.
pub fn run_receiver<A: DatagramAuth>(io: Arc<Io>, mut rx: ReceiveHalf<Vec<u8>, A>) {
    for s in &io.socks {
        s.set_nonblocking(true).expect("nonblocking socket");
    }
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut batch = Batch::new(io.max_datagram);
    let mut gro = Gro::new();
    let mut probe_buf = vec![0u8; rx.probe_buf_len()];
    let pollfd = |fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Both channel sockets (index = Channel), the final-publication request,
    // and the busy-poll wake (-1, ignored by poll, when busy-poll is off).
    let busy = &io.busy;
    let mut pfds = [
        pollfd(io.socks[0].as_raw_fd()),
        pollfd(io.socks[1].as_raw_fd()),
        pollfd(io.final_publish.fd()),
        pollfd(if busy.enabled() {
            busy.wake_fd(Side::Receiver)
        } else {
            -1
        }),
    ];
    loop {
        let now = io.now();
        rx.handle_timeout(now);
        flush(&io, &mut rx, &mut pool, &mut probe_buf, &mut gro, now);
        io.finish_gro(&mut gro);
        let deadline = rx.poll_timeout().unwrap_or(now + 1000 * MS);
        let wait_ms = deadline.saturating_sub(now).div_ceil(MS).min(1000) as libc::c_int;
        // Busy-poll: look again at once while a window is open, else sleep parked.
        let spin = busy.enabled()
            && (busy.spinning(Side::Receiver, now) || !busy.park(Side::Receiver, now));
        let parked = busy.enabled() && !spin;
        let wait_ms = if spin { 0 } else { wait_ms };
        // SAFETY: pfds is a valid array of four pollfd structs.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), 4, wait_ms) };
        if parked {
            busy.unpark(Side::Receiver);
        }
        if rc <= 0 {
            if spin {
                busy.pause();
            }
            continue;
        }
        for ch in Channel::ALL {
            if pfds[ch.index()].revents == 0 {
                continue;
            }
            // Drain up to 8 batches per wake-up so one channel cannot starve the other.
            for _ in 0..8 {
                let fd = io.socks[ch.index()].as_raw_fd();
                let n = match batch.recv(fd, &mut pool) {
                    Ok(metas) => metas.len(),
                    Err(e) => {
                        if e.kind() != ErrorKind::WouldBlock {
                            tracing::debug!("recv on {ch}: {e}");
                        }
                        break;
                    }
                };
                for i in 0..n {
                    let m = batch.meta(i);
                    if m.truncated {
                        // Filled the buffer: possibly cut short, never forward it.
                        io.stats.bad(Malformed::Truncated);
                        tracing::debug!("oversized datagram from {} on {ch}", m.from);
                        continue; // the slot keeps its buffer
                    }
                    let now = io.now();
                    let r = rx.handle_datagram(now, ch, m.from, batch.take(i));
                    received(&io, r, ch, now, &mut pool);
                    flush(&io, &mut rx, &mut pool, &mut probe_buf, &mut gro, now);
                }
                io.finish_gro(&mut gro);
                if n > 0 && busy.moved(Side::Receiver, io.now()) {
                    io.stats.busy_poll.wakes.fetch_add(1, Relaxed);
                }
                if n < BATCH {
                    break; // the socket is drained
                }
            }
        }
        // After the sockets were drained, so that what had arrived is counted.
        if pfds[2].revents != 0 {
            rx.publish_now(io.now());
            io.final_publish.answer();
        }
    }
}

/// Counts (and logs) what the receive half made of one datagram.
fn received(io: &Io, r: Received<Vec<u8>>, ch: Channel, now: Nanos, pool: &mut Vec<Vec<u8>>) {
    match r {
        Received::Data(arrival) => {
            io.stats.chan(ch).received(arrival.datagram_len);
            if let Some(log) = &io.arrivals {
                log.record(now, &arrival, ch);
            }
        }
        Received::Probe { buf, .. } => {
            io.stats.chan(ch).probe_rx.fetch_add(1, Relaxed);
            pool.push(buf);
        }
        Received::Control { buf, .. } => {
            io.stats.chan(ch).control_rx.fetch_add(1, Relaxed);
            pool.push(buf);
        }
        Received::Dropped { reason, buf } => {
            io.stats.dropped(reason);
            tracing::debug!("datagram on {ch}: {reason}");
            pool.push(buf);
        }
    }
}

/// Writes deliveries to the TUN, sends queued probes and handshake messages, logs events.
fn flush<A: DatagramAuth>(
    io: &Io,
    rx: &mut ReceiveHalf<Vec<u8>, A>,
    pool: &mut Vec<Vec<u8>>,
    probe_buf: &mut [u8],
    gro: &mut Gro,
    now: Nanos,
) {
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
    while let Some(p) = rx.poll_transmit(now, probe_buf) {
        match io.socks[p.channel.index()].send_to(&probe_buf[..p.len], p.destination) {
            Ok(_) => {
                let c = io.stats.chan(p.channel);
                if p.control {
                    c.control_tx.fetch_add(1, Relaxed);
                } else {
                    c.probe_tx.fetch_add(1, Relaxed);
                }
            }
            Err(e) => {
                io.stats.bad(Malformed::SendError);
                tracing::debug!("probe on {} to {} failed: {e}", p.channel, p.destination);
            }
        }
    }
    while let Some(Event::EndpointMoved {
        peer,
        channel,
        from,
        to,
    }) = rx.poll_event()
    {
        let name = rx.shared().peers()[peer].name();
        tracing::info!("client {name} on {channel}: endpoint {to} (was {from:?})");
    }
}
