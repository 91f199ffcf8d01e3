//! Rate/queue stage: drop-tail admission in front of the rate schedule.
//!
//! The queue holds every admitted packet that has not finished serialisation,
//! including the one on the wire. Occupancy is known from the finish times the
//! rate schedule hands out, so this stage keeps only (finish, size) pairs in a
//! ring buffer that stops growing once it reaches the queue limit.

use crate::rate::RateSchedule;
use crate::time::Nanos;
use std::collections::VecDeque;

/// Drop-tail limit. Default: 800 packets (the DChannel paper's setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueLimit {
    /// At most this many packets queued.
    Packets(u32),
    /// At most this many bytes queued.
    Bytes(u64),
    /// No limit.
    Unlimited,
}

impl Default for QueueLimit {
    fn default() -> Self {
        QueueLimit::Packets(800)
    }
}

/// The rate/queue stage: drop-tail queue in front of a rate schedule.
#[derive(Debug, Clone)]
pub struct RateQueue {
    limit: QueueLimit,
    rate: RateSchedule,
    backlog: VecDeque<(Nanos, u32)>,
    backlog_bytes: u64,
}

/// An admitted packet: when it leaves the link, and how many packets were
/// queued in front of it when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// When its last byte has left the link.
    pub finish: Nanos,
    /// Packets queued in front of it.
    pub depth: u32,
}

impl RateQueue {
    /// An empty queue with `limit` in front of `rate`.
    pub fn new(limit: QueueLimit, rate: RateSchedule) -> Self {
        let cap = match limit {
            QueueLimit::Packets(n) => n.min(4096) as usize,
            _ => 64,
        };
        RateQueue {
            limit,
            rate,
            backlog: VecDeque::with_capacity(cap),
            backlog_bytes: 0,
        }
    }

    /// Its drop-tail limit.
    pub fn limit(&self) -> QueueLimit {
        self.limit
    }

    /// Its rate schedule.
    pub fn schedule(&self) -> &RateSchedule {
        &self.rate
    }

    /// Packets not yet serialised at `now`.
    pub fn depth(&mut self, now: Nanos) -> u32 {
        self.expire(now);
        self.backlog.len() as u32
    }

    fn expire(&mut self, now: Nanos) {
        while let Some(&(f, s)) = self.backlog.front() {
            if f > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= s as u64;
        }
    }

    /// When the link is free of what is queued at `now`: the last queued
    /// packet's finish, or `now` if nothing waits (a prediction; the next
    /// packet's own serialisation is not included).
    pub fn free_at(&self, now: Nanos) -> Nanos {
        self.backlog.back().map_or(now, |&(f, _)| f.max(now))
    }

    /// Offer a packet arriving at `now`; `None` means drop-tail dropped it.
    pub fn offer(&mut self, now: Nanos, size: u32) -> Option<Admitted> {
        self.expire(now);
        let depth = self.backlog.len() as u32;
        let full = match self.limit {
            QueueLimit::Packets(n) => depth >= n,
            QueueLimit::Bytes(b) => self.backlog_bytes + size as u64 > b,
            QueueLimit::Unlimited => false,
        };
        if full {
            return None;
        }
        let finish = self.rate.finish(now, size);
        if finish > now {
            self.backlog.push_back((finish, size));
            self.backlog_bytes += size as u64;
        }
        Some(Admitted { finish, depth })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Capacity;
    use crate::time::NS_PER_MS;

    fn q(limit: QueueLimit) -> RateQueue {
        // 12 Mbit/s: a 1500 B packet takes 1 ms
        RateQueue::new(limit, RateSchedule::new(Capacity::Constant(12_000_000), 0))
    }

    #[test]
    fn burst_loses_exactly_the_excess() {
        let mut q = q(QueueLimit::Packets(10));
        let admitted = (0..25).filter(|_| q.offer(0, 1500).is_some()).count();
        assert_eq!(admitted, 10);
        // after 3.5 ms three packets have left: room for exactly three more
        let more = (0..5)
            .filter(|_| q.offer(3 * NS_PER_MS + NS_PER_MS / 2, 1500).is_some())
            .count();
        assert_eq!(more, 3);
    }

    #[test]
    fn depth_and_finish() {
        let mut q = q(QueueLimit::Packets(800));
        assert_eq!(
            q.offer(0, 1500),
            Some(Admitted {
                finish: NS_PER_MS,
                depth: 0
            })
        );
        assert_eq!(
            q.offer(0, 1500),
            Some(Admitted {
                finish: 2 * NS_PER_MS,
                depth: 1
            })
        );
        assert_eq!(q.depth(NS_PER_MS), 1);
        assert_eq!(q.depth(2 * NS_PER_MS), 0);
    }

    #[test]
    fn byte_limit() {
        let mut q = q(QueueLimit::Bytes(4000));
        assert!(q.offer(0, 1500).is_some());
        assert!(q.offer(0, 1500).is_some());
        assert!(q.offer(0, 1500).is_none()); // 4500 > 4000
        assert!(q.offer(0, 1000).is_some()); // 4000 fits exactly
    }

    #[test]
    fn unlimited_never_drops() {
        let mut q = q(QueueLimit::Unlimited);
        assert!((0..10_000).all(|_| q.offer(0, 1500).is_some()));
    }
}
