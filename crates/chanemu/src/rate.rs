//! Rate stage: when does a packet finish serialisation on the link?
//!
//! Packets are served first-in first-out. For a constant rate and a per-second
//! series the link is a fluid server: a packet starts when it arrives or when the
//! previous one finishes, whichever is later, and takes size·8/rate (integrated
//! across second boundaries for a series — "60 Mbit/s at second n releases 7.5 KB
//! per ms"). A Mahimahi trace is served as mm-link does: each delivery opportunity
//! carries up to 1500 bytes; a packet may use the rest of an opportunity its
//! predecessor started, if it was already waiting then; unused bytes of an
//! opportunity are lost when nothing waits.
//!
//! The finish time is computed when the packet arrives; later arrivals cannot
//! change it (FIFO, no preemption), so the stage needs no timer of its own.

use crate::time::{Nanos, NS_PER_MS, NS_PER_S};
use crate::trace::capacity::CapacitySeries;
use crate::trace::mahimahi::{MahimahiTrace, OPPORTUNITY_BYTES};

/// The capacity of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Capacity {
    /// No rate limit.
    Unlimited,
    /// Bits per second.
    Constant(u64),
    /// A per-second series (bit/s per second, looped).
    Series(CapacitySeries),
    /// A Mahimahi trace (one 1500-byte opportunity per line, looped).
    Mahimahi(MahimahiTrace),
}

/// When each packet finishes serialisation under a capacity.
#[derive(Debug, Clone)]
pub struct RateSchedule {
    cap: Capacity,
    /// Start offset into the trace: run time t is trace time t + offset.
    offset: Nanos,
    /// Fluid servers: trace time at which the link becomes idle.
    busy_until: Nanos,
    /// Mahimahi: next unused opportunity (period, index) …
    mm_period: u64,
    mm_index: usize,
    /// … and the last used one (trace time, bytes left in it).
    mm_last: Option<(Nanos, u32)>,
}

impl RateSchedule {
    /// A schedule for `cap`, starting `offset` into its trace.
    pub fn new(cap: Capacity, offset: Nanos) -> Self {
        RateSchedule {
            cap,
            offset,
            busy_until: 0,
            mm_period: 0,
            mm_index: 0,
            mm_last: None,
        }
    }

    /// Its capacity.
    pub fn capacity(&self) -> &Capacity {
        &self.cap
    }

    /// Run time at which a packet of `size` bytes arriving at run time `arrival`
    /// has left the link. Must be called in arrival order.
    pub fn finish(&mut self, arrival: Nanos, size: u32) -> Nanos {
        let a = arrival + self.offset;
        let f = match &self.cap {
            Capacity::Unlimited => a,
            Capacity::Constant(bps) => {
                let s = a.max(self.busy_until);
                // round to nearest ns: no systematic bias over millions of packets
                let ns = (size as u128 * 8 * NS_PER_S as u128 + *bps as u128 / 2) / *bps as u128;
                self.busy_until = s + ns as u64;
                self.busy_until
            }
            Capacity::Series(series) => {
                let f = series_finish(&series.bps, a.max(self.busy_until), size);
                self.busy_until = f;
                f
            }
            Capacity::Mahimahi(_) => self.mahimahi_finish(a, size),
        };
        f - self.offset
    }

    fn mahimahi_finish(&mut self, a: Nanos, size: u32) -> Nanos {
        let Capacity::Mahimahi(tr) = &self.cap else {
            unreachable!()
        };
        let ops = &tr.opportunities_ms;
        let period = tr.period_ms() * NS_PER_MS;
        let at = |j: u64, k: usize| j * period + ops[k] * NS_PER_MS;
        let mut remaining = size;
        if let Some((t, left)) = self.mm_last {
            if a <= t && left > 0 {
                let used = left.min(remaining);
                remaining -= used;
                self.mm_last = Some((t, left - used));
                if remaining == 0 {
                    return t;
                }
            }
        }
        // Move the cursor to the first opportunity at or after the arrival.
        if at(self.mm_period, self.mm_index) < a {
            let j = a / period;
            if j > self.mm_period {
                self.mm_period = j;
                self.mm_index = 0;
            }
            let within = a - self.mm_period * period;
            let k = ops
                .partition_point(|&o| o * NS_PER_MS < within)
                .max(self.mm_index);
            if k == ops.len() {
                self.mm_period += 1;
                self.mm_index = 0;
            } else {
                self.mm_index = k;
            }
        }
        loop {
            let t = at(self.mm_period, self.mm_index);
            self.mm_index += 1;
            if self.mm_index == ops.len() {
                self.mm_index = 0;
                self.mm_period += 1;
            }
            let used = OPPORTUNITY_BYTES.min(remaining);
            remaining -= used;
            if remaining == 0 {
                self.mm_last = Some((t, OPPORTUNITY_BYTES - used));
                return t;
            }
        }
    }
}

