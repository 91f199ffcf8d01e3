//! Receiver-side reorder buffer for packets that arrived over the LLC
//! (NSDI'23 §4.3). A packet that overtook earlier packets of its flow (sent
//! on the slower HBC) is held until every earlier packet of the flow has been
//! delivered, or until it has waited `timeout` (100 ms by default). Packets
//! from the HBC are never held: the HBC is the slow path, holding them could
//! only add delay.
//!
//! With `fifo_loss` (off by default: NSDI'23's buffer has only the timeout) the
//! buffer also uses that each channel delivers a flow's packets in the order
//! they were sent (a radio link, a FIFO queue; chanemu keeps that rule). A held
//! LLC packet waits for a missing earlier sequence number `h`. Had `h` gone on
//! the LLC it would have arrived before the held packet, so it went on the HBC;
//! once the HBC delivers any later packet of the flow, `h` is lost and nothing
//! need wait for it. So an HBC arrival releases the held packets below it at
//! once (`fifo_releases`) instead of after the timeout. That makes a longer
//! timeout safe: on a bulk transfer whose HBC queue holds more than 100 ms the
//! paper's timeout releases LLC packets ahead of their predecessors, and TCP
//! takes the reordering for loss (docs/results.md, fig6_acks).
//!
//! With `adaptive` (off by default) the timeout follows the HBC's queue. A
//! packet whose sequence number a timeout gave up on and that arrives after all
//! was merely late, not lost: the timeout was too short for the current HBC
//! delay, so it doubles (up to `max_timeout`). After `ADAPT_DECAY` without such
//! a late arrival it halves again, down to `timeout`. Late arrivals are counted
//! either way (`late_after_timeout`): each is a packet that TCP saw out of order.
//!
//! Memory is bounded per flow, per device and in total, and counted as the
//! buffers actually held (their capacity, [`Footprint`], not the inner
//! packet's length) plus [`GAP_BYTES`] per remembered gap. When a bound would
//! be exceeded, held packets are released early, in order: the flow's own at
//! its own or its device's bound; at the gateway-wide bound the device taking
//! the most memory releases first, so one device cannot push out another's
//! packets while it holds more itself. Flows are bounded per device and in
//! total the same way: idle flows go first, then the device's least recently
//! seen flow (its own limit) or that of the device with the most flows (the
//! gateway-wide limit). Every step is O(1) or O(log devices), never a scan
//! of the flows ([`flows`](self::flows) module), so a device cycling flow ids
//! costs the other devices' packets nothing extra (docs/reliability.md,
//! "Isolation between devices").
//!
//! Generic over the key `K` (which device + flow id, [`DeviceKey`]) and the
//! payload `P` (the driver's buffer type), so it moves packets without copying.

mod flows;

pub use flows::DeviceReorderStats;

use crate::{Channel, Nanos, MS};
use flows::Flows;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::Hash;

/// Sequence numbers are widened to u64 relative to the expected one; a new
/// flow starts expecting seq 0 at this offset so that "older" stays positive.
const BASE: u64 = 1 << 32;
/// A jump further than this is taken as a restarted flow (sender state lost).
const RESYNC: u64 = 1 << 20;
/// With `adaptive`: how long without a late arrival before the timeout halves.
pub const ADAPT_DECAY: Nanos = 10_000 * MS;
/// Delivered-but-not-yet-contiguous sequence numbers remembered per flow.
const MAX_AHEAD: usize = 8192;
/// Bytes one remembered gap (a `BTreeSet<u64>` entry) is accounted at: a
/// B-tree leaf holds up to 11 keys in about 104 bytes and is at least half
/// full (5 keys: 21 bytes a key), plus the internal nodes above it.
pub const GAP_BYTES: usize = 32;
/// Deadline entries kept beyond twice the packets held before the queue is
/// compacted (entries of packets released early stay until their deadline).
const DEADLINE_SLACK: usize = 1024;

/// The memory a held packet takes: for a buffer, its capacity (what the
/// allocator gave it), not the length of the packet in it.
pub trait Footprint {
    /// Bytes this packet's buffer occupies.
    fn footprint(&self) -> usize;
}

