//! The reorder buffer's flow store, with per-device accounting: every
//! operation is O(1) (amortised) or O(log d) for d devices, also when a device
//! cycles flow ids as fast as it can (issue 37, "Isolation between devices").
//!
//! Flows live in a slab (`nodes`, slots reused through `free`) indexed by a
//! hash table of slot numbers (each node keeps its key's hash, so removing a
//! flow never hashes its key again; SipHash with a random key, so a device
//! cannot aim its flow ids at one bucket). Each flow sits on three intrusive
//! doubly linked lists threaded through the slab:
//!
//! - `RECENCY`: all flows, least recently seen first (idle expiry pops its front);
//! - `DEVICE`: the device's flows, least recently seen first (a device at its
//!   flow limit, or the one with the most flows when the gateway is at its
//!   limit, loses its front);
//! - `HOLDING`: the device's flows that take memory (held packets or
//!   remembered gaps), in the order they started to (memory pressure
//!   releases from its front).
//!
//! Per device the store counts flows and accounted memory; two ordered sets
//! name the device with the most of either in O(log d), so eviction under
//! pressure takes from the device over its share first. The memory of a flow
//! is what the buffer reports through [`Flows::set_memory`].

use hashbrown::HashTable;
use std::collections::hash_map::RandomState;
use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hash};

/// "No node": the end of a list.
const NIL: u32 = u32::MAX;
/// All flows, least recently seen first.
const RECENCY: usize = 0;
/// One device's flows, least recently seen first.
const DEVICE: usize = 1;
/// One device's flows that take memory.
const HOLDING: usize = 2;

/// A node's neighbours on one list.
#[derive(Clone, Copy)]
struct Links {
    prev: u32,
    next: u32,
}

const UNLINKED: Links = Links {
    prev: NIL,
    next: NIL,
};

/// The ends of one list.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
};

/// One flow in the slab.
struct Node<K, F> {
    key: K,
    /// `key`'s hash under the store's hasher.
    hash: u64,
    device: usize,
    /// Memory accounted to this flow (bytes).
    memory: usize,
    links: [Links; 3],
    flow: F,
}

/// Limit hits and evictions of one device, with its current flows and memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceReorderStats {
    /// Flows the reorder buffer tracks for the device now.
    pub flows: usize,
    /// Bytes the device's flows take now: held buffers (capacity) and gaps.
    pub memory_bytes: usize,
    /// Flows of the device evicted because it reached its own flow limit
    /// (`--reorder-device-flows`).
    pub device_flow_limit_evictions: u64,
    /// Flows of the device evicted because the gateway reached its flow limit
    /// (`--reorder-flows`) and this device had the most flows.
    pub gateway_flow_limit_evictions: u64,
    /// Times the device reached its own memory limit (`--reorder-device-bytes`):
    /// a flow of its released its held packets early and gave up its gaps.
    pub device_memory_limit_hits: u64,
    /// Times the gateway reached its memory limit (`--reorder-total-bytes`)
    /// and a flow of this device, the one taking the most, released early.
    pub gateway_memory_limit_hits: u64,
}

/// One device's lists and counters.
struct Device {
    recency: List,
    holding: List,
    stats: DeviceReorderStats,
}

impl Default for Device {
    fn default() -> Self {
        Device {
            recency: EMPTY,
            holding: EMPTY,
            stats: DeviceReorderStats::default(),
        }
    }
}

/// The flow store (see the module docs). `K` is the flow's key, `F` its state.
pub(super) struct Flows<K, F> {
    index: HashTable<u32>,
    hasher: RandomState,
    nodes: Vec<Node<K, F>>,
    free: Vec<u32>,
    recency: List,
    devices: Vec<Device>,
    /// (flows, device) of every device with a flow.
    by_flows: BTreeSet<(usize, usize)>,
    /// (memory, device) of every device taking memory.
    by_memory: BTreeSet<(usize, usize)>,
    memory: usize,
}

