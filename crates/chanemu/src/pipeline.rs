//! One direction of a channel: faults → loss → rate/queue → delay → radio sleep.
//! With a CellReplay trace (`cellreplay.rs`) its light/heavy PDO stage takes the
//! place of rate/queue; the delay stage still adds the profile's delay after it.
//!
//! The fault stage (outages, loss bursts) judges a packet twice: when it enters
//! (nothing enters a dead link) and once its release time is known (nothing leaves
//! a dead link); see `outage.rs`.
//!
//! With `--control-first` (rule (d) of issue 41, `priority.rs`) a two-class
//! strict-priority queue takes the place of rate/queue; a packet's release is
//! then fixed when the link has served it (a later control packet may overtake
//! it), so `pop_due` first runs the served packets through the later stages.
//!
//! `push` runs a packet through every stage at its arrival and fixes its release
//! time (each stage's output depends only on earlier packets, so nothing is
//! gained by deciding later); `pop_due` hands out released packets in order and
//! `next_deadline` tells the driver when to come back. Packets are generic (`P`)
//! so the driver can pass recycled buffers and tests plain ids; the only
//! per-packet storage is a ring buffer that stops growing at the peak backlog.

use crate::cellreplay::{CellReplayLink, PDO_BYTES, TUN_HEADER_BYTES};
use crate::delay::DelayStage;
use crate::drx::Drx;
use crate::loss::Loss;
use crate::outage::{FaultDrop, Faults};
use crate::priority::{PriorityQueue, Served};
use crate::queue::{Admitted, RateQueue};
use crate::time::Nanos;
use crate::wire_class::Class;
use std::collections::VecDeque;

/// Why the pipeline dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The loss stage drew it.
    Loss,
    /// The queue was full (drop-tail).
    Queue,
    /// The link was down when the packet entered or would have left it.
    Outage,
    /// A loss burst drew it.
    Burst,
}

impl DropReason {
    /// Name in packet logs.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "drop_loss",
            DropReason::Queue => "drop_queue",
            DropReason::Outage => "drop_outage",
            DropReason::Burst => "drop_burst",
        }
    }
}

/// A packet with its schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled<P> {
    /// The driver's packet.
    pub payload: P,
    /// Its size in bytes (what the rate stage serialises).
    pub size: u32,
    /// When it entered the link.
    pub arrival: Nanos,
    /// When it leaves the link.
    pub release: Nanos,
    /// Packets queued at the link in front of it when it arrived.
    pub depth: u32,
}

impl From<FaultDrop> for DropReason {
    fn from(f: FaultDrop) -> Self {
        match f {
            FaultDrop::Outage => DropReason::Outage,
            FaultDrop::Burst => DropReason::Burst,
        }
    }
}

/// One direction of a channel: faults, loss, rate/queue, delay, radio sleep.
pub struct Pipeline<P> {
    faults: Option<Faults>,
    loss: Loss,
    queue: RateQueue,
    /// CellReplay's light/heavy PDO stage, in place of `queue` when set.
    cellreplay: Option<CellReplayLink>,
    /// Control packets first (`--control-first`), in place of `queue` when set.
    priority: Option<PriorityQueue<P>>,
    /// Packets the priority stage served into a dead link (outage), not yet
    /// counted by the driver ([`Self::take_late_drops`]).
    late_drops: u64,
    delay: DelayStage,
    drx: Option<Drx>,
    out: VecDeque<Scheduled<P>>,
}

impl<P> Pipeline<P> {
    /// A pipeline of these stages (`drx` only on downlinks).
    pub fn new(loss: Loss, queue: RateQueue, delay: DelayStage, drx: Option<Drx>) -> Self {
        Pipeline {
            loss,
            queue,
            delay,
            drx,
            faults: None,
            cellreplay: None,
            priority: None,
            late_drops: 0,
            out: VecDeque::with_capacity(1024),
        }
    }