impl Footprint for Vec<u8> {
    fn footprint(&self) -> usize {
        self.capacity()
    }
}

/// A reorder-buffer key: a flow of one device (peer).
pub trait DeviceKey: Hash + Eq + Copy {
    /// The device (peer index) the flow belongs to.
    fn device(&self) -> usize;
}

/// (peer index, flow id), as the receive half keys its flows.
impl DeviceKey for (usize, u16) {
    fn device(&self) -> usize {
        self.0
    }
}

/// Timeout and memory bounds of the reorder buffer.
#[derive(Clone, Debug)]
pub struct ReorderConfig {
    /// Longest an LLC packet is held (`--reorder-timeout-ms`); with `adaptive`
    /// the starting and smallest timeout.
    pub timeout: Nanos,
    /// Double the timeout on each late arrival after a timeout (module docs;
    /// `--reorder-adaptive`).
    pub adaptive: bool,
    /// With `adaptive`: the largest timeout (`--reorder-max-timeout-ms`).
    pub max_timeout: Nanos,
    /// Bytes held per flow at most (`--reorder-flow-bytes`).
    pub max_flow_bytes: usize,
    /// Bytes (held buffers and gaps) per device at most (`--reorder-device-bytes`).
    pub max_device_bytes: usize,
    /// Bytes (held buffers and gaps) in total at most (`--reorder-total-bytes`).
    pub max_total_bytes: usize,
    /// Flows tracked per device at most (`--reorder-device-flows`).
    pub max_device_flows: usize,
    /// Flows tracked in total at most (`--reorder-flows`).
    pub max_flows: usize,
    /// A flow with no packet for this long is forgotten (at least `max_timeout`).
    pub flow_idle: Nanos,
    /// Channels are FIFO: an HBC arrival gives up on the missing sequence
    /// numbers below it (module docs; `--reorder-fifo`).
    pub fifo_loss: bool,
}

impl ReorderConfig {
    /// The bounds of one of `workers` receive workers' buffers (a gateway
    /// with `--threads`; each worker has its own buffer over its own
    /// devices): the gateway-wide caps `max_total_bytes` and `max_flows` are
    /// split evenly (rounded up), so the workers together stay within them
    /// (docs/reliability.md); the per-flow and per-device caps are unchanged,
    /// a device's flows all being in one worker.
    pub fn per_worker(&self, workers: usize) -> ReorderConfig {
        let workers = workers.max(1);
        ReorderConfig {
            max_total_bytes: self.max_total_bytes.div_ceil(workers),
            max_flows: self.max_flows.div_ceil(workers),
            ..self.clone()
        }
    }
}

impl Default for ReorderConfig {
    fn default() -> Self {
        ReorderConfig {
            timeout: 100 * MS,
            adaptive: false,
            max_timeout: 2_000 * MS,
            // ~670 receive buffers of 1,564 bytes (docs/reliability.md)
            max_flow_bytes: 1024 * 1024,
            max_device_bytes: 8 * 1024 * 1024,
            max_total_bytes: 64 * 1024 * 1024,
            max_device_flows: 16384,
            max_flows: 65536,
            // Longer than the sender's flow idle timeout (120 s), so the receiver
            // never forgets a flow the sender still numbers.
            flow_idle: 300_000 * MS,
            fifo_loss: false,
        }
    }
}

/// Counters and occupancy of the buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReorderStats {
    /// Packets that were held and released because their predecessors arrived.
    pub in_order_releases: u64,
    /// Packets released because they had waited `timeout`.
    pub timeout_releases: u64,
    /// Packets released because a later HBC packet of their flow arrived, so
    /// what they waited for was lost (`fifo_loss`).
    pub fifo_releases: u64,
    /// Packets that arrived after a timeout had given up on them (late, not
    /// lost): the timeout was shorter than the HBC's delay at that moment.
    pub late_after_timeout: u64,
    /// The timeout in force now, in ms (changes only with `adaptive`).
    pub timeout_ms: f64,
    /// Packets released early because a memory or flow bound was reached.
    pub overflow_releases: u64,
    /// Packets delivered without being held.
    pub passed_through: u64,
    /// Packets held at some point.
    pub held: u64,
    /// Most bytes (held buffers) held at any time.
    pub max_occupancy_bytes: usize,
    /// Time-weighted mean of the bytes held, since the first packet.
    pub mean_occupancy_bytes: f64,
}

