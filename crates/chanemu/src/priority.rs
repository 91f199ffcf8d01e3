//! Rate/queue stage with control packets first (`--control-first`, rule (d) of
//! issue 41, docs/llc_sharing.md): the shared LLC's one queue, split into two
//! classes ([`Class`], `wire_class.rs`), served by one link at the rate
//! schedule. Strict priority, non-preemptive: whenever the link is free it
//! takes the oldest control packet if one is waiting, else the oldest bulk
//! packet; a packet on the wire is never interrupted. Within a class, first
//! come first served. The drop-tail limit counts both classes together (the
//! same [`QueueLimit`] as the FIFO stage, `queue.rs`).
//!
//! Unlike the FIFO stage, a packet's finish time is not known when it arrives
//! (a later control packet may overtake a waiting bulk one), so this stage is
//! lazy: [`offer`](PriorityQueue::offer) queues, [`poll`](PriorityQueue::poll)
//! hands out the packets whose serialisation has finished by `now`, in the
//! order they finished, and [`next_finish`](PriorityQueue::next_finish) says
//! when to come back. Sans-I/O: time is an argument.

use crate::queue::QueueLimit;
use crate::rate::RateSchedule;
use crate::time::Nanos;
use crate::wire_class::Class;
use std::collections::VecDeque;

/// A packet waiting for (or on) the link.
#[derive(Debug, Clone)]
struct Waiting<P> {
    payload: P,
    size: u32,
    arrival: Nanos,
    depth: u32,
    class: Class,
}

/// A packet that has left the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served<P> {
    /// The driver's packet.
    pub payload: P,
    /// Its size in bytes.
    pub size: u32,
    /// When it entered the queue.
    pub arrival: Nanos,
    /// When its last byte left the link.
    pub finish: Nanos,
    /// Packets queued in front of it (both classes, and the one on the wire)
    /// when it arrived.
    pub depth: u32,
    /// Its class.
    pub class: Class,
}

/// The two-class stage (see the module docs).
#[derive(Debug, Clone)]
pub struct PriorityQueue<P> {
    limit: QueueLimit,
    rate: RateSchedule,
    /// Waiting packets per class (index = `Class as usize`).
    waiting: [VecDeque<Waiting<P>>; 2],
    /// The packet being serialised and when it finishes.
    on_wire: Option<(Nanos, Waiting<P>)>,
    /// Finished packets not yet handed out, in finish order.
    done: VecDeque<Served<P>>,
    /// Bytes waiting or on the wire.
    bytes: u64,
}

impl<P> PriorityQueue<P> {
    /// An empty queue with `limit` in front of `rate`.
    pub fn new(limit: QueueLimit, rate: RateSchedule) -> Self {
        PriorityQueue {
            limit,
            rate,
            waiting: [VecDeque::new(), VecDeque::new()],
            on_wire: None,
            done: VecDeque::new(),
            bytes: 0,
        }
    }

    /// Packets waiting or on the wire at `now`.
    pub fn depth(&mut self, now: Nanos) -> u32 {
        self.advance(now);
        self.queued()
    }

    /// Packets waiting, on the wire or served but not yet handed out.
    pub fn len(&self) -> usize {
        self.queued() as usize + self.done.len()
    }

