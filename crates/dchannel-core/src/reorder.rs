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
//! Memory is bounded per flow and in total; when a bound would be exceeded
//! the flow's held packets are released in order, together with the new one.
//!
//! Generic over the key `K` (which peer + flow id) and the payload `P` (the
//! driver's buffer type), so it moves packets without copying.

use crate::{Channel, Nanos, MS};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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
    /// Bytes held in total at most (`--reorder-total-bytes`).
    pub max_total_bytes: usize,
    /// Flows tracked at most (the least recently seen goes first).
    pub max_flows: usize,
    /// A flow with nothing held and no packet for this long is forgotten.
    pub flow_idle: Nanos,
    /// Channels are FIFO: an HBC arrival gives up on the missing sequence
    /// numbers below it (module docs; `--reorder-fifo`).
    pub fifo_loss: bool,
}

impl Default for ReorderConfig {
    fn default() -> Self {
        ReorderConfig {
            timeout: 100 * MS,
            adaptive: false,
            max_timeout: 2_000 * MS,
            max_flow_bytes: 256 * 1024,
            max_total_bytes: 4 * 1024 * 1024,
            max_flows: 16384,
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
    /// Packets released early because a memory bound was reached.
    pub overflow_releases: u64,
    /// Packets delivered without being held.
    pub passed_through: u64,
    /// Packets held at some point.
    pub held: u64,
    /// Most bytes held at any time.
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
    len: usize,
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
        }
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

    /// Hands the held packet `h` to `out`, taking its bytes off this flow's
    /// and the buffer's `total`, and counts it in `counter`.
    fn release(&mut self, h: Held<P>, total: &mut usize, counter: &mut u64, out: &mut Vec<P>) {
        self.held_bytes -= h.len;
        *total -= h.len;
        *counter += 1;
        out.push(h.pkt);
    }
}

/// The reorder buffer (see the module docs).
pub struct ReorderBuffer<K, P> {
    cfg: ReorderConfig,
    flows: HashMap<K, FlowRx<P>>,
    /// (deadline, flow, seq) in arrival order; deadlines are monotonic (a
    /// shorter adaptive timeout never schedules before the last deadline).
    deadlines: VecDeque<(Nanos, K, u64)>,
    /// The timeout in force (`cfg.timeout` unless `cfg.adaptive` raised it).
    timeout: Nanos,
    /// When the timeout last changed or a late arrival last raised it.
    last_adapt: Nanos,
    total_bytes: usize,
    first: Option<Nanos>,
    last_change: Nanos,
    integral: f64,
    stats: ReorderStats,
}

impl<K: Hash + Eq + Copy, P> ReorderBuffer<K, P> {
    /// An empty buffer.
    pub fn new(cfg: ReorderConfig) -> Self {
        ReorderBuffer {
            timeout: cfg.timeout,
            last_adapt: 0,
            cfg,
            flows: HashMap::new(),
            deadlines: VecDeque::new(),
            total_bytes: 0,
            first: None,
            last_change: 0,
            integral: 0.0,
            stats: ReorderStats::default(),
        }
    }

    /// Bytes held right now.
    pub fn occupancy(&self) -> usize {
        self.total_bytes
    }