impl ReorderStats {
    /// The counters of two reorder buffers (a gateway's receive workers, each
    /// with its own flows) as one: counts and occupancies add up (the
    /// maximum is then a bound: the buffers need not peak together), the
    /// timeout is the larger.
    pub fn merge(&self, o: &ReorderStats) -> ReorderStats {
        ReorderStats {
            in_order_releases: self.in_order_releases + o.in_order_releases,
            timeout_releases: self.timeout_releases + o.timeout_releases,
            fifo_releases: self.fifo_releases + o.fifo_releases,
            late_after_timeout: self.late_after_timeout + o.late_after_timeout,
            timeout_ms: self.timeout_ms.max(o.timeout_ms),
            overflow_releases: self.overflow_releases + o.overflow_releases,
            passed_through: self.passed_through + o.passed_through,
            held: self.held + o.held,
            max_occupancy_bytes: self.max_occupancy_bytes + o.max_occupancy_bytes,
            mean_occupancy_bytes: self.mean_occupancy_bytes + o.mean_occupancy_bytes,
        }
    }
}

struct Held<P> {
    /// Bytes the packet's buffer occupies ([`Footprint`]).
    cost: usize,
    /// When its timeout releases it.
    deadline: Nanos,
    pkt: P,
}

struct FlowRx<P> {
    /// Smallest (widened) sequence number not yet delivered; everything below
    /// it has been delivered or given up on.
    next: u64,
    ahead: BTreeSet<u64>,
    held: BTreeMap<u64, Held<P>>,
    held_bytes: usize,
    last_seen: Nanos,
    /// The sequence numbers `[lo, hi)` the flow's last timeout gave up on.
    given_up: Option<(u64, u64)>,
    /// `held_bytes` and the number of held packets as the buffer's totals
    /// last counted them (`ReorderBuffer::settle`).
    accounted: (usize, usize),
}

impl<P> Default for FlowRx<P> {
    fn default() -> Self {
        FlowRx::new(0)
    }
}

impl<P> FlowRx<P> {
    fn new(now: Nanos) -> Self {
        FlowRx {
            next: BASE,
            ahead: BTreeSet::new(),
            held: BTreeMap::new(),
            held_bytes: 0,
            last_seen: now,
            given_up: None,
            accounted: (0, 0),
        }
    }

    /// The memory this flow takes: held buffers and remembered gaps.
    fn memory(&self) -> usize {
        self.held_bytes + self.ahead.len() * GAP_BYTES
    }

    fn widen(&self, seq: u32) -> u64 {
        let diff = seq.wrapping_sub(self.next as u32) as i32 as i64;
        (self.next as i64 + diff).max(0) as u64
    }

    fn mark_delivered(&mut self, s: u64) {
        if s == self.next {
            self.next += 1;
            self.advance_over_ahead();
        } else if s > self.next {
            self.ahead.insert(s);
            if self.ahead.len() > MAX_AHEAD {
                // Too many gaps: give up on the oldest gap.
                let first = *self.ahead.iter().next().expect("non-empty");
                self.next = first;
                self.advance_over_ahead();
            }
        }
    }

    /// Moves `next` past the delivered sequence numbers that follow it.
    fn advance_over_ahead(&mut self) {
        while self.ahead.remove(&self.next) {
            self.next += 1;
        }
    }

    /// Forgets the delivered sequence numbers that `next` has passed.
    fn forget_ahead_below_next(&mut self) {
        while self.ahead.first().is_some_and(|&a| a < self.next) {
            self.ahead.pop_first();
        }
    }

    /// Hands the held packet `h` to `out`, taking its bytes off this flow,
    /// and counts it in `counter`.
    fn release(&mut self, h: Held<P>, counter: &mut u64, out: &mut Vec<P>) {
        self.held_bytes -= h.cost;
        *counter += 1;
        out.push(h.pkt);
    }

