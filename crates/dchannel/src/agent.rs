//! The agent driver: threads of I/O around the sans-I/O endpoint
//! (`dchannel_core::endpoint`), which makes every decision.
//!
//! * `tun->udp` (send_loop.rs): reads an inner packet (or a TCP
//!   super-packet, cut into packets) from the TUN behind the send half's
//!   headroom (dchannel header, and the encryption prefix), lets the send
//!   half steer, encapsulate and seal it in place, sends the datagrams and
//!   counts them.
//! * `udp->tun` (receive_loop.rs): polls both channel sockets, receives
//!   their datagrams in batches (`recvmmsg`), hands every datagram to the
//!   receive half (which authenticates and decrypts it), writes what it
//!   delivers to the TUN, sends the probes and handshake messages it asks
//!   for, and sleeps until its next timeout (probe rounds, handshake retries,
//!   rekeys).
//!
//! Busy-poll off (the default), each side is a thread that sleeps when idle.
//! With `--busy-poll-us`, one thread runs both sides and polls for a while
//! after each packet (poll_loop.rs).
//!
//! A gateway runs N workers (`--threads`), each the above over its own TUN
//! queue and socket pair (one [`Io`] each; reuseport.rs says how each
//! device's datagrams reach one worker).
//!
//! The threads share only the endpoint's `Shared` (inside the halves), the
//! stats atomics and the logs. Buffers come from a per-thread pool: nothing is
//! allocated per packet once the pool is warm.

use crate::arrival_log::ArrivalLog;
use crate::decision_log::DecisionLog;
use crate::stats::Stats;
use dchannel_core::endpoint::DropReason;
use dchannel_core::gro::Gro;
use dchannel_core::gso::VnetHdr;
use dchannel_core::packet_class::PacketClass;
use dchannel_core::policy::Outcome;
use dchannel_core::{Channel, Nanos};
use std::fs::File;
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
    /// This worker's index (its counters in `stats`).
    pub worker: usize,
}

impl Io {
    /// This worker's counters of channel `ch`.
    pub(crate) fn chan(&self, ch: Channel) -> &crate::stats::ChannelCounters {
        &self.stats.worker(self.worker).channels[ch.index()]
    }

    /// Counts one steering decision with `outcome` on `ch` (this worker's counters).
    pub(crate) fn decided(&self, outcome: Outcome, ch: Channel) {
        self.stats.worker(self.worker).decisions[outcome as usize][ch.index()]
            .fetch_add(1, Relaxed);
    }

    /// Counts one steered packet's class on `ch` and, if it began a burst
    /// there, the burst (this worker's counters).
    pub(crate) fn classified(&self, class: PacketClass, ch: Channel, new_burst: bool) {
        let w = self.stats.worker(self.worker);
        w.classes[class as usize][ch.index()].fetch_add(1, Relaxed);
        if new_burst {
            w.channels[ch.index()].tx_bursts.fetch_add(1, Relaxed);
        }
    }

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
            self.stats.dropped(DropReason::TunWriteError);
        }
    }

    /// Writes `pkt` behind the virtio_net_hdr `hdr` (TUN offload on).
    pub(crate) fn write_tun_offload(&self, hdr: &[u8; VnetHdr::LEN], pkt: &[u8]) {
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
            self.stats.dropped(DropReason::TunWriteError);
        }
    }

    /// Writes what the coalescer holds (TUN offload on).
    pub(crate) fn finish_gro(&self, gro: &mut Gro) {
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
