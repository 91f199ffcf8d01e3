//! CellReplay's model of one direction (NSDI'25; github williamsentosa95/cellreplay,
//! `CellularQueue` in `src/frontend/cellular_queue.cc`), replacing the rate/queue
//! and delay stages when a profile names a CellReplay trace directory.
//!
//! The rule, on the integer-ms clock mm-cellular uses (the trace clocks start at
//! the first packet's ms, `start_tick_`); packet sizes count the 4-byte TUN header
//! mm-cellular reads with every packet:
//!
//! 1. **Light or heavy** (`get_pkt_release_time_from_trace`). A packet at `t`
//!    starts a new *train* when none is running or when `t + base > last + timer`
//!    (`last`: the previous packet's release before the size offset; `timer`:
//!    `--long-to-short-timer`, 0 by default): the application has let the link
//!    drain. A train takes the base delay linearly interpolated (f32, truncated)
//!    between the light-trace lines around `t` and releases its first packet at
//!    `t + base`. Later packets of the train ride its light PDOs (each carries
//!    1400 bytes; the first packet opens the first one): PDOs already past
//!    (`t − train start > pdo`) are skipped, a packet that does not fit in what is
//!    left of one takes the next, and it is released at `train start + base + pdo`.
//!    A packet beyond the last light PDO is *heavy*: held until
//!    `max(t + base, t + last pdo)` and then sent through the heavy-PDO link.
//! 2. **Size offset** (`read_packet`): `round(offset(size))` ms is added when it
//!    does not put the packet before the previous one; a packet that would still
//!    overtake is held until the previous one's time and sent through the link.
//! 3. **Heavy-PDO link** (`write_packets`; the link is `pdo_link.rs`): a light packet leaves at
//!    its release time if the link holds no packet then (one the link delivers in
//!    that same ms still counts); otherwise it queues behind them. The link is
//!    Mahimahi's with 1400-byte opportunities: a packet entering at `r` is carried
//!    by opportunities strictly after `r` (those at `r` were burnt before it was
//!    enqueued), may use what its predecessor left of a later one, and unused
//!    bytes are lost.
//! 4. **Looping**: the light trace loops with period = its last line's time (only
//!    checked when a train starts), the heavy trace with period = its last value.
//!
//! A start offset works as for chanemu's other traces: the first packet meets trace
//! time `offset` (and the traces loop over their whole length). mm-cellular's
//! `--start-timestamp` instead drops the lines before it; that is the `start_ms`
//! of [`CellReplayDir::load`].
//!
//! Where mm-cellular is undefined we choose: a packet over 1400 bytes (it aborts)
//! counts as 1400 for the light PDOs and spans several heavy opportunities; a
//! time before the light trace's first line (its unsigned arithmetic wraps) takes
//! the first line's delay.

use crate::pdo_link::PdoLink;
pub use crate::pdo_link::PDO_BYTES;
use crate::time::{Nanos, NS_PER_MS};
use crate::trace::cellreplay::CellReplayDir;
use std::collections::VecDeque;
use std::sync::Arc;

/// The TUN packet-information header mm-cellular counts in every packet's size.
pub const TUN_HEADER_BYTES: u32 = 4;

/// Where a packet was released from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellReplayRelease {
    /// Release time (run time, whole ms).
    pub release: Nanos,
    /// When it left the light part (whole ms): its release if light, its entry
    /// into the heavy-PDO link if heavy (mm-cellular's delay-queue release).
    pub held: Nanos,
    /// Whether it went through the heavy-PDO link.
    pub heavy: bool,
    /// Packets in the heavy-PDO link when it arrived.
    pub depth: u32,
}

/// One direction of CellReplay's model.
#[derive(Debug, Clone)]
pub struct CellReplayLink {
    tr: Arc<CellReplayDir>,
    timer_ms: i64,
    /// Trace time (ms) the first packet meets.
    start_ms: i64,
    /// Run ms at which the light trace's current loop starts (None: no packet yet).
    delay_base: Option<i64>,
    /// Light-train state: trace line, PDO index, train start (trace ms), base delay.
    train: usize,
    pdo: usize,
    train_start: i64,
    base_delay: i64,
    /// Bytes left in the current light PDO.
    pdo_left: u32,
    /// Previous packet's light release (before the size offset) and final delay-stage release.
    last_light: i64,
    end_release: i64,
    /// The heavy-PDO link (`pdo_link.rs`) and the delivery times of the packets it holds.
    link: PdoLink,
    in_link: VecDeque<i64>,
}

