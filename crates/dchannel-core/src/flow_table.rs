//! Bounded per-flow state of the sender, keyed by 5-tuple + direction, with
//! idle eviction. Memory stays bounded under floods of new flows: when the
//! table is full, idle flows go first, then the least recently seen one.
//!
//! Every operation is O(1) (amortised), also when the table is full: flows sit
//! in a doubly linked list in the order they were last seen (the front is the
//! least recently seen), so both idle expiry and forced eviction take them off
//! the front instead of scanning the table. A flood of new flows therefore
//! costs each packet the same as steady traffic (issue 16, "Floods").
//! Memory: at most `capacity` nodes plus the index; [`FlowTable::bytes_bound`].
//!
//! The index holds only slot numbers, and each node keeps its key's hash: a
//! packet hashes its key once (SipHash with a random key, so a flood cannot
//! aim at one bucket), and evicting a flow finds its index entry by the stored
//! hash and slot number without hashing or comparing keys again.

use crate::packet::FlowKey;
use crate::Nanos;
use hashbrown::HashTable;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

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
    /// `burst`: the flow's current burst (packets less than the policy's gap
    /// apart) so far, and its previous burst, in wire bytes; when the flow's
    /// previous packet was decided. 0 before the first packet.
    pub burst: crate::policy::BurstState,
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
    /// Flows evicted because the gateway's flows in all tables together
    /// reached their cap (`--gateway-flows`) and this table held the most.
    pub gateway_evictions: u64,
}

impl std::ops::Add for FlowTableStats {
    type Output = FlowTableStats;
    /// The counters of two tables together (a sender keeps one per peer).
    fn add(self, o: FlowTableStats) -> FlowTableStats {
        FlowTableStats {
            created: self.created + o.created,
            idle_evictions: self.idle_evictions + o.idle_evictions,
            forced_evictions: self.forced_evictions + o.forced_evictions,
            gateway_evictions: self.gateway_evictions + o.gateway_evictions,
        }
    }
}

/// "No node": the end of the recency list.
const NIL: u32 = u32::MAX;
/// Free slots beyond the flows held before the table compacts itself.
const COMPACT_SLACK: usize = 64;

/// One flow in the recency list (a slot of `FlowTable::nodes`).
struct Node {
    key: FlowKey,
    /// `key`'s hash under the table's hasher.
    hash: u64,
    state: FlowState,
    /// Less recently seen neighbour (towards the front), or NIL.
    prev: u32,
    /// More recently seen neighbour (towards the back), or NIL.
    next: u32,
}

