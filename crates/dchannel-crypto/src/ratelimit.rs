//! Bounds on handshake work: every initiation that passed its MAC checks
//! (mac1 always; mac2 too when the responder is under load: crate::mac,
//! crate::cookie) must take a token from its source address's bucket and from
//! a global bucket before any Diffie-Hellman work is done (an initiation costs
//! the responder four X25519 operations).
//!
//! The responder is **under load** while initiations that passed mac1 arrive
//! faster than the global budget serves them: a meter with the global
//! bucket's rate and burst is drained by every such initiation (admitted,
//! refused or answered with a cookie alike), and the responder is under load
//! while it is below half its burst and for [`UNDER_LOAD_HOLD`] after
//! (WireGuard keeps its flag 1 s too). Under load only initiations with a
//! valid mac2 reach the buckets; a sustained flood with valid mac1 keeps the
//! meter empty, so it gets cookie replies, not Diffie-Hellman work.
//!
//! The table of sources is bounded and never locks anyone out: when it is
//! full, buckets that have refilled completely (idle sources) are swept out,
//! at most once a second, and if that frees nothing the oldest source is
//! evicted (it comes back with a full bucket; the global bucket still bounds
//! the work).
//!
//! What holds for established sessions: junk without a valid mac1 never
//! reaches the meter or the buckets, so it cannot delay a rekey. Initiations
//! with a valid mac1 from spoofed sources (a sender who knows the gateway's
//! public key) spend at most half the global burst before the responder is
//! under load; from then on they get cookie replies, and a genuine device's
//! handshake costs it one extra round trip (cookie, then mac2) the first time
//! on each channel in 120 s (it keeps the cookie). Bucket
//! arithmetic is in integer nano-tokens, exact for the tests.

use crate::{Nanos, SECOND};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// How long the responder stays under load after the global bucket was last
/// seen below half its burst.
pub const UNDER_LOAD_HOLD: Nanos = SECOND;

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
    /// The tracked sources, oldest first (the same set as `sources`).
    order: VecDeque<IpAddr>,
    global: Bucket,
    /// The load meter: drained by every initiation offered (past mac1).
    offered: Bucket,
    last_sweep: Option<Nanos>,
    /// When the meter was last seen below half its burst.
    last_load: Option<Nanos>,
    /// Sources evicted to make room for new ones.
    evicted: u64,
}

impl Limiter {
    /// A limiter with all buckets full.
    pub fn new(cfg: RateLimit, now: Nanos) -> Limiter {
        Limiter {
            cfg,
            sources: HashMap::new(),
            order: VecDeque::new(),
            global: Bucket::full(cfg.global_burst, now),
            offered: Bucket::full(cfg.global_burst, now),
            last_sweep: None,
            last_load: None,
            evicted: 0,
        }
    }

    /// Counts one initiation that passed mac1 on the load meter and says
    /// whether the responder is under load (see the module docs).
    pub fn offer(&mut self, now: Nanos) -> bool {
        let c = self.cfg;
        let m = &mut self.offered;
        m.refill(now, c.global_per_s, c.global_burst);
        m.nano_tokens = m.nano_tokens.saturating_sub(SECOND);
        if m.nano_tokens < c.global_burst * SECOND / 2 {
            self.last_load = Some(now);
        }
        self.under_load(now)
    }

    /// Whether the responder is under load at `now` (changes nothing).
    pub fn under_load(&self, now: Nanos) -> bool {
        self.last_load
            .is_some_and(|t| now < t.saturating_add(UNDER_LOAD_HOLD))
    }

