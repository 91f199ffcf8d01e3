//! The I/O driver: one thread per direction moves packets from one TUN device
//! through that direction's [`Pipeline`] to the other TUN device.
//!
//! Timing: each thread sleeps in `ppoll` on its input until shortly before the
//! next release (timer slack set to 1 ns so the kernel does not batch wake-ups),
//! then spins for the last `spin` ns, reading input as it comes, and writes each
//! packet as soon as its release time has passed.

use crate::pcap::Tap;
use crate::pktlog::PacketLog;
use chanemu::pipeline::Pipeline;
use chanemu::profile::Direction;
use chanemu::stats::DirStats;
use chanemu::time::Nanos;
use dchannel_base::oracle::{DelayOracle, Slot};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Longest sleep without looking at the stop flag.
const MAX_SLEEP_NS: u64 = 20_000_000;
/// Packets read per pass before releasing again (bounds release jitter under load).
const READ_BATCH: usize = 32;

pub struct DirectionIo {
    pub dir: Direction,
    pub input: RawFd,
    pub output: RawFd,
    pub pipe: Pipeline<Vec<u8>>,
    pub buf_size: usize,
    pub spin_ns: u64,
    pub rt_priority: i32,
    pub epoch: Instant,
    pub stop: Arc<AtomicBool>,
    pub log: Option<Arc<PacketLog>>,
    /// `--pcap`: this direction's end of the capture.
    pub pcap: Option<Tap>,
    /// Uplink arrivals as seen by the downlink's DRX (ns since epoch).
    pub uplink_activity: Arc<AtomicU64>,
    /// `--oracle`: where this direction's predicted one-way delay is published
    /// (at least every [`ORACLE_PERIOD_NS`] and after every packet).
    pub oracle: Option<Arc<DelayOracle>>,
}

/// Longest time between two oracle publications.
const ORACLE_PERIOD_NS: u64 = 1_000_000;

fn now_ns(epoch: Instant) -> Nanos {
    epoch.elapsed().as_nanos() as Nanos
}

impl DirectionIo {
    pub fn run(mut self) -> DirStats {
        // SAFETY: prctl with integer arguments only affects this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        if self.rt_priority > 0 {
            let param = libc::sched_param {
                sched_priority: self.rt_priority,
            };
            // SAFETY: pid 0 = this thread; param is a valid sched_param.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                tracing::warn!(error = %std::io::Error::last_os_error(), "cannot use SCHED_FIFO; release times will be less precise");
            }
        }
        let mut stats = DirStats::default();
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let name = self.dir.as_str();
        let is_uplink = self.dir == Direction::Uplink;
        let uses_peer = self.pipe.has_drx();
        let oracle_slot = if is_uplink {
            Slot::Uplink
        } else {
            Slot::Downlink
        };
        let mut write_errors = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            // 1. release everything that is due
            let mut now = now_ns(self.epoch);
            while let Some(p) = self.pipe.pop_due(now) {
                // SAFETY: writing an initialised buffer to a descriptor we own.
                let n =
                    unsafe { libc::write(self.output, p.payload.as_ptr().cast(), p.payload.len()) };
                let sent = now_ns(self.epoch);
                if n < 0 {
                    write_errors += 1;
                    if write_errors.is_power_of_two() {
                        tracing::warn!(dir = name, error = %std::io::Error::last_os_error(), write_errors, "write to TUN failed");
                    }
                } else if let Some(tap) = &mut self.pcap {
                    tap.packet(sent, &p.payload);
                }
                stats.pkts_out += 1;
                stats.bytes_out += p.size as u64;
                stats.delay_us.record((p.release - p.arrival) / 1000);
                stats
                    .release_error_us
                    .record(sent.saturating_sub(p.release) / 1000);
                if let Some(log) = &self.log {
                    log.sent(name, p.arrival, p.release, sent, p.size, p.depth);
                }
                pool.push(p.payload);
                now = sent;
            }
            stats.pkts_dropped_outage += self.pipe.take_late_drops();
            // 2. read what has arrived
            let mut got = 0;
            while got < READ_BATCH {
                let mut buf = pool
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(self.buf_size));
                // SAFETY: the buffer has buf_size bytes of capacity; read fills at most that.
                let n = unsafe { libc::read(self.input, buf.as_mut_ptr().cast(), self.buf_size) };
                if n <= 0 {
                    pool.push(buf);
                    break;
                }
                // SAFETY: read initialised the first n bytes.
                unsafe { buf.set_len(n as usize) };
                got += 1;
                let t = now_ns(self.epoch);
                let size = n as u32;
                stats.pkts_in += 1;
                stats.bytes_in += size as u64;
                if is_uplink {
                    self.uplink_activity.fetch_max(t, Ordering::Relaxed);
                } else if uses_peer {
                    self.pipe
                        .note_peer_activity(self.uplink_activity.load(Ordering::Relaxed));
                }
                let class = if self.pipe.control_first() {
                    chanemu::wire_class::classify(&buf)
                } else {
                    chanemu::wire_class::Class::Bulk
                };
                match self.pipe.push_class(t, size, class, buf) {
                    Ok(_) => {}
                    Err((reason, mut buf)) => {
                        match reason {
                            chanemu::pipeline::DropReason::Loss => stats.pkts_dropped_loss += 1,
                            chanemu::pipeline::DropReason::Queue => stats.pkts_dropped_queue += 1,
                            chanemu::pipeline::DropReason::Outage => stats.pkts_dropped_outage += 1,
                            chanemu::pipeline::DropReason::Burst => stats.pkts_dropped_burst += 1,
                        }
                        if let Some(log) = &self.log {
                            let depth = self.pipe.queue_depth(t);
                            log.dropped(name, t, reason.as_str(), size, depth);
                        }
                        buf.clear();
                        pool.push(buf);
                    }
                }
            }
            if let Some(o) = &self.oracle {
                let t = now_ns(self.epoch);
                let peer = if is_uplink {
                    0
                } else {
                    self.uplink_activity.load(Ordering::Relaxed)
                };
                o.publish(oracle_slot, Some(self.pipe.predict_one_way(t, peer)));
            }
            if got > 0 {
                continue;
            }
            // 3. wait for input or the next release
            now = now_ns(self.epoch);
            let max_sleep = if self.oracle.is_some() {
                ORACLE_PERIOD_NS
            } else {
                MAX_SLEEP_NS
            };
            let until = self
                .pipe
                .next_deadline()
                .map_or(max_sleep, |d| d.saturating_sub(now))
                .min(max_sleep);
            if until > self.spin_ns {
                let sleep = until - self.spin_ns;
                let ts = libc::timespec {
                    tv_sec: (sleep / 1_000_000_000) as libc::time_t,
                    tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
                };
                let mut pfd = libc::pollfd {
                    fd: self.input,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd and a valid timespec; no signal mask change.
                unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
            } else {
                std::hint::spin_loop();
            }
        }
        if write_errors > 0 {
            tracing::warn!(dir = name, write_errors, "packets could not be written");
        }
        stats
    }
}