    /// Whether nothing is held at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn queued(&self) -> u32 {
        (self.waiting[0].len() + self.waiting[1].len() + usize::from(self.on_wire.is_some())) as u32
    }

    /// Offer a packet of `class` arriving at `now` (calls in time order);
    /// `Err` hands it back when the queue is full (drop-tail). `Ok`: the
    /// packets queued in front of it.
    pub fn offer(&mut self, now: Nanos, size: u32, class: Class, payload: P) -> Result<u32, P> {
        self.advance(now);
        let depth = self.queued();
        let full = match self.limit {
            QueueLimit::Packets(n) => depth >= n,
            QueueLimit::Bytes(b) => self.bytes + u64::from(size) > b,
            QueueLimit::Unlimited => false,
        };
        if full {
            return Err(payload);
        }
        self.bytes += u64::from(size);
        self.waiting[class as usize].push_back(Waiting {
            payload,
            size,
            arrival: now,
            depth,
            class,
        });
        if self.on_wire.is_none() {
            self.start_next(now);
        }
        Ok(depth)
    }

    /// The next packet that has left the link by `now`, in finish order.
    pub fn poll(&mut self, now: Nanos) -> Option<Served<P>> {
        self.advance(now);
        self.done.pop_front()
    }

    /// When [`poll`](Self::poll) next has a packet: at once if one is
    /// finished, else when the one on the wire finishes.
    pub fn next_finish(&self) -> Option<Nanos> {
        match self.done.front() {
            Some(s) => Some(s.finish),
            None => self.on_wire.as_ref().map(|(f, _)| *f),
        }
    }

    /// When the link would be free of everything queued at `now` (a
    /// prediction: nothing is taken; no later arrival is assumed).
    pub fn free_at(&self, now: Nanos) -> Nanos {
        let mut rate = self.rate.clone();
        // waiting packets exist only behind one on the wire, and start when it ends
        let mut free = self.on_wire.as_ref().map_or(now, |(f, _)| *f);
        for w in self.waiting.iter().flatten() {
            free = rate.finish(free, w.size);
        }
        free.max(now)
    }

    /// Completes every packet whose serialisation ends by `now`, starting the
    /// next one (control first) the moment the link frees.
    fn advance(&mut self, now: Nanos) {
        while let Some((finish, _)) = &self.on_wire {
            if *finish > now {
                return;
            }
            let finish = *finish;
            let (_, w) = self.on_wire.take().expect("on the wire");
            self.bytes -= u64::from(w.size);
            self.done.push_back(Served {
                payload: w.payload,
                size: w.size,
                arrival: w.arrival,
                finish,
                depth: w.depth,
                class: w.class,
            });
            self.start_next(finish);
        }
    }

    /// Puts the next packet (control first) on the free link at `at`.
    fn start_next(&mut self, at: Nanos) {
        let next = match self.waiting[Class::Control as usize].pop_front() {
            Some(w) => Some(w),
            None => self.waiting[Class::Bulk as usize].pop_front(),
        };
        if let Some(w) = next {
            let finish = self.rate.finish(at, w.size);
            self.on_wire = Some((finish, w));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Capacity;
    use crate::time::NS_PER_MS as MS;

    /// 12 Mbit/s: 1500 B take 1 ms, 60 B take 40 µs.
    fn q(limit: QueueLimit) -> PriorityQueue<u32> {
        PriorityQueue::new(limit, RateSchedule::new(Capacity::Constant(12_000_000), 0))
    }

    fn drain(q: &mut PriorityQueue<u32>, now: Nanos) -> Vec<(u32, Nanos)> {
        std::iter::from_fn(|| q.poll(now))
            .map(|s| (s.payload, s.finish))
            .collect()
    }

    #[test]
    fn a_control_packet_overtakes_waiting_bulk_but_not_the_one_on_the_wire() {
        let mut q = q(QueueLimit::Packets(800));
        // three 1500 B bulk packets at 0: #1 on the wire until 1 ms, #2 and #3 wait
        for id in 1..=3 {
            assert_eq!(q.offer(0, 1500, Class::Bulk, id), Ok(id - 1));
        }
        // a 60 B ACK at 0.5 ms: after #1 (non-preemptive), before #2:
        // 1 ms + 40 µs; then #2 at 2.04 ms, #3 at 3.04 ms
        assert_eq!(q.offer(MS / 2, 60, Class::Control, 9), Ok(3));
        assert_eq!(q.next_finish(), Some(MS));
        assert_eq!(drain(&mut q, MS - 1), vec![]);
        let ack = MS + 40_000;
        assert_eq!(
            drain(&mut q, 10 * MS),
            vec![(1, MS), (9, ack), (2, ack + MS), (3, ack + 2 * MS)]
        );
        assert_eq!((q.next_finish(), q.depth(10 * MS)), (None, 0));
    }

    #[test]
    fn within_a_class_first_come_first_served_and_an_idle_link_starts_at_arrival() {
        let mut q = q(QueueLimit::Packets(800));
        q.offer(0, 1500, Class::Control, 1).unwrap();
        q.offer(0, 1500, Class::Control, 2).unwrap();
        q.offer(0, 1500, Class::Bulk, 3).unwrap();
        q.offer(0, 1500, Class::Control, 4).unwrap();
        assert_eq!(
            drain(&mut q, 10 * MS),
            vec![(1, MS), (2, 2 * MS), (4, 3 * MS), (3, 4 * MS)]
        );
        // the link idles from 4 ms; a packet at 20 ms finishes at 21 ms
        q.offer(20 * MS, 1500, Class::Bulk, 5).unwrap();
        assert_eq!(drain(&mut q, 21 * MS), vec![(5, 21 * MS)]);
    }

    #[test]
    fn the_limit_counts_both_classes_and_the_packet_on_the_wire() {
        let mut q = q(QueueLimit::Packets(3));
        for id in 0..3 {
            q.offer(0, 1500, Class::Bulk, id).unwrap();
        }
        // full: even a control packet is dropped (drop-tail, no push-out)
        assert_eq!(q.offer(0, 60, Class::Control, 9), Err(9));
        // at 1 ms #0 has left: room for one
        assert_eq!(q.offer(MS, 60, Class::Control, 9), Ok(2));
        let mut b = PriorityQueue::<u32>::new(
            QueueLimit::Bytes(3000),
            RateSchedule::new(Capacity::Constant(12_000_000), 0),
        );
        b.offer(0, 1500, Class::Bulk, 0).unwrap();
        b.offer(0, 1400, Class::Bulk, 1).unwrap();
        assert_eq!(b.offer(0, 101, Class::Control, 2), Err(2));
        assert_eq!(b.offer(0, 100, Class::Control, 3), Ok(2));
    }

    #[test]
    fn free_at_predicts_without_taking() {
        let mut q = q(QueueLimit::Packets(800));
        q.offer(0, 1500, Class::Bulk, 1).unwrap();
        q.offer(0, 1500, Class::Control, 2).unwrap();
        assert_eq!(q.free_at(0), 2 * MS);
        assert_eq!(q.free_at(0), 2 * MS);
        assert_eq!(q.free_at(5 * MS), 5 * MS);
        assert_eq!(drain(&mut q, 2 * MS), vec![(1, MS), (2, 2 * MS)]);
    }
}
