//! Bounds on handshake work under a flood: every initiation must take a token
//! from its source address's bucket and from a global bucket before any
//! Diffie-Hellman work is done (an initiation costs the responder four X25519
//! operations). The table of sources is bounded: when it is full, buckets that
//! have refilled completely (idle sources) are swept out, at most once a second;
//! until then initiations from new sources are refused.
//!
//! Chosen over WireGuard's cookie reply (MAC1/MAC2) for simplicity; the cost
//! is that a spoofed flood that exhausts the global bucket also delays genuine
//! devices' handshakes (their sessions, once up, are unaffected). Bucket
//! arithmetic is in integer nano-tokens, exact for the tests.

use crate::{Nanos, SECOND};
use std::collections::HashMap;
use std::net::IpAddr;

/// Limits on handshake initiations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Initiations per second from one source address (sustained).
    pub per_source_per_s: u64,
    /// Initiations one source may send at once.
    pub per_source_burst: u64,
    /// Initiations per second from everyone together.
    pub global_per_s: u64,
    /// Initiations everyone together may send at once.
    pub global_burst: u64,
    /// Most source addresses tracked at once.
    pub max_sources: usize,
}

impl Default for RateLimit {
    /// 10/s (burst 20) per source address; 1000/s (burst 2000) in all, about a
    /// quarter of a core of X25519 on the development machine; 65,536 sources.
    fn default() -> Self {
        RateLimit {
            per_source_per_s: 10,
            per_source_burst: 20,
            global_per_s: 1000,
            global_burst: 2000,
            max_sources: 65_536,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    nano_tokens: u64,
    last: Nanos,
}

impl Bucket {
    fn full(burst: u64, now: Nanos) -> Bucket {
        Bucket {
            nano_tokens: burst * SECOND,
            last: now,
        }
    }

    fn refill(&mut self, now: Nanos, per_s: u64, burst: u64) {
        let dt = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        self.nano_tokens = self
            .nano_tokens
            .saturating_add(dt.saturating_mul(per_s))
            .min(burst * SECOND);
    }

    fn take(&mut self, now: Nanos, per_s: u64, burst: u64) -> bool {
        self.refill(now, per_s, burst);
        if self.nano_tokens >= SECOND {
            self.nano_tokens -= SECOND;
            true
        } else {
            false
        }
    }
}

/// The handshake limiter of one responder.
#[derive(Debug)]
pub struct Limiter {
    cfg: RateLimit,
    sources: HashMap<IpAddr, Bucket>,
    global: Bucket,
    last_sweep: Option<Nanos>,
}

impl Limiter {
    /// A limiter with all buckets full.
    pub fn new(cfg: RateLimit, now: Nanos) -> Limiter {
        Limiter {
            cfg,
            sources: HashMap::new(),
            global: Bucket::full(cfg.global_burst, now),
            last_sweep: None,
        }
    }

    /// Takes a token for one initiation from `source`; false = refuse it.
    pub fn allow(&mut self, now: Nanos, source: IpAddr) -> bool {
        let c = self.cfg;
        if !self.sources.contains_key(&source) && self.sources.len() >= c.max_sources {
            self.sweep(now);
            if self.sources.len() >= c.max_sources {
                return false;
            }
        }
        let b = self
            .sources
            .entry(source)
            .or_insert_with(|| Bucket::full(c.per_source_burst, now));
        if !b.take(now, c.per_source_per_s, c.per_source_burst) {
            return false;
        }
        self.global.take(now, c.global_per_s, c.global_burst)
    }

    fn sweep(&mut self, now: Nanos) {
        if self.last_sweep.is_some_and(|t| now < t + SECOND) {
            return;
        }
        self.last_sweep = Some(now);
        let c = self.cfg;
        self.sources.retain(|_, b| {
            b.refill(now, c.per_source_per_s, c.per_source_burst);
            b.nano_tokens < c.per_source_burst * SECOND
        });
    }

    /// Source addresses tracked now.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(i: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i))
    }

    #[test]
    fn per_source_burst_then_rate() {
        let mut l = Limiter::new(RateLimit::default(), 0);
        let allowed = (0..100).filter(|_| l.allow(0, ip(1))).count();
        assert_eq!(allowed, 20); // the burst
        assert!(!l.allow(SECOND / 20, ip(1))); // 0.5 tokens refilled
        assert!(l.allow(SECOND / 10, ip(1))); // 1 token
        assert!(!l.allow(SECOND / 10, ip(1)));
        // another source is not affected
        assert!(l.allow(SECOND / 10, ip(2)));
        // one second later: 10 more
        let t = SECOND / 10 + SECOND;
        assert_eq!((0..100).filter(|_| l.allow(t, ip(1))).count(), 10);
    }

    #[test]
    fn global_cap_holds_across_many_sources() {
        let mut l = Limiter::new(RateLimit::default(), 0);
        let allowed = (0..10_000).filter(|&i| l.allow(0, ip(i))).count();
        assert_eq!(allowed, 2000);
        // 1 s later: 1000 more in all
        let allowed = (10_000..20_000).filter(|&i| l.allow(SECOND, ip(i))).count();
        assert_eq!(allowed, 1000);
    }

    #[test]
    fn source_table_is_bounded_and_idle_sources_are_swept() {
        let cfg = RateLimit {
            max_sources: 100,
            global_burst: 1_000_000,
            global_per_s: 1_000_000,
            ..RateLimit::default()
        };
        let mut l = Limiter::new(cfg, 0);
        for i in 0..1000 {
            let ok = l.allow(0, ip(i));
            assert_eq!(ok, i < 100, "source {i}");
        }
        assert_eq!(l.sources(), 100);
        // 2 s later every bucket (1 token used, 10/s) is full again: swept
        assert!(l.allow(2 * SECOND, ip(5000)));
        assert_eq!(l.sources(), 1);
        // a busy table (no idle buckets) refuses new sources and stays bounded
        for i in 0..99 {
            for _ in 0..20 {
                l.allow(2 * SECOND, ip(6000 + i));
            }
        }
        assert_eq!(l.sources(), 100);
        assert!(!l.allow(2 * SECOND + 1, ip(9999)));
        assert_eq!(l.sources(), 100);
    }
}