/// The bounded table of a sender's flows (see the module docs).
pub struct FlowTable {
    /// Slot numbers into `nodes`, hashed by their node's `hash`.
    index: HashTable<u32>,
    hasher: RandomState,
    nodes: Vec<Node>,
    /// Slots of evicted flows, reused before `nodes` grows.
    free: Vec<u32>,
    /// Least recently seen flow (evicted first), or NIL.
    head: u32,
    /// Most recently seen flow, or NIL.
    tail: u32,
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
        assert!(
            capacity < NIL as usize,
            "flow table capacity must fit in u32"
        );
        // Small at first: a gateway has a table per device, most of them
        // nearly empty; the slab and the index grow by doubling.
        let reserve = capacity.min(64);
        FlowTable {
            index: HashTable::with_capacity(reserve),
            hasher: RandomState::new(),
            nodes: Vec::with_capacity(reserve),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            capacity,
            idle,
            next_id: 1,
            stats: FlowTableStats::default(),
        }
    }

    /// Flows in the table.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the table holds no flow.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Upper bound of the heap bytes a full table of `capacity` flows holds:
    /// one node per flow plus the index (hashbrown: a slot number and a
    /// control byte per bucket, at most 8/7 buckets per entry, rounded up to a
    /// power of two — hence the factor 2 × 8/7).
    pub fn bytes_bound(capacity: usize) -> usize {
        let node = std::mem::size_of::<Node>();
        let bucket = std::mem::size_of::<u32>() + 1;
        capacity * node + (capacity * 2 * 8 / 7 + 16) * bucket
    }

    /// The flow's state, created on first sight (touching `last_seen`).
    pub fn get_or_insert(&mut self, key: FlowKey, now: Nanos) -> &mut FlowState {
        let hash = self.hasher.hash_one(key);
        let slot = match self.find(hash, &key) {
            Some(slot) => {
                self.unlink(slot);
                slot
            }
            None => self.insert(key, hash, now),
        };
        self.push_back(slot);
        let st = &mut self.nodes[slot as usize].state;
        st.last_seen = now;
        st
    }

    /// The state of flow `key`, if present (no side effects).
    pub fn get(&self, key: &FlowKey) -> Option<&FlowState> {
        let slot = self.find(self.hasher.hash_one(key), key)?;
        Some(&self.nodes[slot as usize].state)
    }

    /// The slot of flow `key` (whose hash is `hash`), if present.
    fn find(&self, hash: u64, key: &FlowKey) -> Option<u32> {
        let nodes = &self.nodes;
        self.index
            .find(hash, |&slot| nodes[slot as usize].key == *key)
            .copied()
    }

    /// Removes every flow idle for longer than the idle timeout.
    pub fn expire(&mut self, now: Nanos) {
        while self.head != NIL {
            let head = &self.nodes[self.head as usize];
            if now.saturating_sub(head.state.last_seen) <= self.idle {
                break; // the list is in last-seen order: the rest are fresher
            }
            self.remove(self.head);
            self.stats.idle_evictions += 1;
        }
        self.compact_if_sparse();
    }

    /// Evicts the least recently seen flow, for the gateway-wide cap (counted
    /// in `gateway_evictions`); false if the table is empty.
    pub fn evict_for_gateway(&mut self) -> bool {
        if self.head == NIL {
            return false;
        }
        self.remove(self.head);
        self.stats.gateway_evictions += 1;
        self.compact_if_sparse();
        true
    }

    /// Rebuilds the slab and the index at the size of the flows held once
    /// more than half the slots are free, so a table that shrank (idle flows,
    /// or the gateway-wide cap taking its flows) gives its memory back: the
    /// sum over a gateway's tables follows the flows held now, not each
    /// table's high-water mark. Amortised O(1): a rebuild copies at most as
    /// many flows as were removed since the last one.
    fn compact_if_sparse(&mut self) {
        if self.free.len() <= self.index.len() + COMPACT_SLACK {
            return;
        }
        let mut nodes = Vec::with_capacity(self.index.len());
        let mut at = self.head;
        while at != NIL {
            let n = &self.nodes[at as usize];
            at = n.next;
            let slot = nodes.len() as u32;
            nodes.push(Node {
                key: n.key,
                hash: n.hash,
                state: n.state.clone(),
                prev: slot.wrapping_sub(1),
                next: slot + 1,
            });
        }
        let mut index = HashTable::with_capacity(nodes.len());
        for (slot, n) in nodes.iter().enumerate() {
            index.insert_unique(n.hash, slot as u32, |&s: &u32| nodes[s as usize].hash);
        }
        match nodes.len() {
            0 => (self.head, self.tail) = (NIL, NIL),
            len => {
                nodes[0].prev = NIL;
                nodes[len - 1].next = NIL;
                (self.head, self.tail) = (0, len as u32 - 1);
            }
        }
        self.nodes = nodes;
        self.index = index;
        self.free = Vec::new();
    }

    /// A new flow in a free slot (unlinked); makes room first when full.
    fn insert(&mut self, key: FlowKey, hash: u64, now: Nanos) -> u32 {
        if self.index.len() >= self.capacity {
            self.expire(now);
        }
        if self.index.len() >= self.capacity {
            self.remove(self.head); // the least recently seen flow
            self.stats.forced_evictions += 1;
        }
        let id = self.next_id;
        // Ids wrap after 65535 flows; 0 is reserved for "no flow".
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        self.stats.created += 1;
        let node = Node {
            key,
            hash,
            state: FlowState {
                id,
                next_seq: 0,
                prev_c: 0.0,
                prev_size: 0,
                last_seen: now,
                burst: Default::default(),
            },
            prev: NIL,
            next: NIL,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let nodes = &self.nodes;
        self.index
            .insert_unique(hash, slot, |&s| nodes[s as usize].hash);
        slot
    }

    /// Takes a linked flow out of the table; its slot becomes free.
    fn remove(&mut self, slot: u32) {
        self.unlink(slot);
        let hash = self.nodes[slot as usize].hash;
        match self.index.find_entry(hash, |&s| s == slot) {
            Ok(entry) => drop(entry.remove()),
            Err(_) => debug_assert!(false, "flow in slot {slot} listed but not indexed"),
        }
        self.free.push(slot);
    }

    /// Detaches `slot` from the recency list.
    fn unlink(&mut self, slot: u32) {
        let (prev, next) = {
            let n = &self.nodes[slot as usize];
            (n.prev, n.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
        let n = &mut self.nodes[slot as usize];
        n.prev = NIL;
        n.next = NIL;
    }

    /// Appends a detached `slot` as the most recently seen flow.
    fn push_back(&mut self, slot: u32) {
        let tail = self.tail;
        {
            let n = &mut self.nodes[slot as usize];
            n.prev = tail;
            n.next = NIL;
        }
        match tail {
            NIL => self.head = slot,
            t => self.nodes[t as usize].next = slot,
        }
        self.tail = slot;
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

    #[test]
    fn recency_order_decides_eviction_not_insertion_order() {
        // flows 0..3 in a table of 3; flow 0 is seen again, so flow 1 is the
        // least recently seen when flow 3 arrives
        let mut t = FlowTable::new(3, 10_000 * MS);
        for p in 0..3u16 {
            t.get_or_insert(key(p), u64::from(p));
        }
        t.get_or_insert(key(0), 10);
        t.get_or_insert(key(3), 11);
        assert!(t.get(&key(1)).is_none());
        for p in [0, 2, 3] {
            assert!(t.get(&key(p)).is_some(), "flow {p}");
        }
        // slots are reused: the table never holds more nodes than its capacity
        assert_eq!(t.nodes.len(), 3);
    }

    #[test]
    fn a_gateway_eviction_takes_the_least_recently_seen_flow() {
        let mut t = FlowTable::new(10, 10_000 * MS);
        assert!(!t.evict_for_gateway());
        for p in 0..3u16 {
            t.get_or_insert(key(p), u64::from(p));
        }
        t.get_or_insert(key(0), 10);
        assert!(t.evict_for_gateway());
        assert!(t.get(&key(1)).is_none());
        assert_eq!((t.len(), t.stats.gateway_evictions), (2, 1));
        assert_eq!(t.stats.forced_evictions, 0);
    }

    #[test]
    fn a_table_that_shrank_gives_its_memory_back_and_keeps_its_order() {
        let mut t = FlowTable::new(1000, 100 * MS);
        for p in 0..1000u16 {
            t.get_or_insert(key(p), 0);
        }
        // 900 go for the gateway cap. A rebuild comes once the free slots
        // outnumber the flows by more than 64: after 533 evictions (533 > 467
        // + 64; 467 flows left), then 266 later (266 > 201 + 64; 201 left);
        // the last 101 evictions leave 100 flows and 101 free slots.
        for _ in 0..900 {
            t.evict_for_gateway();
        }
        assert_eq!((t.len(), t.nodes.len(), t.free.len()), (100, 201, 101));
        assert!(t.nodes.capacity() < 250, "{}", t.nodes.capacity());
        for p in 900..1000u16 {
            assert!(t.get(&key(p)).is_some(), "flow {p}");
        }
        // recency order survived: flow 900 is the least recently seen
        t.get_or_insert(key(900), 1);
        assert!(t.evict_for_gateway());
        assert!(t.get(&key(901)).is_none());
        assert!(t.get(&key(900)).is_some());
        assert_eq!(t.len(), 99);
    }

    #[test]
    fn expiry_stops_at_the_first_fresh_flow_and_keeps_the_list_whole() {
        let mut t = FlowTable::new(10, 100 * MS);
        for p in 0..5u16 {
            t.get_or_insert(key(p), u64::from(p) * 50 * MS);
        }
        // at 260 ms the flows seen at 0, 50, 100 and 150 ms are 260, 210, 160
        // and 110 ms old (> 100 ms: idle); the one seen at 200 ms is 60 ms old
        t.expire(260 * MS);
        assert_eq!(t.len(), 1);
        assert_eq!(t.stats.idle_evictions, 4);
        assert!(t.get(&key(4)).is_some());
        // the emptied list still works: new flows link and evict correctly
        t.get_or_insert(key(9), 300 * MS);
        t.expire(399 * MS); // flow 4 (200 ms) is 199 ms old, flow 9 (300 ms) 99 ms
        assert_eq!(t.len(), 1);
        assert!(t.get(&key(9)).is_some());
    }

    #[test]
    fn a_flood_of_distinct_flows_stays_within_capacity() {
        // 300,000 here (a debug build); the 1,000,000-flow figure and its
        // decision rate are in benches/decision.rs (docs/reliability.md)
        let cap = 4096;
        let mut t = FlowTable::new(cap, 120_000 * MS);
        for i in 0..300_000u32 {
            let mut k = key((i & 0xffff) as u16);
            k.dport = (i >> 16) as u16; // distinct 5-tuples
            t.get_or_insert(k, u64::from(i) * 1000);
        }
        assert_eq!(t.len(), cap);
        assert_eq!(t.nodes.len(), cap);
        assert!(t.free.is_empty());
        assert_eq!(t.stats.created, 300_000);
        assert_eq!(t.stats.forced_evictions, 300_000 - cap as u64);
        assert!(
            FlowTable::bytes_bound(cap) < 4096 * 200,
            "{}",
            FlowTable::bytes_bound(cap)
        );
    }
}
