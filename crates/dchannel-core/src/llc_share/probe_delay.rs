//! Rule (c): a client learns the shared LLC's queue from its probes.
//!
//! Each LLC probe RTT sample (NSDI'23 §4.2, [`crate::rtt`]) is first cleared of
//! the sender's own queue — the bytes its own virtual queue
//! ([`crate::llc_queue::LlcQueue`]) held when the probe was sent, over C:
//!
//! ```text
//! clean  = rtt - own_bytes / C
//! base   = pinned base RTT, else the smallest `clean` seen so far
//! sample = (clean - base) * C           bytes queued by the other users
//! ```
//!
//! The estimate of the other users' queue jumps up to a higher sample at once
//! (sending into a queue we underrate makes packets late, which is what
//! Algorithm 1 exists to avoid) and decays towards a lower one by
//! `fall_gain` of the gap per probe (a queue the probes show draining is let go
//! gradually, so one lucky probe does not clear it). Algorithm 1's `queue_llc`
//! is then the sender's own virtual queue plus this estimate
//! ([`SharedLlcDelay::queue_llc`]).
//!
//! The RTT mixes both directions' queues; attributing all of it to the
//! direction we send in overrates the queue, which errs towards the HBC. The
//! estimate changes only when a probe says so: no clock is needed.

use super::ConfigError;
use crate::Nanos;

/// Settings of the shared-delay estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SharedDelayConfig {
    capacity_bps: f64,
    base_rtt: Option<Nanos>,
    fall_gain: f64,
}

impl SharedDelayConfig {
    /// An LLC of `capacity_bps` (> 0), its base RTT learned from the samples,
    /// and a fall gain of 1/2 per probe.
    pub fn new(capacity_bps: f64) -> Result<SharedDelayConfig, ConfigError> {
        if !(capacity_bps.is_finite() && capacity_bps > 0.0) {
            return Err(ConfigError {
                field: "capacity_bps",
                expected: "a positive, finite LLC capacity in bits/s",
            });
        }
        Ok(SharedDelayConfig {
            capacity_bps,
            base_rtt: None,
            fall_gain: 0.5,
        })
    }

    /// Uses `rtt` as the LLC's base RTT instead of learning it (e.g. the
    /// `--pin-llc-rtt` setting).
    pub fn with_base_rtt(self, rtt: Nanos) -> SharedDelayConfig {
        SharedDelayConfig {
            base_rtt: Some(rtt),
            ..self
        }
    }

    /// Moves the estimate `gain` (in (0, 1]) of the way to a lower sample.
    pub fn with_fall_gain(self, gain: f64) -> Result<SharedDelayConfig, ConfigError> {
        if !(gain > 0.0 && gain <= 1.0) {
            return Err(ConfigError {
                field: "fall_gain",
                expected: "a fraction in (0, 1]",
            });
        }
        Ok(SharedDelayConfig {
            fall_gain: gain,
            ..self
        })
    }
}

/// Rule (c): the other users' LLC queue, estimated from probes (module docs).
#[derive(Clone, Debug)]
pub struct SharedLlcDelay {
    cfg: SharedDelayConfig,
    /// C in bytes per nanosecond.
    bytes_per_ns: f64,
    /// Smallest cleared RTT seen (the learned base).
    learned_base: Option<Nanos>,
    /// Other users' queue, bytes.
    others: f64,
    samples: u64,
}

impl SharedLlcDelay {
    /// An estimator with no sample yet (other users' queue 0).
    pub fn new(cfg: SharedDelayConfig) -> SharedLlcDelay {
        SharedLlcDelay {
            bytes_per_ns: cfg.capacity_bps / 8.0 / 1e9,
            cfg,
            learned_base: None,
            others: 0.0,
            samples: 0,
        }
    }

    /// An LLC probe came back after `rtt`; `own_queued_bytes` is what the
    /// sender's own virtual LLC queue held when the probe was sent.
    pub fn sample(&mut self, rtt: Nanos, own_queued_bytes: f64) {
        let own_delay = (own_queued_bytes.max(0.0) / self.bytes_per_ns).round() as Nanos;
        let clean = rtt.saturating_sub(own_delay);
        let learned = self.learned_base.map_or(clean, |b| b.min(clean));
        self.learned_base = Some(learned);
        let base = self.cfg.base_rtt.unwrap_or(learned);
        let x = clean.saturating_sub(base) as f64 * self.bytes_per_ns;
        self.others = if x >= self.others {
            x
        } else {
            self.others + self.cfg.fall_gain * (x - self.others)
        };
        self.samples += 1;
    }

    /// Bytes the other users are estimated to have queued on the LLC.
    pub fn others_queue(&self) -> f64 {
        self.others
    }

    /// Algorithm 1's `queue_llc` under rule (c): the sender's own virtual
    /// queue depth plus the other users' estimated queue.
    pub fn queue_llc(&self, own_depth: f64) -> f64 {
        own_depth + self.others
    }