    /// Releases `flow`'s held packets that are next in order (in-order releases).
    fn release_ready(&mut self, stats: &mut ReorderStats, out: &mut Vec<P>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (s, h) = entry.remove_entry();
            self.release(h, &mut stats.in_order_releases, out);
            self.mark_delivered(s);
        }
    }

    /// The HBC delivered `s`: every sequence number below it still missing was
    /// lost (module docs), so the held packets below `s` go now, in order.
    fn give_up_below(&mut self, s: u64, stats: &mut ReorderStats, out: &mut Vec<P>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() >= s {
                break;
            }
            let (hs, h) = entry.remove_entry();
            self.release(h, &mut stats.fifo_releases, out);
            self.next = self.next.max(hs + 1);
        }
        self.next = self.next.max(s);
        self.forget_ahead_below_next();
        self.advance_over_ahead();
    }

    /// Releases all held packets in order (overflow releases).
    fn flush(&mut self, stats: &mut ReorderStats, out: &mut Vec<P>) {
        while let Some((s, h)) = self.held.pop_first() {
            self.release(h, &mut stats.overflow_releases, out);
            self.next = self.next.max(s + 1);
        }
        self.forget_ahead_below_next();
    }

    /// Releases all held packets in order and gives up on every gap: the flow
    /// then takes no memory (a memory bound was reached).
    fn give_up_all(&mut self, stats: &mut ReorderStats, out: &mut Vec<P>) {
        self.flush(stats, out);
        if let Some(&last) = self.ahead.last() {
            self.next = self.next.max(last + 1);
            self.ahead.clear();
        }
    }
}

/// The reorder buffer (see the module docs).
pub struct ReorderBuffer<K, P> {
    cfg: ReorderConfig,
    flows: Flows<K, FlowRx<P>>,
    /// (deadline, flow, seq) in arrival order; deadlines are monotonic (a
    /// shorter adaptive timeout never schedules before the last deadline).
    deadlines: VecDeque<(Nanos, K, u64)>,
    /// Packets held now.
    held_packets: usize,
    /// Bytes of held buffers now (without gaps).
    held_bytes: usize,
    /// The timeout in force (`cfg.timeout` unless `cfg.adaptive` raised it).
    timeout: Nanos,
    /// When the timeout last changed or a late arrival last raised it.
    last_adapt: Nanos,
    first: Option<Nanos>,
    last_change: Nanos,
    integral: f64,
    stats: ReorderStats,
}

impl<K: DeviceKey, P> ReorderBuffer<K, P> {
    /// An empty buffer.
    pub fn new(mut cfg: ReorderConfig) -> Self {
        // A flow is never forgotten while its packets may still be held.
        cfg.flow_idle = cfg.flow_idle.max(cfg.max_timeout.max(cfg.timeout));
        cfg.max_flows = cfg.max_flows.max(1);
        cfg.max_device_flows = cfg.max_device_flows.max(1);
        ReorderBuffer {
            timeout: cfg.timeout,
            last_adapt: 0,
            cfg,
            flows: Flows::new(),
            deadlines: VecDeque::new(),
            held_packets: 0,
            held_bytes: 0,
            first: None,
            last_change: 0,
            integral: 0.0,
            stats: ReorderStats::default(),
        }
    }

    /// Upper bounds of the heap bytes the buffer takes for one device and
    /// for all devices (docs/reliability.md), when every held buffer takes at
    /// least `min_footprint` bytes: the memory bound (held buffers and gaps),
    /// plus per held packet its entry in its flow's B-tree (at least half
    /// full: twice the entry) and two deadline entries (the queue is
    /// compacted beyond twice the held packets), plus per flow its node and
    /// index share; all devices add the deadline queue's slack.
    pub fn bytes_bound(cfg: &ReorderConfig, min_footprint: usize) -> (usize, usize) {
        let flow = Flows::<K, FlowRx<P>>::bytes_per_flow();
        let deadline = std::mem::size_of::<(Nanos, K, u64)>();
        let packet = 2 * std::mem::size_of::<(u64, Held<P>)>() + 2 * deadline;
        let bound = |memory: usize, flows: usize| {
            memory + memory / min_footprint.max(1) * packet + flows * flow
        };
        (
            bound(cfg.max_device_bytes, cfg.max_device_flows),
            bound(cfg.max_total_bytes, cfg.max_flows) + DEADLINE_SLACK * deadline,
        )
    }