    /// Flows tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    fn account(&mut self, now: Nanos) {
        if self.first.is_none() {
            self.first = Some(now);
            self.last_change = now;
        } else if now > self.last_change {
            self.integral += self.total_bytes as f64 * (now - self.last_change) as f64;
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

    /// A data packet of flow `key` with sequence `seq` arrived on `ch`.
    /// Deliverable packets (this one and any it unblocks) go to `out` in order.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        now: Nanos,
        key: K,
        seq: u32,
        ch: Channel,
        len: usize,
        pkt: P,
        out: &mut Vec<P>,
    ) {
        self.account(now);
        if !self.flows.contains_key(&key) && self.flows.len() >= self.cfg.max_flows {
            self.expire(now);
            if self.flows.len() >= self.cfg.max_flows {
                self.evict_one(out);
            }
        }
        let flow = self.flows.entry(key).or_insert_with(|| FlowRx::new(now));
        flow.last_seen = now;
        let s = flow.widen(seq);
        if s > flow.next + RESYNC {
            // The sender restarted this flow id: start over at this packet.
            Self::flush_flow(flow, &mut self.total_bytes, &mut self.stats, out);
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
            Self::give_up_below(flow, s, &mut self.total_bytes, &mut self.stats, out);
        }
        if ch == Channel::Hbc || s <= flow.next || flow.held.contains_key(&s) {
            // HBC packets, LLC packets whose predecessors are all delivered,
            // stale duplicates: deliver now.
            self.stats.passed_through += 1;
            out.push(pkt);
            flow.mark_delivered(s);
            Self::release_ready(flow, &mut self.total_bytes, &mut self.stats, out);
            return;
        }
        if flow.held_bytes + len > self.cfg.max_flow_bytes
            || self.total_bytes + len > self.cfg.max_total_bytes
        {
            // Memory bound: release this flow's held packets and this one, in order.
            Self::flush_flow(flow, &mut self.total_bytes, &mut self.stats, out);
            self.stats.overflow_releases += 1;
            out.push(pkt);
            flow.next = flow.next.max(s + 1);
            flow.mark_delivered(s);
            Self::release_ready(flow, &mut self.total_bytes, &mut self.stats, out);
            return;
        }
        flow.held.insert(s, Held { len, pkt });
        flow.held_bytes += len;
        self.total_bytes += len;
        self.stats.held += 1;
        self.stats.max_occupancy_bytes = self.stats.max_occupancy_bytes.max(self.total_bytes);
        let last = self.deadlines.back().map_or(0, |&(d, _, _)| d);
        self.deadlines
            .push_back(((now + self.timeout).max(last), key, s));
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
            let Some(flow) = self.flows.get_mut(&key) else {
                continue;
            };
            if !flow.held.contains_key(&s) {
                continue; // already released
            }
            // Give up on the missing predecessors: release everything up to s.
            flow.given_up = Some((flow.next, s));
            while let Some(entry) = flow.held.first_entry() {
                if *entry.key() > s {
                    break;
                }
                let (hs, h) = entry.remove_entry();
                let counter = &mut self.stats.timeout_releases;
                flow.release(h, &mut self.total_bytes, counter, out);
                flow.next = flow.next.max(hs + 1);
                flow.forget_ahead_below_next();
                flow.advance_over_ahead();
            }
            Self::release_ready(flow, &mut self.total_bytes, &mut self.stats, out);
        }
    }

    /// Forgets flows with nothing held and idle past `flow_idle`.
    pub fn expire(&mut self, now: Nanos) {
        let idle = self.cfg.flow_idle;
        self.flows
            .retain(|_, f| !f.held.is_empty() || now.saturating_sub(f.last_seen) <= idle);
    }

    fn evict_one(&mut self, out: &mut Vec<P>) {
        let victim = self
            .flows
            .iter()
            .min_by_key(|(_, f)| f.last_seen)
            .map(|(k, _)| *k);
        if let Some(k) = victim {
            if let Some(mut f) = self.flows.remove(&k) {
                Self::flush_flow(&mut f, &mut self.total_bytes, &mut self.stats, out);
            }
        }
    }

    /// Releases `flow`'s held packets that are next in order (in-order releases).
    fn release_ready(
        flow: &mut FlowRx<P>,
        total: &mut usize,
        stats: &mut ReorderStats,
        out: &mut Vec<P>,
    ) {
        while let Some(entry) = flow.held.first_entry() {
            if *entry.key() > flow.next {
                break;
            }
            let (s, h) = entry.remove_entry();
            flow.release(h, total, &mut stats.in_order_releases, out);
            flow.mark_delivered(s);
        }
    }

