//! The peer slots of a [`crate::Peers`] table: one mutex per peer, found by
//! id with no lock shared between peers, while the table grows at run time
//! (a gateway's devices added without a restart).
//!
//! Slots live in segments that are allocated once and never move: a
//! datagram's path reads the segment it needs through a `OnceLock` (an
//! atomic load) and then locks only its peer's mutex. The first segment is
//! sized exactly ([`Slots::reserve`]: a gateway's device file, so memory per
//! device stays what docs/benchmarks.md states); every later one is at least
//! as large as all before it, so capacity at least doubles and
//! [`MAX_SEGMENTS`] covers every `u32` id. Unused slots hold a vacant peer
//! (`removed`), which every look-up by id treats as absent.

use crate::keys::PublicKey;
use crate::peer::Peer;
use std::sync::{Mutex, OnceLock};

/// Enough segments for 2^32 slots: from the second on, each at least doubles
/// the capacity.
const MAX_SEGMENTS: usize = 40;

/// The smallest segment a growing table allocates (a gateway adding devices
/// one at a time allocates rarely).
const MIN_GROWTH: usize = 64;

struct Segment {
    /// Id of its first slot.
    start: usize,
    peers: Box<[Mutex<Peer>]>,
}

/// Peer slots by id; grown only by the table's changes (one at a time, under
/// the table's directory mutex), read by every thread.
pub(crate) struct Slots {
    segments: Box<[OnceLock<Segment>]>,
}

/// A slot no peer has: removed, so `Peers::peer` skips it and its timer
/// entries (none) do nothing.
fn vacant() -> Mutex<Peer> {
    let mut p = Peer::new(PublicKey([0; 32]), String::new(), false);
    p.removed = true;
    Mutex::new(p)
}

impl Slots {
    /// No slots.
    pub(crate) fn new() -> Slots {
        Slots {
            segments: (0..MAX_SEGMENTS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The slot of id `i`, if allocated (vacant or not).
    pub(crate) fn get(&self, i: usize) -> Option<&Mutex<Peer>> {
        for seg in self.segments.iter() {
            let s = seg.get()?;
            if i < s.start + s.peers.len() {
                return s.peers.get(i - s.start);
            }
        }
        None
    }

    /// Slots allocated so far.
    pub(crate) fn capacity(&self) -> usize {
        self.segments
            .iter()
            .map_while(OnceLock::get)
            .last()
            .map_or(0, |s| s.start + s.peers.len())
    }

    /// Makes room for ids below `n`: a first segment of exactly `n` slots,
    /// or a new one at least as large as the capacity so far. The caller
    /// serialises growth (the table's directory mutex).
    pub(crate) fn reserve(&self, n: usize) {
        let cap = self.capacity();
        if n <= cap {
            return;
        }
        let len = if cap == 0 {
            n
        } else {
            (n - cap).max(cap).max(MIN_GROWTH)
        };
        let next = self
            .segments
            .iter()
            .find(|s| s.get().is_none())
            .expect("MAX_SEGMENTS doubling segments cover every u32 id");
        let segment = Segment {
            start: cap,
            peers: (0..len).map(|_| vacant()).collect(),
        };
        assert!(next.set(segment).is_ok(), "growth is serialised");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resolve_across_segments_and_capacity_doubles() {
        let s = Slots::new();
        assert!(s.get(0).is_none());
        s.reserve(3);
        assert_eq!(s.capacity(), 3, "the first segment is exact");
        s.reserve(2);
        assert_eq!(s.capacity(), 3, "already there");
        s.reserve(4);
        assert_eq!(s.capacity(), 3 + 64, "then at least MIN_GROWTH");
        s.reserve(68);
        assert_eq!(s.capacity(), 67 + 67, "then at least doubling");
        for i in 0..134 {
            let slot = s.get(i).unwrap();
            assert!(slot.lock().unwrap().removed, "vacant");
            slot.lock().unwrap().name = i.to_string();
        }
        assert!(s.get(134).is_none());
        for i in 0..134 {
            assert_eq!(s.get(i).unwrap().lock().unwrap().name, i.to_string());
        }
    }
}
