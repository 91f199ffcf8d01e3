//! CellReplay's heavy-PDO link (mm-cellular's `CellularQueue::rationalize` and
//! `put_packet_to_link_queue` in CellReplay's `src/frontend/cellular_queue.cc`):
//! Mahimahi's link with 1400-byte delivery opportunities from a `*-heavy-pdo` trace.
//!
//! The rule, in whole ms: a packet entering at `r` is carried by opportunities
//! strictly after `r` (mm-cellular burns those at or before `r`, `rationalize(now)`,
//! before it enqueues the packet); bytes flow first-in first-out, a packet may use
//! what its predecessor left of an opportunity later than `r`, and bytes of an
//! opportunity nothing waits for are lost. Opportunity `k` of loop `j` is at
//! `base + j·period + trace[k]`, period = the trace's last value
//! (`use_a_delivery_opportunity`).

use crate::trace::cellreplay::CellReplayDir;
use std::sync::Arc;

/// Bytes one PDO carries (mm-cellular's `PACKET_SIZE`).
pub const PDO_BYTES: u32 = 1400;

/// The heavy-PDO link of one direction.
#[derive(Debug, Clone)]
pub struct PdoLink {
    /// The trace directory (its `heavy` trace).
    tr: Arc<CellReplayDir>,
    /// Run ms of the trace's time 0.
    base: i64,
    /// Next unburnt opportunity (loop, index).
    cursor: (i64, usize),
    /// The last used opportunity (time, bytes left in it).
    partial: Option<(i64, u32)>,
}

impl PdoLink {
    /// A link replaying `tr.heavy` whose time 0 is run ms `base`.
    pub fn new(tr: Arc<CellReplayDir>, base: i64) -> Self {
        PdoLink {
            tr,
            base,
            cursor: (0, 0),
            partial: None,
        }
    }

    /// When (run ms) the last byte of `size` bytes entering at run ms `r` leaves.
    /// Must be called in entry order.
    pub fn deliver(&mut self, r: i64, size: u32) -> i64 {
        let ops = &self.tr.heavy.opportunities_ms;
        let period = self.tr.heavy.period_ms() as i64;
        let base = self.base;
        let at = |(j, k): (i64, usize)| base + j * period + ops[k] as i64;
        let mut remaining = size;
        if let Some((pt, left)) = self.partial {
            if pt > r && left > 0 {
                let used = left.min(remaining);
                remaining -= used;
                self.partial = Some((pt, left - used));
                if remaining == 0 {
                    return pt;
                }
            }
        }
        // burn the opportunities at or before r
        if at(self.cursor) <= r {
            let rel = r - base;
            let j = rel.div_euclid(period).max(self.cursor.0);
            let k = if j > self.cursor.0 { 0 } else { self.cursor.1 };
            let within = rel - j * period;
            let k = ops.partition_point(|&o| o as i64 <= within).max(k);
            self.cursor = if k == ops.len() { (j + 1, 0) } else { (j, k) };
        }
        loop {
            let pt = at(self.cursor);
            self.cursor.1 += 1;
            if self.cursor.1 == ops.len() {
                self.cursor = (self.cursor.0 + 1, 0);
            }
            let used = PDO_BYTES.min(remaining);
            remaining -= used;
            if remaining == 0 {
                self.partial = Some((pt, PDO_BYTES - used));
                return pt;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::cellreplay::{HeavyTrace, LightTrace};
    use std::path::Path;

    fn link(ops: &[u64], base: i64) -> PdoLink {
        let tr = CellReplayDir {
            light: LightTrace::parse(Path::new("l"), "0 0 0\n1 0 0\n2 0 0\n", 0).unwrap(),
            heavy: HeavyTrace {
                opportunities_ms: ops.to_vec(),
            },
            offsets: None,
        };
        PdoLink::new(Arc::new(tr), base)
    }

    #[test]
    fn opportunities_strictly_after_entry_shared_and_looped() {
        // rationalize(now) burns opportunities ≤ now before the packet is enqueued
        let mut l = link(&[10, 10, 20, 40], 100);
        assert_eq!(l.deliver(110, 1400), 120); // both at 110 burnt
                                               // 700 + 700 B: the second shares what the first left of 140 (entered before it)
        assert_eq!(l.deliver(121, 700), 140);
        assert_eq!(l.deliver(139, 700), 140);
        // entering at 140: nothing left of it anyway; next loop (period 40) at 150, 150
        assert_eq!(l.deliver(140, 2000), 150);
        // 600 B left of 150 are lost to a packet entering at 150 → 160
        assert_eq!(l.deliver(150, 100), 160);
        // far ahead: 1000 ms = 25 loops later, 40·27 + 100 = 1180 → the 1190 one
        assert_eq!(l.deliver(1185, 1), 1190);
    }
}