    /// The HBC delivered `s`: every sequence number below it still missing was
    /// lost (module docs), so the held packets below `s` go now, in order.
    fn give_up_below(
        flow: &mut FlowRx<P>,
        s: u64,
        total: &mut usize,
        stats: &mut ReorderStats,
        out: &mut Vec<P>,
    ) {
        while let Some(entry) = flow.held.first_entry() {
            if *entry.key() >= s {
                break;
            }
            let (hs, h) = entry.remove_entry();
            flow.release(h, total, &mut stats.fifo_releases, out);
            flow.next = flow.next.max(hs + 1);
        }
        flow.next = flow.next.max(s);
        flow.forget_ahead_below_next();
        flow.advance_over_ahead();
    }

    /// Releases all of `flow`'s held packets in order (overflow releases).
    fn flush_flow(
        flow: &mut FlowRx<P>,
        total: &mut usize,
        stats: &mut ReorderStats,
        out: &mut Vec<P>,
    ) {
        while let Some((s, h)) = flow.held.pop_first() {
            flow.release(h, total, &mut stats.overflow_releases, out);
            flow.next = flow.next.max(s + 1);
        }
        flow.forget_ahead_below_next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Channel::{Hbc, Llc};

    type Rb = ReorderBuffer<u16, u32>;

    /// A buffer with `cfg` and the list it delivers into.
    fn rb_with(cfg: ReorderConfig) -> (Rb, Vec<u32>) {
        (ReorderBuffer::new(cfg), Vec::new())
    }

    fn rb() -> (Rb, Vec<u32>) {
        rb_with(ReorderConfig::default())
    }

    #[test]
    fn llc_packet_waits_for_earlier_hbc_packets() {
        // Sender: seq 0,1 on HBC (40 ms), seq 2 (an ACK) on LLC (5 ms): the LLC
        // packet arrives first and must wait (NSDI'23 §4.3).
        let (mut b, mut out) = rb();
        b.push(5 * MS, 1, 2, Llc, 100, 2, &mut out);
        assert!(out.is_empty());
        assert_eq!(b.occupancy(), 100);
        b.push(40 * MS, 1, 0, Hbc, 1400, 0, &mut out);
        assert_eq!(out, vec![0]);
        b.push(41 * MS, 1, 1, Hbc, 1400, 1, &mut out);
        assert_eq!(out, vec![0, 1, 2]);
        assert_eq!(b.occupancy(), 0);
        let s = b.stats(41 * MS);
        assert_eq!(s.in_order_releases, 1);
        assert_eq!(s.timeout_releases, 0);
        // 100 bytes held from 5 ms to 41 ms over a span of 36 ms: mean 100 B.
        assert!((s.mean_occupancy_bytes - 100.0).abs() < 1e-9);
        assert_eq!(s.max_occupancy_bytes, 100);
    }

    #[test]
    fn in_order_llc_packets_pass_straight_through() {
        let (mut b, mut out) = rb();
        for s in 0..5u32 {
            b.push(u64::from(s) * MS, 9, s, Llc, 60, s, &mut out);
        }
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
        assert_eq!(b.stats(5 * MS).held, 0);
    }

    #[test]
    fn timeout_releases_after_100ms() {
        // seq 0 on the HBC is lost; seq 1, 2 on the LLC arrive at 5 and 6 ms.
        let (mut b, mut out) = rb();
        b.push(5 * MS, 1, 1, Llc, 60, 1, &mut out);
        b.push(6 * MS, 1, 2, Llc, 60, 2, &mut out);
        assert_eq!(b.poll_timeout(), Some(105 * MS));
        b.handle_timeout(104 * MS, &mut out);
        assert!(out.is_empty());
        b.handle_timeout(105 * MS, &mut out);
        assert_eq!(out, vec![1, 2], "seq 2 follows seq 1 once 0 is given up on");
        let s = b.stats(105 * MS);
        assert_eq!((s.timeout_releases, s.in_order_releases), (1, 1));
        // late seq 0 is delivered immediately (the stack drops the duplicate)
        b.push(200 * MS, 1, 0, Hbc, 1400, 0, &mut out);
        assert_eq!(out, vec![1, 2, 0]);
        // and the flow continues in order
        b.push(201 * MS, 1, 3, Llc, 60, 3, &mut out);
        assert_eq!(out.last(), Some(&3));
    }

    /// Feeds `flow`'s arrivals `(ms, seq, channel)` in turn, each packet its own
    /// seq as payload (60 bytes on the LLC, 1400 on the HBC).
    fn feed(b: &mut Rb, out: &mut Vec<u32>, flow: u16, arrivals: &[(u64, u32, Channel)]) {
        for &(ms, seq, ch) in arrivals {
            let len = if ch == Llc { 60 } else { 1400 };
            b.push(ms * MS, flow, seq, ch, len, seq, out);
        }
    }

    /// The default buffer with the FIFO loss rule and/or the adaptive timeout.
    fn rb_opts(fifo_loss: bool, adaptive: bool) -> (Rb, Vec<u32>) {
        let cfg = ReorderConfig::default();
        rb_with(ReorderConfig {
            fifo_loss,
            adaptive,
            ..cfg
        })
    }

    fn fifo() -> (Rb, Vec<u32>) {
        rb_opts(true, false)
    }

    #[test]
    fn fifo_loss_releases_at_the_next_hbc_arrival_not_the_timeout() {
        // seq 0 on the HBC is lost; seq 1 (LLC) arrives at 5 ms and is held; seq 2
        // (HBC) at 40 ms proves 0 lost (the HBC would have delivered it first):
        // 1 goes at 40 ms, before 2, not at the 105 ms timeout.
        let (mut b, mut out) = fifo();
        feed(&mut b, &mut out, 1, &[(5, 1, Llc)]);
        assert!(out.is_empty());
        feed(&mut b, &mut out, 1, &[(40, 2, Hbc)]);
        assert_eq!(out, vec![1, 2]);
        assert_eq!(b.occupancy(), 0);
        b.handle_timeout(105 * MS, &mut out);
        assert_eq!(out, vec![1, 2], "nothing left for the timeout");
        let s = b.stats(105 * MS);
        assert_eq!((s.fifo_releases, s.timeout_releases), (1, 0));
        // The same arrivals without the rule: 1 waits for the timeout.
        let (mut b, mut out) = rb();
        feed(&mut b, &mut out, 1, &[(5, 1, Llc), (40, 2, Hbc)]);
        assert_eq!(out, vec![2]);
        b.handle_timeout(105 * MS, &mut out);
        assert_eq!(out, vec![2, 1]);
    }

    #[test]
    fn fifo_loss_still_waits_for_holes_above_the_hbc_arrival() {
        // Sent: 0 HBC, 1 HBC (lost), 2 HBC, 3 LLC, 4 HBC. 3 arrives first (held);
        // 0 arrives: in order, 3 still waits for 1 and 2; 2 arrives: 1 is lost
        // (FIFO), so 2 is delivered and 3 follows at once, in order.
        let (mut b, mut out) = fifo();
        feed(&mut b, &mut out, 7, &[(5, 3, Llc), (30, 0, Hbc)]);
        assert_eq!(out, vec![0]);
        assert_eq!(b.occupancy(), 60, "3 still waits for 1 and 2");
        feed(&mut b, &mut out, 7, &[(32, 2, Hbc)]);
        assert_eq!(out, vec![0, 2, 3]);
        feed(&mut b, &mut out, 7, &[(33, 4, Hbc)]);
        assert_eq!(out, vec![0, 2, 3, 4]);
        let s = b.stats(33 * MS);
        assert_eq!(
            (s.fifo_releases, s.in_order_releases, s.timeout_releases),
            (0, 1, 0)
        );
    }

    #[test]
    fn fifo_loss_releases_several_held_below_in_order() {
        // 0 and 2 lost on the HBC; 1 and 3 on the LLC held; HBC 4 frees both.
        let (mut b, mut out) = fifo();
        let arrivals = [(5, 1, Llc), (6, 3, Llc), (40, 4, Hbc)];
        feed(&mut b, &mut out, 2, &arrivals);
        assert_eq!(out, vec![1, 3, 4]);
        assert_eq!(b.stats(40 * MS).fifo_releases, 2);
        // a late LLC packet below is delivered as before (the stack drops duplicates)
        feed(&mut b, &mut out, 2, &[(41, 0, Llc)]);
        assert_eq!(out, vec![1, 3, 4, 0]);
    }

    fn adaptive() -> (Rb, Vec<u32>) {
        rb_opts(false, true)
    }

    /// `flow`'s seq 1 arrives on the LLC at `t` ms and waits for seq 0 until the
    /// timeout in force releases it; returns that moment (ms).
    fn held_until_timeout(b: &mut Rb, out: &mut Vec<u32>, flow: u16, t: u64) -> u64 {
        feed(b, out, flow, &[(t, 1, Llc)]);
        let released = t + b.stats(t * MS).timeout_ms as u64;
        b.handle_timeout(released * MS, out);
        released
    }

    #[test]
    fn a_late_arrival_after_a_timeout_doubles_the_adaptive_timeout() {
        // seq 0 (HBC) is stuck in a queue: seq 1 (LLC) at 5 ms times out at 105 ms,
        // then 0 arrives at 150 ms: late, not lost -> the timeout becomes 200 ms.
        let (mut b, mut out) = adaptive();
        assert_eq!(held_until_timeout(&mut b, &mut out, 1, 5), 105);
        feed(&mut b, &mut out, 1, &[(150, 0, Hbc)]);
        assert_eq!(out, vec![1, 0]);
        let s = b.stats(150 * MS);
        assert_eq!((s.late_after_timeout, s.timeout_ms), (1, 200.0));
        // The next held packet waits 200 ms: seq 3 at 200 ms, deadline 400 ms.
        feed(&mut b, &mut out, 1, &[(200, 3, Llc)]);
        assert_eq!(b.poll_timeout(), Some(400 * MS));
        // More late arrivals, one per flow: 400, 800, 1600, then the 2 s cap.
        let mut t = 1000;
        for (flow, want) in [
            (2, 400.0),
            (3, 800.0),
            (4, 1600.0),
            (5, 2000.0),
            (6, 2000.0),
        ] {
            t = held_until_timeout(&mut b, &mut out, flow, t);
            feed(&mut b, &mut out, flow, &[(t + 1, 0, Hbc)]);
            assert_eq!(b.stats(t * MS).timeout_ms, want, "flow {flow}");
        }
    }

    #[test]
    fn a_lost_predecessor_leaves_the_adaptive_timeout_alone() {
        // seq 0 never comes: the timeout was right, nothing changes.
        let (mut b, mut out) = adaptive();
        held_until_timeout(&mut b, &mut out, 1, 5);
        feed(&mut b, &mut out, 1, &[(150, 2, Hbc)]);
        assert_eq!(out, vec![1, 2]);
        let s = b.stats(150 * MS);
        assert_eq!((s.late_after_timeout, s.timeout_ms), (0, 100.0));
    }

    #[test]
    fn the_adaptive_timeout_halves_after_ten_quiet_seconds() {
        let (mut b, mut out) = adaptive();
        held_until_timeout(&mut b, &mut out, 1, 5);
        feed(&mut b, &mut out, 1, &[(150, 0, Hbc)]); // late: 200 ms from 150 ms
        feed(&mut b, &mut out, 1, &[(10_149, 2, Hbc)]);
        assert_eq!(b.stats(10_149 * MS).timeout_ms, 200.0, "not yet 10 s");
        feed(&mut b, &mut out, 1, &[(10_150, 3, Hbc)]);
        assert_eq!(b.stats(10_150 * MS).timeout_ms, 100.0);
        feed(&mut b, &mut out, 1, &[(30_000, 4, Hbc)]);
        assert_eq!(
            b.stats(30_000 * MS).timeout_ms,
            100.0,
            "never below the base"
        );
    }

    #[test]
    fn late_arrivals_are_counted_without_adapting() {
        // The paper's fixed timeout: the late packet is counted, the timeout stays.
        let (mut b, mut out) = rb();
        held_until_timeout(&mut b, &mut out, 1, 5);
        feed(&mut b, &mut out, 1, &[(150, 0, Hbc), (151, 0, Hbc)]);
        let s = b.stats(151 * MS);
        assert_eq!(
            (s.late_after_timeout, s.timeout_ms),
            (1, 100.0),
            "counted once"
        );
    }

    #[test]
    fn hbc_gap_then_llc_fills_it() {
        // seq 0 on the LLC is *slower* (queued), seq 1 on the HBC arrives first.
        let (mut b, mut out) = rb();
        let arrivals = [(10, 1, Hbc), (12, 0, Llc), (13, 2, Llc)];
        feed(&mut b, &mut out, 1, &arrivals);
        assert_eq!(
            out,
            vec![1, 0, 2],
            "nothing held: predecessors all delivered"
        );
    }

    #[test]
    fn flows_are_independent() {
        let (mut b, mut out) = rb();
        b.push(0, 1, 1, Llc, 60, 11, &mut out);
        b.push(0, 2, 0, Llc, 60, 20, &mut out);
        assert_eq!(out, vec![20]);
    }

    #[test]
    fn per_flow_bound_releases_in_order() {
        let (mut b, mut out) = rb_with(ReorderConfig {
            max_flow_bytes: 250,
            ..ReorderConfig::default()
        });
        b.push(0, 1, 1, Llc, 100, 1, &mut out);
        b.push(0, 1, 2, Llc, 100, 2, &mut out);
        assert!(out.is_empty());
        b.push(0, 1, 3, Llc, 100, 3, &mut out);
        assert_eq!(out, vec![1, 2, 3]);
        assert_eq!(b.occupancy(), 0);
        assert_eq!(b.stats(0).overflow_releases, 3);
    }

    #[test]
    fn sequence_wraps() {
        let (mut b, mut out) = rb();
        // Jumps of 2^30 are taken as restarts (resync); they bring the flow
        // to just before the u32 wrap.
        for (i, s) in [0x4000_0000u32, 0x8000_0000, 0xC000_0000, u32::MAX - 1]
            .into_iter()
            .enumerate()
        {
            b.push(0, 1, s, Hbc, 10, i as u32, &mut out);
        }
        assert_eq!(out, vec![0, 1, 2, 3]);
        b.push(0, 1, 1, Llc, 10, 10, &mut out); // after the wrap: u32::MAX, 0 missing
        assert_eq!(out.len(), 4, "held");
        b.push(0, 1, u32::MAX, Hbc, 10, 11, &mut out);
        b.push(0, 1, 0, Hbc, 10, 12, &mut out);
        assert_eq!(out[4..], [11, 12, 10]);
    }

    #[test]
    fn bounded_flow_count() {
        let (mut b, mut out) = rb_with(ReorderConfig {
            max_flows: 10,
            ..ReorderConfig::default()
        });
        for k in 0..100u16 {
            b.push(u64::from(k), k, 1, Llc, 10, u32::from(k), &mut out);
        }
        assert_eq!(b.flows(), 10);
        assert!(b.occupancy() <= 100);
    }
}