impl<K: Hash + Eq + Copy, F> Flows<K, F> {
    pub(super) fn new() -> Self {
        Flows {
            index: HashTable::new(),
            hasher: RandomState::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            recency: EMPTY,
            devices: Vec::new(),
            by_flows: BTreeSet::new(),
            by_memory: BTreeSet::new(),
            memory: 0,
        }
    }

    /// Heap bytes one stored flow takes at most besides what its state
    /// allocates: its slab node and its share of the index (a slot number and
    /// a control byte per bucket, at most 8/7 buckets per entry, rounded up to
    /// a power of two: the factor 2 × 8/7), as in `FlowTable::bytes_bound`.
    pub(super) fn bytes_per_flow() -> usize {
        std::mem::size_of::<Node<K, F>>() + (std::mem::size_of::<u32>() + 1) * 16 / 7 + 1
    }

    /// Flows stored.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Memory accounted to all flows (bytes).
    pub(super) fn memory(&self) -> usize {
        self.memory
    }

    /// `key`'s hash, and its slot if the flow is stored.
    pub(super) fn lookup(&self, key: &K) -> (u64, Option<u32>) {
        let hash = self.hasher.hash_one(key);
        let nodes = &self.nodes;
        let slot = self
            .index
            .find(hash, |&s| nodes[s as usize].key == *key)
            .copied();
        (hash, slot)
    }

    /// The state of the flow in `slot`.
    pub(super) fn get_mut(&mut self, slot: u32) -> &mut F {
        &mut self.nodes[slot as usize].flow
    }

    /// The state of the flow in `slot`.
    pub(super) fn get(&self, slot: u32) -> &F {
        &self.nodes[slot as usize].flow
    }

    /// The device of the flow in `slot`.
    pub(super) fn device_of(&self, slot: u32) -> usize {
        self.nodes[slot as usize].device
    }

    /// Memory accounted to the flow in `slot`.
    pub(super) fn memory_of(&self, slot: u32) -> usize {
        self.nodes[slot as usize].memory
    }

    /// `device`'s counters (zero for a device never seen).
    pub(super) fn device(&self, device: usize) -> DeviceReorderStats {
        self.devices
            .get(device)
            .map_or_else(DeviceReorderStats::default, |d| d.stats)
    }

    /// `device`'s counters, to count a limit hit.
    pub(super) fn device_mut(&mut self, device: usize) -> &mut DeviceReorderStats {
        &mut self.dev(device).stats
    }

    /// Zeroes the counters of `device`, which has no flows left.
    pub(super) fn reset_device(&mut self, device: usize) {
        if let Some(d) = self.devices.get_mut(device) {
            debug_assert_eq!((d.stats.flows, d.stats.memory_bytes), (0, 0));
            *d = Device::default();
        }
    }

    /// The least recently seen flow of all.
    pub(super) fn oldest(&self) -> Option<u32> {
        (self.recency.head != NIL).then_some(self.recency.head)
    }

    /// `device`'s least recently seen flow.
    pub(super) fn oldest_of(&self, device: usize) -> Option<u32> {
        let head = self.devices.get(device)?.recency.head;
        (head != NIL).then_some(head)
    }

    /// `device`'s flow that took memory first of those that take memory now.
    pub(super) fn first_holding_of(&self, device: usize) -> Option<u32> {
        let head = self.devices.get(device)?.holding.head;
        (head != NIL).then_some(head)
    }

    /// The device with the most flows, and how many (ties: the highest device).
    pub(super) fn most_flows(&self) -> Option<(usize, usize)> {
        self.by_flows.last().map(|&(n, d)| (d, n))
    }

    /// The device taking the most memory, and how much (ties: the highest device).
    pub(super) fn most_memory(&self) -> Option<(usize, usize)> {
        self.by_memory.last().map(|&(m, d)| (d, m))
    }

