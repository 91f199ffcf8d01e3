//! Duplicate filter: of the two copies of a packet sent on both channels
//! ([`wire::FLAG_DUPLICATE`](crate::wire::FLAG_DUPLICATE), `realtime-dup`), the
//! receiver delivers the first to arrive, on either channel, and drops the other.
//!
//! Rule: a copy is identified by its (flow id, per-flow sequence number), the same
//! in both copies and unique among a sender's packets (the sender numbers each
//! flow's packets once, crate::steer). The first copy of an id is delivered at once
//! and its id remembered; a copy whose id is remembered is the second: dropped, and
//! the id forgotten (there are exactly two). An id is forgotten unmatched after
//! `window` (its twin was lost, or is later than any channel delay difference) or
//! when `capacity` newer ids arrived; a twin arriving after that is delivered (a
//! duplicate the application's own replay protection sees: DTLS/SRTP windows,
//! RFC 6347 §4.1.2.6, RFC 3711 §3.3.2). The window also covers flow ids being
//! reused: a sender gives a new flow a fresh id and restarts its numbers only
//! after 65535 other flows (crate::flow_table) or 120 s idle, so an old flow's id
//! is never confused with a new one's within the window. Ids are compared for
//! equality only, so a sequence number wrapping from 2^32 - 1 to 0 is no special
//! case.
//!
//! Costs: amortized O(1) per copy (one hash lookup, each remembered id enters and
//! leaves the arrival-order queue once); memory at most `capacity` ids per peer,
//! allocated only once duplicates arrive. Nothing is held: the filter never delays
//! a packet, it only says deliver or drop.

use crate::{Nanos, MS};
use std::collections::{HashMap, VecDeque};

/// How long an unmatched id is remembered: above any delay difference between
/// the two channels (tens to a few hundred ms on the cellular traces).
pub const WINDOW: Nanos = 2_000 * MS;
/// Ids remembered at most per peer: 2 s of inputs at 120 Hz are 240.
pub const CAPACITY: usize = 1024;

/// What the filter makes of one copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyOrder {
    /// The first copy of its id (or one whose twin was forgotten): deliver it.
    First,
    /// The second copy of an id whose first was delivered: drop it.
    Second,
}

/// What the filter saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DedupeStats {
    /// First copies (delivered).
    pub first: u64,
    /// Second copies (dropped).
    pub dropped: u64,
    /// Ids forgotten before their second copy arrived (lost, or too late).
    pub unmatched: u64,
}

/// One peer's duplicate filter (see the module docs).
#[derive(Debug)]
pub struct DuplicateFilter {
    window: Nanos,
    capacity: usize,
    /// Every id remembered, with its first copy's arrival, oldest first.
    order: VecDeque<(u64, Nanos)>,
    /// The ids still waiting for their second copy -> the first copy's arrival.
    waiting: HashMap<u64, Nanos>,
    stats: DedupeStats,
}

impl Default for DuplicateFilter {
    fn default() -> Self {
        DuplicateFilter::new(WINDOW, CAPACITY)
    }
}

impl DuplicateFilter {
    /// Remembers ids for `window` ns, `capacity` of them at most (> 0).
    pub fn new(window: Nanos, capacity: usize) -> DuplicateFilter {
        assert!(capacity > 0, "duplicate filter capacity must be positive");
        DuplicateFilter {
            window,
            capacity,
            order: VecDeque::new(),
            waiting: HashMap::new(),
            stats: DedupeStats::default(),
        }
    }

    /// The copy of (`flow_id`, `seq`) arriving at `now`: the first or the second.
    pub fn admit(&mut self, now: Nanos, flow_id: u16, seq: u32) -> CopyOrder {
        let id = (u64::from(flow_id) << 32) | u64::from(seq);
        while self
            .order
            .front()
            .is_some_and(|&(_, at)| now.saturating_sub(at) >= self.window)
        {
            self.forget_oldest();
        }
        if self.waiting.remove(&id).is_some() {
            self.stats.dropped += 1;
            return CopyOrder::Second;
        }
        if self.order.len() == self.capacity {
            self.forget_oldest();
        }
        self.waiting.insert(id, now);
        self.order.push_back((id, now));
        self.stats.first += 1;
        CopyOrder::First
    }

    /// Forgets the oldest id remembered (unmatched if it still waits).
    fn forget_oldest(&mut self) {
        let Some((old, at)) = self.order.pop_front() else {
            return;
        };
        // Still waiting since this arrival (not re-sent later): its twin never came.
        if self.waiting.get(&old) == Some(&at) {
            self.waiting.remove(&old);
            self.stats.unmatched += 1;
        }
    }