    /// Bytes of held buffers right now.
    pub fn occupancy(&self) -> usize {
        self.held_bytes
    }

    /// Bytes accounted right now: held buffers and remembered gaps (what the
    /// memory bounds limit).
    pub fn memory(&self) -> usize {
        self.flows.memory()
    }

    /// Flows tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Flows, memory, limit hits and evictions of `device`.
    pub fn device_stats(&self, device: usize) -> DeviceReorderStats {
        self.flows.device(device)
    }

    fn account(&mut self, now: Nanos) {
        if self.first.is_none() {
            self.first = Some(now);
            self.last_change = now;
        } else if now > self.last_change {
            self.integral += self.held_bytes as f64 * (now - self.last_change) as f64;
            self.last_change = now;
        }
    }

    /// Counters, with the mean occupancy integrated up to `now`.
    pub fn stats(&mut self, now: Nanos) -> ReorderStats {
        self.account(now);
        let mut s = self.stats;
        s.timeout_ms = self.timeout as f64 / MS as f64;
        let span = now.saturating_sub(self.first.unwrap_or(now));
        s.mean_occupancy_bytes = if span > 0 {
            self.integral / span as f64
        } else {
            0.0
        };
        s
    }

    /// A data packet of flow `key` with sequence `seq` arrived on `ch`, in a
    /// buffer that occupies `cost` bytes ([`Footprint`]). Deliverable packets
    /// (this one and any it unblocks) go to `out` in order.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        now: Nanos,
        key: K,
        seq: u32,
        ch: Channel,
        cost: usize,
        pkt: P,
        out: &mut Vec<P>,
    ) {
        self.account(now);
        let device = key.device();
        let slot = match self.flows.lookup(&key) {
            (_, Some(slot)) => {
                self.flows.touch(slot);
                slot
            }
            (hash, None) => {
                self.make_room_for_flow(now, device, out);
                self.flows.insert(key, hash, device, FlowRx::new(now))
            }
        };
        let device_memory = self.flows.device(device).memory_bytes;
        let total_memory = self.flows.memory();
        let flow = self.flows.get_mut(slot);
        flow.last_seen = now;
        let s = flow.widen(seq);
        if s > flow.next + RESYNC {
            // The sender restarted this flow id: start over at this packet.
            flow.flush(&mut self.stats, out);
            flow.ahead.clear();
            flow.next = s;
        }
        if let Some((lo, hi)) = flow.given_up {
            if (lo..hi).contains(&s) && !flow.held.contains_key(&s) {
                // A timeout gave up on this packet, and here it is: late, not lost.
                flow.given_up = Some((s + 1, hi));
                self.stats.late_after_timeout += 1;
                if self.cfg.adaptive {
                    self.timeout = (self.timeout * 2).min(self.cfg.max_timeout);
                    self.last_adapt = now;
                }
            }
        }
        if self.cfg.adaptive
            && self.timeout > self.cfg.timeout
            && now.saturating_sub(self.last_adapt) >= ADAPT_DECAY
        {
            self.timeout = (self.timeout / 2).max(self.cfg.timeout);
            self.last_adapt = now;
        }
        if ch == Channel::Hbc && self.cfg.fifo_loss && s > flow.next {
            flow.give_up_below(s, &mut self.stats, out);
        }
        if ch == Channel::Hbc || s <= flow.next || flow.held.contains_key(&s) {
            // HBC packets, LLC packets whose predecessors are all delivered,
            // stale duplicates: deliver now.
            self.stats.passed_through += 1;
            out.push(pkt);
            flow.mark_delivered(s);
            flow.release_ready(&mut self.stats, out);
            self.settle(slot, out);
            return;
        }
        let over_device = device_memory + cost > self.cfg.max_device_bytes;
        let over_total = total_memory + cost > self.cfg.max_total_bytes;
        if over_total && !over_device && flow.held_bytes + cost <= self.cfg.max_flow_bytes {
            // Make room at the device taking the most memory, if that is not this one.
            self.relieve(device, cost, out);
        }
        let over_total = self.flows.memory() + cost > self.cfg.max_total_bytes;
        let flow = self.flows.get_mut(slot);
        let over_flow = flow.held_bytes + cost > self.cfg.max_flow_bytes;
        if over_flow || over_device || over_total {
            // Memory bound: release this flow's held packets and this one, in order.
            flow.flush(&mut self.stats, out);
            self.stats.overflow_releases += 1;
            out.push(pkt);
            flow.next = flow.next.max(s + 1);
            flow.mark_delivered(s);
            flow.release_ready(&mut self.stats, out);
            let d = self.flows.device_mut(device);
            if over_device {
                d.device_memory_limit_hits += 1;
            } else if over_total && !over_flow {
                d.gateway_memory_limit_hits += 1;
            }
            self.settle(slot, out);
            return;
        }
        let deadline = self
            .deadlines
            .back()
            .map_or(0, |&(d, _, _)| d)
            .max(now + self.timeout);
        flow.held.insert(
            s,
            Held {
                cost,
                deadline,
                pkt,
            },
        );
        flow.held_bytes += cost;
        self.stats.held += 1;
        self.deadlines.push_back((deadline, key, s));
        self.settle(slot, out);
        if self.deadlines.len() > 2 * self.held_packets + DEADLINE_SLACK {
            self.compact_deadlines();
        }
    }

    /// Earliest time [`handle_timeout`](Self::handle_timeout) may release something.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.deadlines.front().map(|&(d, _, _)| d)
    }

    /// Releases packets whose timeout has passed (and what they unblock).
    pub fn handle_timeout(&mut self, now: Nanos, out: &mut Vec<P>) {
        self.account(now);
        while let Some(&(deadline, key, s)) = self.deadlines.front() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_front();
            let Some(slot) = self.flows.lookup(&key).1 else {
                continue;
            };
            let flow = self.flows.get_mut(slot);
            if !flow.held.get(&s).is_some_and(|h| h.deadline == deadline) {
                continue; // already released (and perhaps held again since)
            }
            // Give up on the missing predecessors: release everything up to s.
            flow.given_up = Some((flow.next, s));
            while let Some(entry) = flow.held.first_entry() {
                if *entry.key() > s {
                    break;
                }
                let (hs, h) = entry.remove_entry();
                flow.release(h, &mut self.stats.timeout_releases, out);
                flow.next = flow.next.max(hs + 1);
                flow.forget_ahead_below_next();
                flow.advance_over_ahead();
            }
            flow.release_ready(&mut self.stats, out);
            self.settle(slot, out);
        }
    }

    /// Forgets flows idle past `flow_idle` (least recently seen first; the
    /// packets a forgotten flow still held, if any, go to `out`).
    pub fn expire(&mut self, now: Nanos, out: &mut Vec<P>) {
        while let Some(slot) = self.flows.oldest() {
            if now.saturating_sub(self.flows.get(slot).last_seen) <= self.cfg.flow_idle {
                break; // the list is in last-seen order: the rest are fresher
            }
            self.evict(slot, out);
        }
    }

    /// Forgets every flow of `device` and its counters (a peer removed from
    /// the table, whose slot a later peer may take: that one starts at zero).
    /// What its flows still held goes to `out`, as when a flow expires: those
    /// packets were authenticated before the removal. O(flows of `device`).
    pub fn forget_device(&mut self, device: usize, out: &mut Vec<P>) {
        while let Some(slot) = self.flows.oldest_of(device) {
            self.evict(slot, out);
        }
        self.flows.reset_device(device);
    }

    /// Makes room for a new flow of `device`: idle flows go first, then the
    /// device's own least recently seen flow at its limit, or at the gateway's
    /// limit that of the device with the most flows (this one on a tie).
    fn make_room_for_flow(&mut self, now: Nanos, device: usize, out: &mut Vec<P>) {
        let own = self.flows.device(device).flows;
        if own < self.cfg.max_device_flows && self.flows.len() < self.cfg.max_flows {
            return;
        }
        self.expire(now, out);
        let own = self.flows.device(device).flows;
        let victim = if own >= self.cfg.max_device_flows {
            self.flows.device_mut(device).device_flow_limit_evictions += 1;
            device
        } else if self.flows.len() >= self.cfg.max_flows {
            let (most, n) = self.flows.most_flows().expect("flows exist");
            let victim = if own >= n { device } else { most };
            self.flows.device_mut(victim).gateway_flow_limit_evictions += 1;
            victim
        } else {
            return;
        };
        if let Some(slot) = self.flows.oldest_of(victim) {
            self.evict(slot, out);
        }
    }

    /// Frees at least `need` bytes under the gateway-wide bound by releasing
    /// the held packets and gaps of the device taking the most memory, as
    /// long as that is not `device` (which then overflows its own flow).
    fn relieve(&mut self, device: usize, need: usize, out: &mut Vec<P>) {
        while self.flows.memory() + need > self.cfg.max_total_bytes {
            let Some((victim, _)) = self.flows.most_memory() else {
                return;
            };
            if victim == device
                || self.flows.device(device).memory_bytes >= self.flows.device(victim).memory_bytes
            {
                return;
            }
            let slot = self.flows.first_holding_of(victim).expect("holding");
            self.flows.device_mut(victim).gateway_memory_limit_hits += 1;
            self.give_up(slot, out);
        }
    }

    /// Releases the flow in `slot`'s held packets and gives up its gaps.
    fn give_up(&mut self, slot: u32, out: &mut Vec<P>) {
        let flow = self.flows.get_mut(slot);
        flow.give_up_all(&mut self.stats, out);
        self.settle(slot, out);
    }

    /// Forgets the flow in `slot`, releasing what it held.
    fn evict(&mut self, slot: u32, out: &mut Vec<P>) {
        let mut flow = self.flows.remove(slot);
        self.held_bytes -= flow.accounted.0;
        self.held_packets -= flow.accounted.1;
        flow.flush(&mut self.stats, out);
    }

    /// Brings the accounting up to date after the flow in `slot` changed, and
    /// enforces the memory bounds its gaps may have crossed.
    fn settle(&mut self, slot: u32, out: &mut Vec<P>) {
        let flow = self.flows.get_mut(slot);
        let now_held = (flow.held_bytes, flow.held.len());
        let (old_bytes, old_packets) = std::mem::replace(&mut flow.accounted, now_held);
        let memory = flow.memory();
        self.held_bytes = self.held_bytes + now_held.0 - old_bytes;
        self.held_packets = self.held_packets + now_held.1 - old_packets;
        self.stats.max_occupancy_bytes = self.stats.max_occupancy_bytes.max(self.held_bytes);
        let old = self.flows.memory_of(slot);
        if memory == old {
            return;
        }
        self.flows.set_memory(slot, memory);
        if memory < old {
            return;
        }
        let device = self.flows.device_of(slot);
        if self.flows.device(device).memory_bytes > self.cfg.max_device_bytes {
            self.flows.device_mut(device).device_memory_limit_hits += 1;
            while self.flows.device(device).memory_bytes > self.cfg.max_device_bytes {
                let s = self.flows.first_holding_of(device).expect("takes memory");
                self.give_up(s, out);
            }
        }
        while self.flows.memory() > self.cfg.max_total_bytes {
            let (victim, _) = self.flows.most_memory().expect("takes memory");
            self.flows.device_mut(victim).gateway_memory_limit_hits += 1;
            let s = self.flows.first_holding_of(victim).expect("takes memory");
            self.give_up(s, out);
        }
    }

    /// Drops the deadline entries of packets no longer held (released early,
    /// or their flow forgotten), so the queue stays within twice the held packets.
    fn compact_deadlines(&mut self) {
        let flows = &self.flows;
        self.deadlines.retain(|&(d, key, s)| {
            flows.lookup(&key).1.is_some_and(|slot| {
                flows
                    .get(slot)
                    .held
                    .get(&s)
                    .is_some_and(|h| h.deadline == d)
            })
        });
    }
}

#[cfg(test)]
mod isolation_tests;
#[cfg(test)]
mod tests;