/// Fluid service of `size` bytes starting at trace time `start` over a looped
/// per-second series of rates (bit/s).
fn series_finish(bps: &[u64], mut start: Nanos, size: u32) -> Nanos {
    // Remaining work in bit·ns/s: a rate r (bit/s) removes r per ns.
    let mut work = size as u128 * 8 * NS_PER_S as u128;
    loop {
        let sec = start / NS_PER_S;
        let r = bps[(sec % bps.len() as u64) as usize] as u128;
        let end = (sec + 1) * NS_PER_S;
        let cap = r * (end - start) as u128;
        if r > 0 && work <= cap {
            return start + work.div_ceil(r) as u64;
        }
        work -= cap;
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_US;

    #[test]
    fn constant_rate_back_to_back_and_idle() {
        // 12 Mbit/s: 1500 B = 12 000 bit → 1 ms each.
        let mut r = RateSchedule::new(Capacity::Constant(12_000_000), 0);
        assert_eq!(r.finish(0, 1500), NS_PER_MS);
        assert_eq!(r.finish(0, 1500), 2 * NS_PER_MS); // queued behind the first
        assert_eq!(
            r.finish(10 * NS_PER_MS, 750),
            10 * NS_PER_MS + 500 * NS_PER_US
        ); // idle link
           // 1 Gbit/s: 1500 B → 12 µs exactly
        let mut g = RateSchedule::new(Capacity::Constant(1_000_000_000), 0);
        assert_eq!(g.finish(5, 1500), 5 + 12_000);
    }

    #[test]
    fn series_changes_rate_on_the_second() {
        // 8 Mbit/s in second 0, 16 Mbit/s in second 1 (loops).
        let s = CapacitySeries {
            bps: vec![8_000_000, 16_000_000],
        };
        let mut r = RateSchedule::new(Capacity::Series(s.clone()), 0);
        // 1500 B = 12 000 bit starting at 0.9995 s: 4000 bit at 8 Mbit/s in 0.5 ms,
        // the other 8000 bit at 16 Mbit/s in 0.5 ms → 1.0005 s.
        assert_eq!(r.finish(999_500_000, 1500), 1_000_500_000);
        // at 1.5 s (16 Mbit/s) it takes 0.75 ms
        assert_eq!(r.finish(1_500_000_000, 1500), 1_500_750_000);
        // at 2.5 s the series has looped back to 8 Mbit/s: 1.5 ms
        assert_eq!(r.finish(2_500_000_000, 1500), 2_501_500_000);
        // start offset 1 s: run time 0 is second 1 (16 Mbit/s)
        let mut o = RateSchedule::new(Capacity::Series(s), NS_PER_S);
        assert_eq!(o.finish(0, 1500), 750_000);
    }

    #[test]
    fn series_skips_zero_seconds() {
        let s = CapacitySeries {
            bps: vec![0, 12_000_000],
        };
        let mut r = RateSchedule::new(Capacity::Series(s), 0);
        assert_eq!(r.finish(100, 1500), NS_PER_S + NS_PER_MS);
    }

    #[test]
    fn mahimahi_opportunities_partial_use_and_loop() {
        // opportunities at 1, 1, 2, 4 ms; period 4 ms
        let tr = MahimahiTrace {
            opportunities_ms: vec![1, 1, 2, 4],
        };
        let mut r = RateSchedule::new(Capacity::Mahimahi(tr.clone()), 0);
        // two 1000 B packets at t=0: first uses 1000 of the first opportunity at 1 ms;
        // the second uses the remaining 500 of it and 500 of the second (also at 1 ms)
        assert_eq!(r.finish(0, 1000), NS_PER_MS);
        assert_eq!(r.finish(0, 1000), NS_PER_MS);
        // a 100 B packet arriving at 1 ms may still use the rest of that opportunity
        assert_eq!(r.finish(NS_PER_MS, 100), NS_PER_MS);
        // arriving at 1.5 ms: the leftover is gone, next opportunity is at 2 ms
        assert_eq!(r.finish(1_500_000, 1500), 2 * NS_PER_MS);
        // 3000 B at 2.5 ms: opportunities at 4 ms and (next period) 4+1 = 5 ms
        assert_eq!(r.finish(2_500_000, 3000), 5 * NS_PER_MS);
        // far in the future: t = 401.5 ms → next opportunity at 402 ms (period 100, index 2)
        assert_eq!(r.finish(401_500_000, 1), 402 * NS_PER_MS);
        // offset 2 ms: run time 0 = trace time 2 ms → the opportunity at 2 ms is at run 0
        let mut o = RateSchedule::new(Capacity::Mahimahi(tr), 2 * NS_PER_MS);
        assert_eq!(o.finish(0, 1500), 0);
        assert_eq!(o.finish(0, 1500), 2 * NS_PER_MS);
    }

    #[test]
    fn unlimited_is_immediate() {
        let mut r = RateSchedule::new(Capacity::Unlimited, 7);
        assert_eq!(r.finish(123, 1500), 123);
    }
}
