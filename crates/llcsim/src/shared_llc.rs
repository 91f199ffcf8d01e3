//! The cell's one LLC queue in one direction, shared by every user: a FIFO
//! draining at the capacity C with a drop-tail limit in bytes.
//!
//! It is the core's fluid queue ([`dchannel_core::llc_queue::LlcQueue`], the
//! same model each agent keeps of its own LLC), fed by every user's LLC packets
//! instead of one sender's. A packet arriving at `now` waits for the bytes
//! ahead of it: `wait = depth(now) / C` (its own transmission not included);
//! it overflows (is lost) when the bytes ahead plus its own exceed the limit.

use dchannel_core::llc_queue::LlcQueue;
use dchannel_core::Nanos;

/// What happened to one packet offered to the shared LLC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Offer {
    /// Queued; it waits this long (ns) before its transmission starts.
    Queued(f64),
    /// Over the drop-tail limit: lost.
    Overflow,
}

/// The shared LLC queue of one direction (see the module docs).
#[derive(Clone, Debug)]
pub struct SharedLlc {
    queue: LlcQueue,
    limit_bytes: f64,
}

impl SharedLlc {
    /// A queue draining at `bits_per_sec` that holds at most `limit_bytes`.
    pub fn new(bits_per_sec: f64, limit_bytes: u64) -> SharedLlc {
        SharedLlc {
            queue: LlcQueue::new(bits_per_sec),
            limit_bytes: limit_bytes as f64,
        }
    }

    /// Offers a packet of `bytes` at `now` (non-decreasing across calls).
    pub fn offer(&mut self, now: Nanos, bytes: usize) -> Offer {
        let ahead = self.queue.depth(now);
        if ahead + bytes as f64 > self.limit_bytes {
            return Offer::Overflow;
        }
        self.queue.enqueue(now, bytes);
        Offer::Queued(ahead / self.queue.rate())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dchannel_core::MS;

    fn wait_ms(o: Offer) -> f64 {
        match o {
            Offer::Queued(ns) => ns / MS as f64,
            Offer::Overflow => panic!("overflow"),
        }
    }

    #[test]
    fn second_of_two_simultaneous_mtu_packets_waits_one_transmission() {
        // C = 12 Mbit/s = 1.5 B/us: a 1500 B packet takes 1 ms to send, so of
        // two arriving together the second waits 1 ms, a third 2 ms.
        let mut q = SharedLlc::new(12e6, 1_000_000);
        assert_eq!(wait_ms(q.offer(0, 1500)), 0.0);
        assert!((wait_ms(q.offer(0, 1500)) - 1.0).abs() < 1e-9);
        assert!((wait_ms(q.offer(0, 1500)) - 2.0).abs() < 1e-9);
        // 0.5 ms later 2250 B are left ahead: 1.5 ms of wait
        assert!((wait_ms(q.offer(MS / 2, 100)) - 2.5).abs() < 1e-9);
        // after everything drained (4700 B = 3.13 ms), no wait
        assert_eq!(wait_ms(q.offer(10 * MS, 1500)), 0.0);
    }

    #[test]
    fn drop_tail_limit_counts_the_bytes_ahead_and_the_packet() {
        let mut q = SharedLlc::new(12e6, 3000);
        assert!(matches!(q.offer(0, 1500), Offer::Queued(_)));
        assert!(matches!(q.offer(0, 1500), Offer::Queued(_)));
        assert_eq!(q.offer(0, 1), Offer::Overflow);
        // 1 ms later one packet has gone: room for 1500 B again, not 1501
        assert_eq!(q.offer(MS, 1501), Offer::Overflow);
        assert!((wait_ms(q.offer(MS, 1500)) - 1.0).abs() < 1e-9);
    }
}