    /// The base RTT in use (pinned, else learned; `None` before any sample).
    pub fn base_rtt(&self) -> Option<Nanos> {
        self.cfg.base_rtt.or(self.learned_base)
    }

    /// Probe samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llc_queue::LlcQueue;
    use crate::MS;

    /// 2 Mbit/s LLC: 250 bytes per ms (NSDI'23 §4.1 footnote).
    fn two_mbit() -> SharedLlcDelay {
        SharedLlcDelay::new(SharedDelayConfig::new(2e6).unwrap())
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        for c in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(SharedDelayConfig::new(c).unwrap_err().field, "capacity_bps");
        }
        let cfg = SharedDelayConfig::new(2e6).unwrap();
        for g in [0.0, 1.5, f64::NAN] {
            let e = cfg.with_fall_gain(g).unwrap_err();
            assert_eq!(
                e.to_string(),
                "LLC sharing: fall_gain: expected a fraction in (0, 1]"
            );
        }
    }

    #[test]
    fn excess_rtt_becomes_other_users_bytes_and_decays_when_draining() {
        let mut d = two_mbit();
        assert_eq!((d.others_queue(), d.base_rtt()), (0.0, None));
        // idle LLC: 10 ms is the base, nobody queued
        d.sample(10 * MS, 0.0);
        assert_eq!((d.others_queue(), d.base_rtt()), (0.0, Some(10 * MS)));
        // 16 ms with 250 B of our own queued (1 ms of it): 15 ms clean,
        // 5 ms over the base = 5 x 250 = 1250 B of other users' queue (jump)
        d.sample(16 * MS, 250.0);
        assert!(close(d.others_queue(), 1250.0));
        // draining: 12 ms -> 500 B; halfway from 1250 = 875
        d.sample(12 * MS, 0.0);
        assert!(close(d.others_queue(), 875.0));
        // back at the base: 0 B sample -> 437.5
        d.sample(10 * MS, 0.0);
        assert!(close(d.others_queue(), 437.5));
        // a higher sample again: 13 ms -> 750 B, taken at once
        d.sample(13 * MS, 0.0);
        assert!(close(d.others_queue(), 750.0));
        assert_eq!(d.samples(), 5);
    }

    #[test]
    fn our_own_queue_is_not_counted_twice() {
        let mut d = two_mbit();
        d.sample(10 * MS, 0.0);
        // 14 ms, all of it our own 1000 B (4 ms): nobody else is queued
        d.sample(14 * MS, 1000.0);
        assert_eq!(d.others_queue(), 0.0);
        // more of our own bytes than the RTT covers: no negative queue
        d.sample(10 * MS, 10_000.0);
        assert_eq!(d.others_queue(), 0.0);
    }

    #[test]
    fn a_lower_rtt_lowers_the_learned_base_but_not_a_pinned_one() {
        let mut d = two_mbit();
        d.sample(12 * MS, 0.0);
        d.sample(8 * MS, 0.0);
        assert_eq!(d.base_rtt(), Some(8 * MS));
        d.sample(10 * MS, 0.0); // 2 ms over 8 ms: 500 B
        assert!(close(d.others_queue(), 500.0));

        let cfg = SharedDelayConfig::new(2e6)
            .unwrap()
            .with_base_rtt(10 * MS)
            .with_fall_gain(1.0)
            .unwrap();
        let mut p = SharedLlcDelay::new(cfg);
        // pinned 10 ms: the first sample already counts: 14 ms -> 1000 B
        p.sample(14 * MS, 0.0);
        assert!(close(p.others_queue(), 1000.0));
        // below the pinned base: no queue, and gain 1 lets go at once
        p.sample(9 * MS, 0.0);
        assert_eq!((p.others_queue(), p.base_rtt()), (0.0, Some(10 * MS)));
    }

    #[test]
    fn queue_llc_adds_others_to_the_own_virtual_queue() {
        // NSDI'23 Algorithm 1 with the §4.1 footnote's numbers (HBC/LLC
        // one-way 20/5 ms, LLC 250 B/ms): a lone packet's reward
        // 15 ms - (size + queue_llc) / 250 B/ms is negative past 3750 B.
        let mut own = LlcQueue::new(2e6);
        own.enqueue(0, 1200);
        let mut d = two_mbit();
        d.sample(10 * MS, 0.0);
        d.sample(15 * MS, 0.0); // 5 ms over the base: 1250 B of others
        let own_depth = own.depth(0);
        // no coordination (rule a): 1400 + 1200 = 2600 B <= 3750: LLC
        assert!(1400.0 + own_depth <= 3750.0);
        // rule (c): 1400 + 1200 + 1250 = 3850 B > 3750: Algorithm 1 picks HBC
        assert!(close(d.queue_llc(own_depth), 2450.0));
        assert!(1400.0 + d.queue_llc(own_depth) > 3750.0);
    }
}