    /// Stores a new flow (its key not stored yet, `hash` from
    /// [`lookup`](Self::lookup)) as the most recently seen; returns its slot.
    pub(super) fn insert(&mut self, key: K, hash: u64, device: usize, flow: F) -> u32 {
        self.dev(device);
        let node = Node {
            key,
            hash,
            device,
            memory: 0,
            links: [UNLINKED; 3],
            flow,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                assert!(self.nodes.len() < NIL as usize, "reorder flows fit in u32");
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let nodes = &self.nodes;
        self.index
            .insert_unique(hash, slot, |&s| nodes[s as usize].hash);
        self.push_back(RECENCY, slot);
        self.push_back(DEVICE, slot);
        self.count_flows(device, 1);
        slot
    }

    /// Marks the flow in `slot` as the most recently seen (of all and of its device).
    pub(super) fn touch(&mut self, slot: u32) {
        if self.recency.tail != slot {
            self.unlink(RECENCY, slot);
            self.push_back(RECENCY, slot);
        }
        let device = self.nodes[slot as usize].device;
        if self.devices[device].recency.tail != slot {
            self.unlink(DEVICE, slot);
            self.push_back(DEVICE, slot);
        }
    }

    /// Sets the memory accounted to the flow in `slot` (its device's and the
    /// total follow; the flow joins or leaves its device's holding list).
    pub(super) fn set_memory(&mut self, slot: u32, memory: usize) {
        let node = &mut self.nodes[slot as usize];
        let (old, device) = (node.memory, node.device);
        if old == memory {
            return;
        }
        node.memory = memory;
        self.memory = self.memory - old + memory;
        match (old, memory) {
            (0, _) => self.push_back(HOLDING, slot),
            (_, 0) => self.unlink(HOLDING, slot),
            _ => {}
        }
        let stats = &mut self.dev(device).stats;
        let before = stats.memory_bytes;
        stats.memory_bytes = before - old + memory;
        let after = stats.memory_bytes;
        if before > 0 {
            self.by_memory.remove(&(before, device));
        }
        if after > 0 {
            self.by_memory.insert((after, device));
        }
    }

    /// Takes the flow in `slot` out of the store (its memory with it) and
    /// returns its state.
    pub(super) fn remove(&mut self, slot: u32) -> F
    where
        F: Default,
    {
        self.set_memory(slot, 0);
        self.unlink(RECENCY, slot);
        self.unlink(DEVICE, slot);
        let node = &mut self.nodes[slot as usize];
        let (hash, device) = (node.hash, node.device);
        let flow = std::mem::take(&mut node.flow);
        match self.index.find_entry(hash, |&s| s == slot) {
            Ok(entry) => drop(entry.remove()),
            Err(_) => debug_assert!(false, "reorder flow in slot {slot} listed but not indexed"),
        }
        self.free.push(slot);
        self.count_flows(device, -1);
        flow
    }

    /// Every stored flow with its device and accounted memory (for checks).
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, usize, &F)> {
        self.index.iter().map(|&s| {
            let n = &self.nodes[s as usize];
            (n.device, n.memory, &n.flow)
        })
    }

    /// The slab entry of `device`, created on first sight.
    fn dev(&mut self, device: usize) -> &mut Device {
        if device >= self.devices.len() {
            self.devices.resize_with(device + 1, Device::default);
        }
        &mut self.devices[device]
    }

    fn count_flows(&mut self, device: usize, delta: isize) {
        let stats = &mut self.dev(device).stats;
        let before = stats.flows;
        stats.flows = before.checked_add_signed(delta).expect("flow count");
        let after = stats.flows;
        if before > 0 {
            self.by_flows.remove(&(before, device));
        }
        if after > 0 {
            self.by_flows.insert((after, device));
        }
    }

    /// The ends of list `which` that `slot` is (or goes) on.
    fn list(&mut self, which: usize, slot: u32) -> &mut List {
        match which {
            RECENCY => &mut self.recency,
            _ => {
                let device = self.nodes[slot as usize].device;
                let d = &mut self.devices[device];
                if which == DEVICE {
                    &mut d.recency
                } else {
                    &mut d.holding
                }
            }
        }
    }

