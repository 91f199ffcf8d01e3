//! Virtual LLC queue: the bytes a sender has put on the LLC that the channel
//! has not yet drained, assuming it drains at the configured rate. This is the
//! paper's gateway method for `queue_llc` in Algorithm 1 (NSDI'23 §4.1): the
//! agent cannot see the radio queue, so it models it.

use crate::Nanos;

/// The virtual LLC queue of one sender (see the module docs).
#[derive(Clone, Debug)]
pub struct LlcQueue {
    /// Drain rate in bytes per nanosecond.
    rate: f64,
    backlog: f64,
    last: Nanos,
}

impl LlcQueue {
    /// A queue draining at `bits_per_sec`.
    pub fn new(bits_per_sec: f64) -> LlcQueue {
        assert!(bits_per_sec > 0.0, "LLC rate must be positive");
        LlcQueue {
            rate: bits_per_sec / 8.0 / 1e9,
            backlog: 0.0,
            last: 0,
        }
    }

    /// Bytes per nanosecond.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    fn drain(&mut self, now: Nanos) {
        if now > self.last {
            let dt = (now - self.last) as f64;
            self.backlog = (self.backlog - dt * self.rate).max(0.0);
            self.last = now;
        }
    }

    /// Queued bytes at `now`.
    pub fn depth(&mut self, now: Nanos) -> f64 {
        self.drain(now);
        self.backlog
    }

    /// When the queue will be empty if nothing more is added (the backlog
    /// over the rate after the last change). One number says the depth at any
    /// later time, so another thread can follow the queue through a single
    /// atomic (rule (c) of crate::llc_share).
    pub fn empty_at(&self) -> Nanos {
        self.last + (self.backlog / self.rate).round() as Nanos
    }

    /// Adds a packet of `bytes` put on the LLC at `now`.
    pub fn enqueue(&mut self, now: Nanos, bytes: usize) {
        self.drain(now);
        self.backlog += bytes as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    #[test]
    fn drains_at_configured_rate() {
        // 2 Mbit/s = 250 bytes per ms (NSDI'23 footnote: LLC ~ 250 B/ms).
        let mut q = LlcQueue::new(2e6);
        q.enqueue(0, 1000);
        assert!((q.depth(MS) - 750.0).abs() < 1e-6);
        assert!((q.depth(3 * MS) - 250.0).abs() < 1e-6);
        assert_eq!(q.depth(10 * MS), 0.0);
        q.enqueue(10 * MS, 500);
        q.enqueue(10 * MS, 500);
        assert!((q.depth(12 * MS) - 500.0).abs() < 1e-6);
    }

    #[test]
    fn empty_at_is_when_the_backlog_has_drained() {
        // 1000 B at 250 B/ms from t=2 ms: empty at 6 ms; empty queue: its last change
        let mut q = LlcQueue::new(2e6);
        assert_eq!(q.empty_at(), 0);
        q.enqueue(2 * MS, 1000);
        assert_eq!(q.empty_at(), 6 * MS);
        assert!((q.depth(3 * MS) - 750.0).abs() < 1e-6);
        assert_eq!(q.empty_at(), 6 * MS);
    }

    #[test]
    fn time_going_backwards_does_not_refill() {
        let mut q = LlcQueue::new(2e6);
        q.enqueue(5 * MS, 100);
        assert_eq!(q.depth(MS), 100.0);
    }
}
