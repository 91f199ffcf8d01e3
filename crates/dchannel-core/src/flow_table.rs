//! Bounded per-flow state of the sender, keyed by 5-tuple + direction, with
//! idle eviction. Memory stays bounded under floods of new flows: when the
//! table is full, idle flows go first, then the least recently seen one.

use crate::packet::FlowKey;
use crate::Nanos;
use std::collections::HashMap;

/// Sender-side state of one unidirectional flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowState {
    /// Identifier carried in the wire header (never 0: 0 means "no flow").
    pub id: u16,
    /// Sequence number for the next packet of the flow.
    pub next_seq: u32,
    /// NSDI'23 Algorithm 1 `prev_c`: estimated completion time (ns) of the
    /// flow's previous packet; 0 before the first packet.
    pub prev_c: f64,
    /// Size (IP bytes) of the flow's previous packet; 0 before the first.
    /// HotMobile'21 Algorithm 1 (`pkt-state`) uses it.
    pub prev_size: usize,
    /// When the flow's latest packet was steered.
    pub last_seen: Nanos,
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowTableStats {
    /// Flows created.
    pub created: u64,
    /// Flows evicted for being idle past the idle time.
    pub idle_evictions: u64,
    /// Flows evicted because the table was full.
    pub forced_evictions: u64,
}

/// The bounded table of a sender's flows (see the module docs).
pub struct FlowTable {
    map: HashMap<FlowKey, FlowState>,
    capacity: usize,
    idle: Nanos,
    next_id: u16,
    /// Creation and eviction counters.
    pub stats: FlowTableStats,
}

impl FlowTable {
    /// `capacity` flows at most; a flow unseen for `idle` ns is evicted.
    pub fn new(capacity: usize, idle: Nanos) -> FlowTable {
        assert!(capacity > 0, "flow table capacity must be positive");
        FlowTable {
            map: HashMap::with_capacity(capacity.min(4096)),
            capacity,
            idle,
            next_id: 1,
            stats: FlowTableStats::default(),
        }
    }

    /// Flows in the table.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the table holds no flow.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The flow's state, created on first sight (touching `last_seen`).
    pub fn get_or_insert(&mut self, key: FlowKey, now: Nanos) -> &mut FlowState {
        if !self.map.contains_key(&key) {
            if self.map.len() >= self.capacity {
                self.expire(now);
            }
            if self.map.len() >= self.capacity {
                self.evict_oldest();
            }
            let id = self.next_id;
            // Ids wrap after 65535 flows; 0 is reserved for "no flow".
            self.next_id = self.next_id.checked_add(1).unwrap_or(1);
            self.stats.created += 1;
            self.map.insert(
                key,
                FlowState {
                    id,
                    next_seq: 0,
                    prev_c: 0.0,
                    prev_size: 0,
                    last_seen: now,
                },
            );
        }
        let st = self.map.get_mut(&key).expect("present");
        st.last_seen = now;
        st
    }

    /// The state of flow `key`, if present (no side effects).
    pub fn get(&self, key: &FlowKey) -> Option<&FlowState> {
        self.map.get(key)
    }

    /// Removes every flow idle for longer than the idle timeout.
    pub fn expire(&mut self, now: Nanos) {
        let idle = self.idle;
        let before = self.map.len();
        self.map
            .retain(|_, st| now.saturating_sub(st.last_seen) <= idle);
        self.stats.idle_evictions += (before - self.map.len()) as u64;
    }

    fn evict_oldest(&mut self) {
        if let Some(key) = self
            .map
            .iter()
            .min_by_key(|(_, st)| st.last_seen)
            .map(|(k, _)| *k)
        {
            self.map.remove(&key);
            self.stats.forced_evictions += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Direction, MS};

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src: "198.19.0.2".parse().unwrap(),
            dst: "198.18.0.1".parse().unwrap(),
            proto: 6,
            sport: port,
            dport: 80,
            dir: Direction::Uplink,
        }
    }

    #[test]
    fn ids_are_distinct_and_state_persists() {
        let mut t = FlowTable::new(10, 1000 * MS);
        t.get_or_insert(key(1), 0).next_seq = 5;
        let id2 = t.get_or_insert(key(2), 0).id;
        let s1 = t.get_or_insert(key(1), 1).clone();
        assert_eq!(s1.next_seq, 5);
        assert_ne!(s1.id, id2);
        assert_ne!(s1.id, 0);
        let mut k = key(1);
        k.dir = Direction::Downlink;
        assert_eq!(
            t.get_or_insert(k, 2).next_seq,
            0,
            "direction is part of the key"
        );
    }

    #[test]
    fn idle_flows_expire() {
        let mut t = FlowTable::new(10, 100 * MS);
        t.get_or_insert(key(1), 0);
        t.get_or_insert(key(2), 50 * MS);
        t.expire(120 * MS);
        assert!(t.get(&key(1)).is_none());
        assert!(t.get(&key(2)).is_some());
        assert_eq!(t.stats.idle_evictions, 1);
    }

    #[test]
    fn bounded_under_flood() {
        let mut t = FlowTable::new(100, 10_000 * MS);
        for p in 0..1000u16 {
            t.get_or_insert(key(p), u64::from(p));
        }
        assert_eq!(t.len(), 100);
        assert_eq!(t.stats.forced_evictions, 900);
        // the most recent flows survive
        assert!(t.get(&key(999)).is_some());
        assert!(t.get(&key(0)).is_none());
    }
}