    /// Takes a token for one initiation from `source`; false = refuse it.
    pub fn allow(&mut self, now: Nanos, source: IpAddr) -> bool {
        let c = self.cfg;
        if !self.sources.contains_key(&source) {
            if self.sources.len() >= c.max_sources {
                self.sweep(now);
            }
            while self.sources.len() >= c.max_sources.max(1) {
                let oldest = self.order.pop_front().expect("order lists every source");
                self.sources.remove(&oldest);
                self.evicted += 1;
            }
            self.order.push_back(source);
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
        let kept = &self.sources;
        self.order.retain(|ip| kept.contains_key(ip));
    }

    /// Source addresses tracked now.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Sources evicted (oldest first) to make room for new ones so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The global bucket's content in nano-tokens (10^-9 initiations) as of
    /// its last refill: unchanged while nothing reaches the limiter.
    pub fn global_nano_tokens(&self) -> u64 {
        self.global.nano_tokens
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
        // more sources than room: every one is admitted (the oldest make
        // room), the table stays bounded
        for i in 0..1000 {
            assert!(l.allow(0, ip(i)), "source {i}");
        }
        assert_eq!((l.sources(), l.evicted()), (100, 900));
        // 2 s later every bucket (1 token used, 10/s) is full again: swept
        assert!(l.allow(2 * SECOND, ip(5000)));
        assert_eq!(l.sources(), 1);
        // a busy table (no idle buckets) stays bounded: a new source evicts
        // the oldest one (ip(5000)) instead of being refused
        for i in 0..99 {
            for _ in 0..20 {
                l.allow(2 * SECOND, ip(6000 + i));
            }
        }
        assert_eq!((l.sources(), l.evicted()), (100, 900));
        assert!(l.allow(2 * SECOND + 1, ip(9999)));
        assert_eq!((l.sources(), l.evicted()), (100, 901));
        // ip(6000), now the oldest, is evicted next; the evicted ip(5000)
        // comes back with a full bucket
        assert!(l.allow(2 * SECOND + 1, ip(5000)));
        assert_eq!((l.sources(), l.evicted()), (100, 902));
        assert!(l.allow(2 * SECOND + 1, ip(6000)), "back with a full bucket");
    }

    #[test]
    fn a_flood_of_new_sources_never_locks_out_a_known_one() {
        let cfg = RateLimit {
            max_sources: 1000,
            global_burst: 1_000_000,
            global_per_s: 1_000_000,
            ..RateLimit::default()
        };
        let mut l = Limiter::new(cfg, 0);
        // 100,000 sources in one instant (no sweep frees anything): each is
        // admitted, the table stays at 1000, and a device whose entry was
        // evicted long ago is admitted as a new source
        for i in 0..100_000 {
            assert!(l.allow(0, ip(100 + i)), "source {i}");
        }
        assert_eq!(l.sources(), 1000);
        assert_eq!(l.evicted(), 99_000);
        assert!(l.allow(0, ip(1)));
    }

    #[test]
    fn under_load_while_offers_outrun_the_global_budget_and_for_a_second_after() {
        let cfg = RateLimit {
            global_per_s: 100,
            global_burst: 200,
            ..RateLimit::default()
        };
        let mut l = Limiter::new(cfg, 0);
        assert!(!l.under_load(0));
        // the meter: 200 - k after k offers; below half from the 101st on,
        // whether or not the offers were admitted (none is asked here)
        for k in 1..=100 {
            assert!(!l.offer(0), "offer {k}");
        }
        assert!(l.offer(0), "99 of 200 left");
        assert_eq!(l.global_nano_tokens(), 200 * SECOND, "no token taken");
        // the flag holds for a second after the meter was last seen low
        assert!(l.under_load(SECOND - 1));
        assert!(!l.under_load(SECOND));
        // by then 100 came back: 199, minus this offer 198
        assert!(!l.offer(SECOND));
        // offers at 150/s against 100/s: each takes 1 and 2/3 come back, so
        // the meter goes from 198 to 100 at offer 294 (198 - 294/3), below it
        // then or one offer later (SECOND / 150 is rounded down), ~1.96 s on
        let mut t = SECOND;
        let mut first_load = None;
        for _ in 0..600 {
            t += SECOND / 150;
            if l.offer(t) && first_load.is_none() {
                first_load = Some(t);
            }
        }
        let at = first_load.expect("under load");
        assert!(
            (293..=295).contains(&((at - SECOND) / (SECOND / 150))),
            "{at}"
        );
    }
}
