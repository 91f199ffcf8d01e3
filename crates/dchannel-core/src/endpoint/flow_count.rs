//! The gateway-wide flow count, one for all send workers (issue 37).
//!
//! Each peer's flow table is bounded on its own; this bounds the flows of all
//! peers together (`Config::max_flows_total`). The send workers share one
//! count behind one mutex: (flows, peer) of every peer with a flow in an
//! ordered set, so the peer with the most flows is found in O(log peers).
//! It is touched only when a peer's number of flows changes (a new or
//! evicted flow), never per packet of a known flow.
//!
//! Lock order: a peer's steering lock may be held while this one is taken,
//! never the other way round, and no worker holds two peers' locks at once.

use std::collections::BTreeSet;

/// Flows per peer and their total, against the gateway-wide cap.
pub(super) struct FlowCount {
    /// Flows of each peer as last counted.
    per_peer: Vec<usize>,
    /// (flows, peer) of every peer with a flow.
    by_flows: BTreeSet<(usize, usize)>,
    /// Flows of all peers.
    total: usize,
    /// The cap on `total` (at least 1).
    max: usize,
}

impl FlowCount {
    /// No flows yet, for `peers` peers, capped at `max` (0 is taken as 1).
    pub(super) fn new(peers: usize, max: usize) -> FlowCount {
        FlowCount {
            per_peer: vec![0; peers],
            by_flows: BTreeSet::new(),
            total: 0,
            max: max.max(1),
        }
    }

    /// Peer `peer` has `n` flows now (a slot past the end, a peer added
    /// live, starts at none).
    pub(super) fn set(&mut self, peer: usize, n: usize) {
        if peer >= self.per_peer.len() {
            self.per_peer.resize(peer + 1, 0);
        }
        let old = std::mem::replace(&mut self.per_peer[peer], n);
        if old == n {
            return;
        }
        if old > 0 {
            self.by_flows.remove(&(old, peer));
        }
        if n > 0 {
            self.by_flows.insert((n, peer));
        }
        self.total = self.total + n - old;
    }

    /// Over the cap: the peer that loses its least recently seen flow, the
    /// one with the most flows (`peer`, whose packet made the new flow, on a
    /// tie); `None` while the total fits.
    pub(super) fn victim(&self, peer: usize) -> Option<usize> {
        if self.total <= self.max {
            return None;
        }
        let &(most, largest) = self.by_flows.last()?;
        Some(if self.per_peer[peer] >= most {
            peer
        } else {
            largest
        })
    }

    /// Flows of all peers, as counted.
    #[cfg(test)]
    pub(super) fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_with_most_flows_loses_one_and_a_tie_goes_to_the_newcomer() {
        let mut c = FlowCount::new(3, 5);
        c.set(0, 3);
        c.set(1, 2);
        assert_eq!((c.total(), c.victim(1)), (5, None));
        c.set(2, 1); // 6 > 5: peer 0 holds the most (3)
        assert_eq!(c.victim(2), Some(0));
        c.set(0, 2); // 5: fits
        assert_eq!(c.victim(2), None);
        c.set(1, 3); // 6: peer 1 (3) is the largest and the one asking
        assert_eq!(c.victim(1), Some(1));
        c.set(0, 3); // 7: peers 0 and 1 tie at 3; peer 0 asks
        assert_eq!(c.victim(0), Some(0));
        c.set(0, 0);
        c.set(1, 0);
        c.set(2, 0);
        assert_eq!((c.total(), c.victim(0)), (0, None));
    }
}