    /// The same pipeline with a fault stage in front (outages, loss bursts).
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = Some(faults);
        self
    }

    /// The same pipeline with CellReplay's PDO stage in place of rate/queue.
    pub fn with_cellreplay(mut self, link: CellReplayLink) -> Self {
        self.cellreplay = Some(link);
        self
    }

    /// The same pipeline with control packets served first (`priority.rs`)
    /// in place of rate/queue, with the same queue limit and rate; refused
    /// (`None`) over CellReplay's PDO stage, which has no queue to split.
    pub fn with_control_first(mut self) -> Option<Self> {
        if self.cellreplay.is_some() {
            return None;
        }
        self.priority = Some(PriorityQueue::new(
            self.queue.limit(),
            self.queue.schedule().clone(),
        ));
        Some(self)
    }

    /// Whether control packets are served first (the driver then classifies).
    pub fn control_first(&self) -> bool {
        self.priority.is_some()
    }

    /// A packet of `size` bytes arrives at `now`; its release time and the
    /// packets queued in front of it. On drop the payload is handed back. The
    /// FIFO pipeline's entry: with control first use [`push_class`](Self::push_class)
    /// (this one would bypass the priority queue).
    pub fn push(
        &mut self,
        now: Nanos,
        size: u32,
        payload: P,
    ) -> Result<(Nanos, u32), (DropReason, P)> {
        debug_assert!(self.priority.is_none(), "control first: use push_class");
        if let Some(why) = self.admit(now) {
            return Err((why, payload));
        }
        let adm = match &mut self.cellreplay {
            Some(cr) => {
                let r = cr.push(now, size);
                Admitted {
                    // mm-cellular's clock is whole ms: a release in the packet's own ms
                    // (base delay 0) is already due when it arrives, and it leaves at
                    // once, never before it came (the next stage adds from here)
                    finish: r.release.max(now),
                    depth: r.depth,
                }
            }
            None => match self.queue.offer(now, size) {
                Some(adm) => adm,
                None => return Err((DropReason::Queue, payload)),
            },
        };
        let served = Served {
            payload,
            size,
            arrival: now,
            finish: adm.finish,
            depth: adm.depth,
            class: Class::Bulk,
        };
        self.after_link(served).map(|r| (r, adm.depth))
    }

    /// A packet of `size` bytes and `class` arrives at `now`; `Ok`: the packets
    /// queued in front of it. The class counts only with control first, where
    /// the release is fixed once the link has served the packet (`pop_due`).
    pub fn push_class(
        &mut self,
        now: Nanos,
        size: u32,
        class: Class,
        payload: P,
    ) -> Result<u32, (DropReason, P)> {
        if self.priority.is_none() {
            return self.push(now, size, payload).map(|(_, depth)| depth);
        }
        if let Some(why) = self.admit(now) {
            return Err((why, payload));
        }
        let q = self.priority.as_mut().expect("control first");
        q.offer(now, size, class, payload)
            .map_err(|p| (DropReason::Queue, p))
    }

    /// The fault and loss stages at entry: why the packet is dropped, if it is.
    fn admit(&mut self, now: Nanos) -> Option<DropReason> {
        if let Some(f) = &mut self.faults {
            if let Err(why) = f.admit(now) {
                return Some(why.into());
            }
        }
        self.loss.drop_next().then_some(DropReason::Loss)
    }

    /// The stages after the link (delay, radio sleep, the link dying before
    /// the packet leaves) for a packet that has left the link: its release.
    fn after_link(&mut self, s: Served<P>) -> Result<Nanos, (DropReason, P)> {
        let mut release = self.delay.release(s.arrival, s.finish);
        if let Some(drx) = &mut self.drx {
            // DRX only ever delays, and the delay stage kept releases ordered; the
            // max keeps them ordered after DRX too.
            let prev = self.out.back().map_or(0, |p| p.release);
            release = drx.deliver(release).max(prev);
        }
        if let Some(f) = &self.faults {
            // it took its place in the queue, but the link is dead when it would leave
            if !f.delivers(release) {
                return Err((DropReason::Outage, s.payload));
            }
        }
        self.out.push_back(Scheduled {
            payload: s.payload,
            size: s.size,
            arrival: s.arrival,
            release,
            depth: s.depth,
        });
        Ok(release)
    }

    /// With control first: runs the packets the link has served by `now`
    /// through the later stages.
    fn serve(&mut self, now: Nanos) {
        while let Some(s) = self.priority.as_mut().and_then(|q| q.poll(now)) {
            if self.after_link(s).is_err() {
                self.late_drops += 1;
            }
        }
    }

    /// Packets dropped as [`DropReason::Outage`] after the priority stage
    /// served them (the link died before they left), since the last call.
    pub fn take_late_drops(&mut self) -> u64 {
        std::mem::take(&mut self.late_drops)
    }

    /// The one-way delay a packet entering the link at `now` would see (queue
    /// wait, propagation delay, the no-overtaking rule and radio sleep), if
    /// it is not lost; `peer_activity` is the last traffic the other direction
    /// carried (it keeps a sleeping radio awake). Used by the oracle
    /// (`--oracle`), which tells a policy the true channel delay: the upper
    /// bound of what a better delay estimate can buy.
    pub fn predict_one_way(&self, now: Nanos, peer_activity: Nanos) -> Nanos {
        let free = match &self.cellreplay {
            // what a full-sized packet entering now would get, without taking it
            Some(cr) => cr
                .clone()
                .push(now, PDO_BYTES - TUN_HEADER_BYTES)
                .release
                .max(now),
            None => match &self.priority {
                Some(q) => q.free_at(now),
                None => self.queue.free_at(now),
            },
        };
        let mut release = self.delay.would_release(now, free);
        if let Some(drx) = &self.drx {
            let prev = self.out.back().map_or(0, |p| p.release);
            release = drx.would_deliver(release, peer_activity).max(prev);
        }
        release - now
    }

    /// Packets waiting at the link (queued or being serialised) at `now`.
    pub fn queue_depth(&mut self, now: Nanos) -> u32 {
        if let Some(q) = &mut self.priority {
            return q.depth(now);
        }
        match &mut self.cellreplay {
            Some(cr) => cr.depth(now),
            None => self.queue.depth(now),
        }
    }

    /// Traffic in the opposite direction (keeps a DRX radio awake).
    pub fn note_peer_activity(&mut self, t: Nanos) {
        if let Some(d) = &mut self.drx {
            d.note_activity(t);
        }
    }

    /// Whether the radio-sleep stage is on.
    pub fn has_drx(&self) -> bool {
        self.drx.is_some()
    }

    /// The next packet whose release time is ≤ `now`, in order.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Scheduled<P>> {
        self.serve(now);
        if self.out.front()?.release <= now {
            self.out.pop_front()
        } else {
            None
        }
    }

    /// Release time of the next packet, if any; with control first, also when
    /// the link next finishes serving one (its release is fixed then).
    pub fn next_deadline(&self) -> Option<Nanos> {
        let served = self.priority.as_ref().and_then(|q| q.next_finish());
        let next = self.out.front().map(|p| p.release);
        match (next, served) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Packets scheduled but not yet released (with control first, also those
    /// still waiting for the link).
    pub fn in_flight(&self) -> usize {
        let waiting = self.priority.as_ref().map_or(0, |q| q.len());
        self.out.len() + waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delay::DelayModel;
    use crate::queue::QueueLimit;
    use crate::rate::{Capacity, RateSchedule};
    use crate::time::NS_PER_MS as MS;

    /// Unlimited rate, 5 ms one-way, DRX 30/40 (inactivity 30 ms, cycle 40 ms).
    fn drx_5ms_30_40() -> Pipeline<u32> {
        let drx = Some(Drx::new(30 * MS, 40 * MS));
        pipe(
            Capacity::Unlimited,
            QueueLimit::Packets(800),
            5 * MS,
            0.0,
            drx,
        )
    }

    fn pipe(
        cap: Capacity,
        limit: QueueLimit,
        owd: Nanos,
        loss: f64,
        drx: Option<Drx>,
    ) -> Pipeline<u32> {
        Pipeline::new(
            Loss::new(loss, 1, 1),
            RateQueue::new(limit, RateSchedule::new(cap, 0)),
            DelayStage::new(DelayModel::Fixed(owd)),
            drx,
        )
    }

    /// 12 Mbit/s (1 ms per 1500 B) + 20 ms one-way, no loss, no DRX.
    fn pipe_12mbit_20ms(limit: QueueLimit) -> Pipeline<u32> {
        pipe(Capacity::Constant(12_000_000), limit, 20 * MS, 0.0, None)
    }

    /// Every packet [`Pipeline::pop_due`] releases by `now`: (id, release).
    fn released(p: &mut Pipeline<u32>, now: Nanos) -> Vec<(u32, Nanos)> {
        std::iter::from_fn(|| p.pop_due(now))
            .map(|s| (s.payload, s.release))
            .collect()
    }

    #[test]
    fn control_first_lets_an_ack_overtake_queued_bulk_then_adds_the_delay() {
        // 12 Mbit/s + 20 ms: three 1500 B bulk packets at 0, a 60 B ACK at 0.5 ms.
        // FIFO: the ACK leaves the link at 3.04 ms -> released at 23.04 ms.
        let mut fifo = pipe_12mbit_20ms(QueueLimit::Packets(800));
        for id in 1..=3 {
            fifo.push_class(0, 1500, Class::Bulk, id).unwrap();
        }
        assert_eq!(fifo.push_class(MS / 2, 60, Class::Control, 9), Ok(3));
        let ack_fifo = 3 * MS + 40_000 + 20 * MS;
        assert_eq!(released(&mut fifo, 30 * MS).last(), Some(&(9, ack_fifo)));
        // control first: after #1 (on the wire until 1 ms), 1.04 ms -> 21.04 ms;
        // the bulk packets each 1 ms later than in FIFO order
        let mut p = pipe_12mbit_20ms(QueueLimit::Packets(800))
            .with_control_first()
            .unwrap();
        assert!(p.control_first());
        for id in 1..=3 {
            assert_eq!(p.push_class(0, 1500, Class::Bulk, id), Ok(id - 1));
        }
        assert_eq!(p.push_class(MS / 2, 60, Class::Control, 9), Ok(3));
        assert_eq!((p.in_flight(), p.queue_depth(MS / 2)), (4, 4));
        // the driver wakes when the link finishes #1, then at its release
        assert_eq!(p.next_deadline(), Some(MS));
        assert_eq!(released(&mut p, MS), vec![]);
        assert_eq!(p.next_deadline(), Some(MS + 40_000));
        let ack = MS + 40_000;
        assert_eq!(
            released(&mut p, 30 * MS),
            vec![
                (1, 21 * MS),
                (9, ack + 20 * MS),
                (2, ack + MS + 20 * MS),
                (3, ack + 2 * MS + 20 * MS)
            ]
        );
        assert_eq!((p.next_deadline(), p.in_flight()), (None, 0));
    }

    #[test]
    fn control_first_keeps_the_queue_limit_and_loss() {
        let mut p = pipe_12mbit_20ms(QueueLimit::Packets(2))
            .with_control_first()
            .unwrap();
        p.push_class(0, 1500, Class::Bulk, 1).unwrap();
        p.push_class(0, 1500, Class::Bulk, 2).unwrap();
        assert_eq!(
            p.push_class(0, 60, Class::Control, 3),
            Err((DropReason::Queue, 3))
        );
        let mut lossy = pipe(
            Capacity::Unlimited,
            QueueLimit::Packets(800),
            5 * MS,
            1.0,
            None,
        )
        .with_control_first()
        .unwrap();
        assert_eq!(
            lossy.push_class(0, 60, Class::Control, 1),
            Err((DropReason::Loss, 1))
        );
    }

    #[test]
    fn rate_then_delay_in_order() {
        let mut p = pipe_12mbit_20ms(QueueLimit::Packets(2));
        assert_eq!(p.push(0, 1500, 1), Ok((21 * MS, 0)));
        assert_eq!(p.push(0, 1500, 2), Ok((22 * MS, 1)));
        assert_eq!(p.push(0, 1500, 3), Err((DropReason::Queue, 3)));
        assert_eq!(p.next_deadline(), Some(21 * MS));
        assert!(p.pop_due(21 * MS - 1).is_none());
        assert_eq!(p.pop_due(21 * MS).unwrap().payload, 1);
        assert!(p.pop_due(21 * MS).is_none());
        let s = p.pop_due(30 * MS).unwrap();
        assert_eq!(
            (s.payload, s.arrival, s.release, s.depth),
            (2, 0, 22 * MS, 1)
        );
        assert_eq!(p.next_deadline(), None);
    }

    #[test]
    fn prediction_is_what_the_next_packet_sees_without_taking_its_place() {
        // 12 Mbit/s + 20 ms: two packets at 0 finish serialising at 1 and 2 ms.
        let mut p = pipe_12mbit_20ms(QueueLimit::Packets(800));
        assert_eq!(p.predict_one_way(0, 0), 20 * MS); // empty link: the propagation delay
        p.push(0, 1500, 1).unwrap();
        p.push(0, 1500, 2).unwrap();
        // at 0.5 ms: waits until 2 ms, then 20 ms (its own serialisation not counted)
        assert_eq!(p.predict_one_way(MS / 2, 0), MS + MS / 2 + 20 * MS);
        assert_eq!(p.predict_one_way(MS / 2, 0), MS + MS / 2 + 20 * MS); // took nothing
        assert_eq!(p.push(MS / 2, 1500, 3).unwrap().0, 23 * MS); // = 0.5 + 21.5 + 1 ms
        assert_eq!(p.predict_one_way(10 * MS, 0), 20 * MS); // queue drained by 3 ms

        // DRX 30/40 behind 5 ms: at 100 ms the radio (last traffic at 5 ms) sleeps
        let mut d = drx_5ms_30_40();
        assert_eq!(d.push(0, 100, 1).unwrap().0, 5 * MS);
        // reaches the radio at 105 ms: asleep since 35, wakes at 75 and 115 -> 15 ms more
        assert_eq!(d.predict_one_way(100 * MS, 0), 15 * MS);
        // uplink traffic at 90 ms keeps it awake until 120 ms: no wait
        assert_eq!(d.predict_one_way(100 * MS, 90 * MS), 5 * MS);
        // and the prediction matches the push that follows it
        assert_eq!(d.push(100 * MS, 100, 2).unwrap().0, 115 * MS);
    }

    #[test]
    fn loss_happens_before_the_queue() {
        let mut p = pipe(Capacity::Unlimited, QueueLimit::Packets(800), 0, 1.0, None);
        assert_eq!(p.push(0, 100, 9), Err((DropReason::Loss, 9)));
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn drx_delays_after_idle_and_stays_ordered() {
        // 5 ms one-way, DRX 30/40
        let mut p = drx_5ms_30_40();
        // reaches the radio at 5 ms: awake
        assert_eq!(p.push(0, 100, 1).unwrap().0, 5 * MS);
        // asleep at 35; reaches radio at 105 → wake-ups 75, 115 → 115
        assert_eq!(p.push(100 * MS, 100, 2).unwrap().0, 115 * MS);
        // reaches radio at 106 < 115: must not overtake, and the radio is awake from 115
        assert_eq!(p.push(101 * MS, 100, 3).unwrap().0, 115 * MS);
        p.note_peer_activity(300 * MS);
        assert_eq!(p.push(310 * MS, 100, 4).unwrap().0, 315 * MS);
    }

    #[test]
    fn outage_drops_what_enters_or_would_leave_while_down() {
        use crate::outage::{FaultSpec, Window};
        // down from 100 to 200 ms
        let down = Window {
            from: 100 * MS,
            to: 200 * MS,
        };
        let mut p = pipe_12mbit_20ms(QueueLimit::Packets(800)).with_faults(Faults::new(
            FaultSpec::new(vec![down], vec![], None).unwrap(),
            1,
            3,
        ));
        // leaves at 58 + 1 + 20 = 79 ms: delivered
        assert_eq!(p.push(58 * MS, 1500, 2), Ok((79 * MS, 0)));
        // leaves at 80 + 1 + 20 = 101 ms: inside → lost in flight
        assert_eq!(p.push(80 * MS, 1500, 1), Err((DropReason::Outage, 1)));
        // enters while down
        assert_eq!(p.push(150 * MS, 1500, 3), Err((DropReason::Outage, 3)));
        assert_eq!(p.push(199 * MS, 1500, 4), Err((DropReason::Outage, 4)));
        // the first packet after the outage goes through: 200 + 1 + 20
        assert_eq!(p.push(200 * MS, 1500, 5), Ok((221 * MS, 0)));
        assert_eq!(p.in_flight(), 2);
    }

    #[test]
    fn same_seed_same_schedule() {
        let run = || {
            let mut p = pipe(
                Capacity::Constant(10_000_000),
                QueueLimit::Packets(20),
                MS,
                0.1,
                None,
            );
            (0..2000u32)
                .map(|i| {
                    p.push(i as u64 * 100_000, 1200, i)
                        .map(|r| r.0)
                        .map_err(|e| e.0)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    /// A CellReplay stage over these light and heavy traces (no size offsets).
    fn cellreplay_link(light: &str, heavy: &str) -> crate::cellreplay::CellReplayLink {
        use crate::trace::cellreplay::{CellReplayDir, HeavyTrace, LightTrace};
        let p = std::path::Path::new("t");
        let dir = CellReplayDir {
            light: LightTrace::parse(p, light, 0).unwrap(),
            heavy: HeavyTrace::parse(p, heavy, 0).unwrap(),
            offsets: None,
        };
        crate::cellreplay::CellReplayLink::new(std::sync::Arc::new(dir), 0, 0)
    }

    #[test]
    fn cellreplay_takes_the_place_of_rate_and_queue() {
        let link = cellreplay_link("0 20 0\n500 20 0\n1000 20 0\n", "30\n30\n60\n");
        // a 1 Mbit/s, 1-packet queue that CellReplay replaces; 5 ms of extra one-way delay
        let mut p = pipe(
            Capacity::Constant(1_000_000),
            QueueLimit::Packets(1),
            5 * MS,
            0.0,
            None,
        )
        .with_cellreplay(link);
        // 696 + 4 B: base delay 20 ms (cellreplay.rs), then + 5 ms
        assert_eq!(p.push(0, 696, 1), Ok((25 * MS, 0)));
        // the rest of the light PDO at 0 ms: 20 + 5 (no queue drop, no 1 Mbit/s)
        assert_eq!(p.push(0, 696, 2), Ok((25 * MS, 0)));
        // a full packet is past the light PDOs: it enters the heavy link at 20 ms and
        // leaves on the opportunity at 30 ms, + 5; the prediction takes no place
        assert_eq!(p.predict_one_way(0, 0), 35 * MS);
        assert_eq!(p.predict_one_way(0, 0), 35 * MS);
        assert_eq!(p.push(0, 1396, 3), Ok((35 * MS, 0)));
        assert_eq!(p.queue_depth(25 * MS), 1);
        assert_eq!(p.queue_depth(31 * MS), 0);
    }

    #[test]
    fn a_cellreplay_release_is_never_before_the_arrival() {
        // base delay 0 (the ideal link's view of a CellReplay HBC)
        let link = cellreplay_link("0 0 0\n500 0 0\n1000 0 0\n", "30\n30\n60\n");
        let mut p = pipe(
            Capacity::Unlimited,
            QueueLimit::Unlimited,
            5 * MS,
            0.0,
            None,
        )
        .with_cellreplay(link);
        // a new train at 1.9 ms: CellReplay releases it in its ms (1 ms, whole ms),
        // already past; it leaves the stage at 1.9 ms, + 5 ms of delay = 6.9 ms
        assert_eq!(p.push(1_900_000, 100, 1), Ok((6_900_000, 0)));
        // a new train at 10 ms exactly: 10 + 5
        assert_eq!(p.push(10 * MS, 100, 2), Ok((15 * MS, 0)));
    }
}