    /// Detaches `slot` from list `which`.
    fn unlink(&mut self, which: usize, slot: u32) {
        let Links { prev, next } = self.nodes[slot as usize].links[which];
        match prev {
            NIL => self.list(which, slot).head = next,
            p => self.nodes[p as usize].links[which].next = next,
        }
        match next {
            NIL => self.list(which, slot).tail = prev,
            n => self.nodes[n as usize].links[which].prev = prev,
        }
        self.nodes[slot as usize].links[which] = UNLINKED;
    }

    /// Appends a detached `slot` to the back of list `which`.
    fn push_back(&mut self, which: usize, slot: u32) {
        let tail = self.list(which, slot).tail;
        self.nodes[slot as usize].links[which] = Links {
            prev: tail,
            next: NIL,
        };
        match tail {
            NIL => self.list(which, slot).head = slot,
            t => self.nodes[t as usize].links[which].next = slot,
        }
        self.list(which, slot).tail = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks list `which` from its head (for `device` unless RECENCY).
    fn walk(f: &Flows<u32, ()>, which: usize, device: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = match which {
            RECENCY => f.recency.head,
            DEVICE => f.devices[device].recency.head,
            _ => f.devices[device].holding.head,
        };
        while at != NIL {
            out.push(f.nodes[at as usize].key);
            at = f.nodes[at as usize].links[which].next;
        }
        out
    }

    fn add(f: &mut Flows<u32, ()>, key: u32, device: usize) -> u32 {
        let (hash, slot) = f.lookup(&key);
        assert!(slot.is_none());
        f.insert(key, hash, device, ())
    }

    #[test]
    fn lists_follow_recency_per_device_and_overall() {
        let mut f = Flows::new();
        let a = add(&mut f, 1, 0);
        add(&mut f, 2, 1);
        add(&mut f, 3, 0);
        f.touch(a);
        assert_eq!(walk(&f, RECENCY, 0), [2, 3, 1]);
        assert_eq!(walk(&f, DEVICE, 0), [3, 1]);
        assert_eq!(walk(&f, DEVICE, 1), [2]);
        assert_eq!(f.most_flows(), Some((0, 2)));
        let (_, s3) = f.lookup(&3);
        f.remove(s3.unwrap());
        assert_eq!(walk(&f, RECENCY, 0), [2, 1]);
        assert_eq!(walk(&f, DEVICE, 0), [1]);
        // a tie names the higher device
        assert_eq!(f.most_flows(), Some((1, 1)));
        assert_eq!(f.len(), 2);
        // the freed slot is reused
        add(&mut f, 4, 1);
        assert_eq!(f.nodes.len(), 3);
    }

    #[test]
    fn memory_moves_devices_and_the_holding_list() {
        let mut f = Flows::new();
        let a = add(&mut f, 1, 0);
        let b = add(&mut f, 2, 0);
        let c = add(&mut f, 3, 1);
        f.set_memory(b, 100);
        f.set_memory(a, 50);
        f.set_memory(c, 120);
        assert_eq!(
            walk(&f, HOLDING, 0),
            [2, 1],
            "in the order they took memory"
        );
        assert_eq!(f.memory(), 270);
        assert_eq!(f.most_memory(), Some((0, 150)));
        f.set_memory(b, 0);
        assert_eq!(walk(&f, HOLDING, 0), [1]);
        assert_eq!(f.most_memory(), Some((1, 120)));
        f.remove(c);
        assert_eq!((f.memory(), f.device(1).memory_bytes), (50, 0));
        assert_eq!(f.most_memory(), Some((0, 50)));
        assert_eq!(f.first_holding_of(0), Some(a));
        assert_eq!(f.first_holding_of(1), None);
    }
}