impl CellReplayLink {
    /// A direction replaying `tr` from trace time `offset` on; `timer_ms` is
    /// mm-cellular's `--long-to-short-timer-{up,down}` (0 by default).
    pub fn new(tr: Arc<CellReplayDir>, timer_ms: i64, offset: Nanos) -> Self {
        CellReplayLink {
            tr: tr.clone(),
            timer_ms,
            start_ms: (offset / NS_PER_MS) as i64,
            delay_base: None,
            train: 0,
            pdo: 0,
            train_start: 0,
            base_delay: -1,
            pdo_left: PDO_BYTES,
            last_light: 0,
            end_release: 0,
            link: PdoLink::new(tr.clone(), 0),
            in_link: VecDeque::new(),
        }
    }

    /// The traces it replays.
    pub fn traces(&self) -> &CellReplayDir {
        &self.tr
    }

    /// A packet of `ip_size` bytes (IP header included) arrives at `now`: when it
    /// leaves. Must be called in arrival order.
    pub fn push(&mut self, now: Nanos, ip_size: u32) -> CellReplayRelease {
        let t = (now / NS_PER_MS) as i64;
        let size = ip_size + TUN_HEADER_BYTES;
        if self.delay_base.is_none() {
            // both trace clocks start at the first packet (`start_tick_`)
            self.delay_base = Some(t - self.start_ms);
            self.link = PdoLink::new(self.tr.clone(), t - self.start_ms);
        }
        let (mut release, mut light) = self.light_release(t, size.min(PDO_BYTES));
        if let Some(o) = &self.tr.offsets {
            let off = o.offset_ms(size).round() as i64;
            if release + off >= self.end_release {
                release += off;
            }
        }
        if release < self.end_release {
            release = self.end_release;
            light = false;
        }
        self.end_release = release;
        while self.in_link.front().is_some_and(|&d| d < release) {
            self.in_link.pop_front();
        }
        let depth = self.in_link.len() as u32;
        let heavy = !(light && self.in_link.is_empty());
        let out = if !heavy {
            release
        } else {
            let d = self.link.deliver(release, size);
            self.in_link.push_back(d);
            d
        };
        CellReplayRelease {
            release: out.max(0) as Nanos * NS_PER_MS,
            held: release.max(0) as Nanos * NS_PER_MS,
            heavy,
            depth,
        }
    }

    /// Packets in the heavy-PDO link at `now`.
    pub fn depth(&mut self, now: Nanos) -> u32 {
        let t = (now / NS_PER_MS) as i64;
        while self.in_link.front().is_some_and(|&d| d < t) {
            self.in_link.pop_front();
        }
        self.in_link.len() as u32
    }