    /// What the filter saw so far.
    pub fn stats(&self) -> DedupeStats {
        self.stats
    }

    /// Ids remembered now (matched ones until they leave the queue).
    pub fn remembered(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdicts on `copies` (time in ms, flow id, seq), as F/S.
    fn run(f: &mut DuplicateFilter, copies: &[(u64, u16, u32)]) -> String {
        copies
            .iter()
            .map(|&(ms, flow, seq)| match f.admit(ms * MS, flow, seq) {
                CopyOrder::First => 'F',
                CopyOrder::Second => 'S',
            })
            .collect()
    }

    #[test]
    fn first_copy_wins_whichever_channel_and_order() {
        // Inputs 1..4 of flow 7 on both channels; the LLC copies (5 ms) overtake
        // the HBC copies (40 ms) of earlier inputs, and input 3's LLC copy is
        // lost. Arrivals: LLC 1 @5, LLC 2 @13, HBC 1 @40, LLC 4 @45, HBC 2 @48,
        // HBC 3 @56, HBC 4 @80: each input delivered once, by its first copy.
        let mut f = DuplicateFilter::default();
        let got = run(
            &mut f,
            &[
                (5, 7, 1),
                (13, 7, 2),
                (40, 7, 1),
                (45, 7, 4),
                (48, 7, 2),
                (56, 7, 3),
                (80, 7, 4),
            ],
        );
        assert_eq!(got, "FFSFSFS");
        let want = DedupeStats {
            first: 4,
            dropped: 3,
            unmatched: 0,
        };
        assert_eq!(f.stats(), want);
        // the same sequence number in another flow is another packet
        assert_eq!(run(&mut f, &[(81, 8, 1), (82, 8, 1)]), "FS");
    }

    #[test]
    fn an_id_is_remembered_for_the_window_exactly() {
        // window 100 ms: a twin 99 ms after the first copy is dropped; one 100 ms
        // after is delivered (the first copy was forgotten, unmatched).
        let mut f = DuplicateFilter::new(100 * MS, 16);
        assert_eq!(run(&mut f, &[(0, 1, 10), (99, 1, 10)]), "FS");
        assert_eq!(run(&mut f, &[(200, 1, 11), (300, 1, 11)]), "FF");
        assert_eq!(f.stats().unmatched, 1);
        // the late copy became a first copy of its own, remembered again
        assert_eq!(run(&mut f, &[(350, 1, 11)]), "S");
    }

    #[test]
    fn capacity_bounds_the_ids_remembered() {
        // capacity 3: ids 0, 1, 2 remembered; id 3 evicts id 0 (oldest), so id 0's
        // twin is delivered, id 1's still dropped.
        let mut f = DuplicateFilter::new(WINDOW, 3);
        assert_eq!(run(&mut f, &[(0, 1, 0), (1, 1, 1), (2, 1, 2)]), "FFF");
        assert_eq!(f.remembered(), 3);
        assert_eq!(run(&mut f, &[(3, 1, 3)]), "F");
        assert_eq!(f.remembered(), 3);
        assert_eq!(f.stats().unmatched, 1);
        assert_eq!(run(&mut f, &[(4, 1, 1), (5, 1, 0)]), "SF");
        // never more than capacity, however many arrive
        for seq in 100..10_000 {
            f.admit(10 * MS, 1, seq);
            assert!(f.remembered() <= 3);
        }
    }

    #[test]
    fn sequence_numbers_wrap_around() {
        // A flow's numbers go 2^32 - 2, 2^32 - 1, 0, 1: four packets, each copy
        // pair matched, none confused with another.
        let mut f = DuplicateFilter::default();
        let seqs = [u32::MAX - 1, u32::MAX, 0, 1];
        let firsts: Vec<_> = seqs.iter().map(|&s| (0, 3, s)).collect();
        let twins: Vec<_> = seqs.iter().rev().map(|&s| (30, 3, s)).collect();
        assert_eq!(run(&mut f, &firsts), "FFFF");
        assert_eq!(run(&mut f, &twins), "SSSS");
        // flow ids 0xffff and 0 with the same seq are two ids (id = flow << 32 | seq)
        assert_eq!(run(&mut f, &[(40, u16::MAX, 5), (40, 0, 5)]), "FF");
    }
}