    /// Rule 1: the delay-stage release (run ms) of a packet at `t` and whether it
    /// may skip the heavy link.
    fn light_release(&mut self, t: i64, size: u32) -> (i64, bool) {
        let tr = &self.tr.light.trains;
        let mut rel = t - self.delay_base.expect("set by push");
        let new_train =
            self.base_delay < 0 || t + self.base_delay > self.last_light + self.timer_ms;
        let release;
        let light;
        if new_train {
            while tr[self.train + 1].time_ms as i64 <= rel {
                self.train += 1;
                if self.train >= tr.len() - 1 {
                    // loop: the last line's time is the period
                    let b = self.delay_base.as_mut().expect("set by push");
                    *b += tr[self.train].time_ms as i64;
                    rel = t - *b;
                    self.train = 0;
                }
            }
            let (a, b) = (&tr[self.train], &tr[self.train + 1]);
            let ratio = (rel - a.time_ms as i64).max(0) as f32 / (b.time_ms - a.time_ms) as f32;
            let adjusted = ratio * (b.base_delay_ms - a.base_delay_ms) as f32;
            self.base_delay = (a.base_delay_ms as f32 + adjusted) as i64;
            release = t + self.base_delay;
            light = true;
            self.train_start = rel;
            self.pdo = 0;
            self.pdo_left = PDO_BYTES - size;
        } else {
            let pdos = &tr[self.train].pdos_ms;
            let dt = rel - self.train_start;
            while self.pdo < pdos.len() && dt > pdos[self.pdo] {
                self.pdo += 1;
                self.pdo_left = PDO_BYTES;
            }
            if self.pdo_left < size {
                self.pdo += 1;
                self.pdo_left = PDO_BYTES;
            }
            self.pdo_left -= size;
            if self.pdo >= pdos.len() {
                release = (t + self.base_delay).max(t + pdos[pdos.len() - 1]);
                light = false;
            } else {
                release = t + self.base_delay + (pdos[self.pdo] - dt);
                light = true;
            }
        }
        self.last_light = release;
        (release, light)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::cellreplay::{HeavyTrace, LightTrace, SizeOffsets};
    use std::path::Path;

    const MS: Nanos = NS_PER_MS;

    /// A direction from inline file texts (sizes in these tests are IP sizes; the
    /// model adds the 4-byte TUN header: 696 + 4 = 700, two per PDO).
    fn link(light: &str, heavy: &str, offsets: Option<&str>, timer: i64) -> CellReplayLink {
        let p = Path::new("t");
        let dir = CellReplayDir {
            light: LightTrace::parse(p, light, 0).unwrap(),
            heavy: HeavyTrace::parse(p, heavy, 0).unwrap(),
            offsets: offsets.map(|o| SizeOffsets::parse(p, o).unwrap()),
        };
        CellReplayLink::new(Arc::new(dir), timer, 0)
    }

    fn rel(l: &mut CellReplayLink, now_ms: u64, ip: u32) -> (u64, bool) {
        let r = l.push(now_ms * MS, ip);
        (r.release / MS, r.heavy)
    }

    #[test]
    fn isolated_packets_see_the_interpolated_base_delay() {
        // get_pkt_release_time_from_trace, new train: delay = int(d_i + ratio·(d_i+1 − d_i))
        let mut l = link("0 20 5\n100 40 5\n200 40 5\n", "1000\n", None, 0);
        // first packet at run 7 ms: trace clock starts there → rel 0 → 20 ms
        assert_eq!(rel(&mut l, 7, 100), (27, false));
        // run 57 = trace 50: 20 + 0.5·20 = 30 ms (the previous one left at 27: new train)
        assert_eq!(rel(&mut l, 57, 100), (87, false));
        // trace 133: line 1 (100..200, 40 → 40): 40 ms
        assert_eq!(rel(&mut l, 140, 100), (180, false));
        // trace 233 ≥ the period 200: loops to trace 33 → 20 + 0.33·20 = 26.6 → 26
        assert_eq!(rel(&mut l, 240, 100), (266, false));
    }

    #[test]
    fn a_train_rides_its_light_pdos_then_the_heavy_link() {
        // one train line: base 20 ms, light PDOs at 0, 3 and 8 ms after its first packet;
        // heavy opportunities every 10 ms (period 1000)
        let heavy: String = (1..=100).map(|i| format!("{}\n", i * 10)).collect();
        let mut l = link("0 20 0 3 8\n500 20 0 3 8\n1000 20 0 3 8\n", &heavy, None, 0);
        // packets of 696 + 4 = 700 B, all sent at t = 0 (a burst):
        // #1 opens the train: 0 + 20
        assert_eq!(rel(&mut l, 0, 696), (20, false));
        // #2 fits in the 700 B left of the first PDO (pdo[0] = 0): 0 + 20 + 0
        assert_eq!(rel(&mut l, 0, 696), (20, false));
        // #3 does not fit: next PDO (3 ms): 23; #4 shares it
        assert_eq!(rel(&mut l, 0, 696), (23, false));
        assert_eq!(rel(&mut l, 0, 696), (23, false));
        // #5, #6: PDO at 8 ms → 28
        assert_eq!(rel(&mut l, 0, 696), (28, false));
        assert_eq!(rel(&mut l, 0, 696), (28, false));
        // #7: past the last light PDO → held until max(0 + 20, 0 + 8) = 20 but no
        // earlier than #6 (28): enters the heavy link at 28 → opportunity at 30
        let r = l.push(0, 696);
        assert_eq!((r.held, r.release, r.heavy), (28 * MS, 30 * MS, true));
        // #8 at 0: same rule, shares the rest of the 30 ms opportunity
        assert_eq!(rel(&mut l, 0, 696), (30, true));
        // #9 at 1 ms: 1 + 20 > 20 (#8's light release, before it was held to 28)
        // starts a new train → 21, held behind #8 to 28 and queued behind the
        // link's two packets → the next opportunity, 40
        assert_eq!(rel(&mut l, 1, 696), (40, true));
        // at 100 ms the link has drained and 100 + 20 > 28: a new train
        assert_eq!(rel(&mut l, 100, 696), (120, false));
    }

    #[test]
    fn skipped_light_pdos_and_the_long_to_short_timer() {
        let heavy: String = (1..=100).map(|i| format!("{}\n", i * 10)).collect();
        let light = "0 20 0 3 8\n500 20 0 3 8\n1000 20 0 3 8\n";
        let mut l = link(light, &heavy, None, 0);
        assert_eq!(rel(&mut l, 0, 696), (20, false));
        // at 5 ms: 5 + 20 = 25 ≤ 20? no → a new train (timer 0): 25
        assert_eq!(rel(&mut l, 5, 696), (25, false));
        // with a 10 ms timer the same packet continues the train: PDOs at 0 and 3 ms
        // are past (5 > 3) → PDO 8: release 0 + 20 + 8 = 28
        let mut l = link(light, &heavy, None, 10);
        assert_eq!(rel(&mut l, 0, 696), (20, false));
        assert_eq!(rel(&mut l, 5, 696), (28, false));
    }

    #[test]
    fn size_offset_is_added_unless_it_reorders() {
        // read_packet: release += round(offset(size)) if that keeps the order
        let offs = "100 0\n200 2\n300 10\n";
        let mut l = link("0 20 0\n500 20 0\n1000 20 0\n", "1000\n", Some(offs), 0);
        // 146 + 4 = 150 B → 0 + 0.5·2 = 1 ms: 0 + 20 + 1
        assert_eq!(rel(&mut l, 0, 146), (21, false));
        // 296 + 4 = 300 B at 100 ms → +10: 130
        assert_eq!(rel(&mut l, 100, 296), (130, false));
        // a negative offset that would reorder is not applied
        let mut n = link(
            "0 20 0\n500 20 0\n1000 20 0\n",
            "1000\n",
            Some("100 -5\n200 0\n"),
            0,
        );
        // 200 B: +0 → 20
        assert_eq!(rel(&mut n, 0, 196), (20, false));
        // 100 B at 1 ms: 1 + 20 > 20 starts a new train → 21; −5 would give 16 < 20,
        // so the offset is not applied
        assert_eq!(rel(&mut n, 1, 96), (21, false));
    }

    #[test]
    fn heavy_link_uses_opportunities_strictly_after_entry_and_loops() {
        // heavy trace: 30, 30, 60 (period 60). A burst past the light PDO goes heavy.
        let mut l = link("0 30 0\n500 30 0\n1000 30 0\n", "30\n30\n60\n", None, 0);
        assert_eq!(rel(&mut l, 0, 696), (30, false)); // opens the train
        assert_eq!(rel(&mut l, 0, 696), (30, false)); // rest of pdo 0
                                                      // past the light PDOs: held until max(30, 0) = 30, enters the link at 30;
                                                      // the two opportunities at 30 were burnt before → the one at 60
        assert_eq!(rel(&mut l, 0, 1396), (60, true));
        // next: 1400 B → next loop's first opportunity: 60 + 30 = 90
        assert_eq!(rel(&mut l, 0, 1396), (90, true));
        assert_eq!(rel(&mut l, 0, 1396), (90, true));
        assert_eq!(rel(&mut l, 0, 1396), (120, true));
        // at 100 ms only the packet leaving at 120 is still in the link
        assert_eq!(l.depth(100 * MS), 1);
    }

    #[test]
    fn a_start_offset_shifts_both_trace_clocks() {
        let p = Path::new("t");
        let dir = Arc::new(CellReplayDir {
            light: LightTrace::parse(p, "0 20 5\n100 40 5\n200 40 5\n", 0).unwrap(),
            heavy: HeavyTrace::parse(p, "30\n30\n60\n", 0).unwrap(),
            offsets: None,
        });
        // offset 50 ms: the first packet (run 7 ms) meets trace time 50 → 20 + 0.5·20 = 30
        let mut l = CellReplayLink::new(dir.clone(), 0, 50 * MS);
        assert_eq!(rel(&mut l, 7, 100), (37, false));
        // offset 250 ms (≥ the 200 ms period): trace time 50 of the second loop, as above
        let mut l = CellReplayLink::new(dir, 0, 250 * MS);
        assert_eq!(rel(&mut l, 7, 100), (37, false));
        // heavy clock: trace time 250 = 4·60 + 10 → run 7 is loop 4, 10 ms in; a
        // packet entering the link at run 37 (trace 280 = loop 4, 40 ms in) is carried
        // by the opportunity at 60 ms of loop 4 = trace 300 = run 57
        assert_eq!(rel(&mut l, 7, 1396), (57, true));
    }
}
