//! CDN tiers, sans-I/O (docs/webreplay.md "CDN tiers", docs/formats.md "CDN tiers").
//!
//! HotMobile'21 puts a CDN hierarchy behind the channels: a request reaches an edge server,
//! on a miss it is forwarded to a parent (10 ms RTT edge→parent), on a second miss to the
//! origin (40 ms parent→origin). The replay models this as an extra delay before the
//! response head, chosen by the object's tier. The tier comes from the corpus manifest
//! (`objects[i].tier`, classified from the recorded CDN headers by the importers) or, for
//! objects without one, from a seeded hit ratio: a draw in [0, 1) from
//! `sha256("<seed>\0<url>")` (deterministic per object URL and seed, identical in
//! `dchlab.pages.cdn.ratio_draw`).

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Where in the CDN hierarchy a request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Hit at the edge server.
    Edge,
    /// Edge miss, parent hit.
    Parent,
    /// Missed both caches: fetched from the origin.
    Origin,
}

impl Tier {
    /// All tiers, nearest first.
    pub const ALL: [Tier; 3] = [Tier::Edge, Tier::Parent, Tier::Origin];

    /// The manifest / flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Edge => "edge",
            Tier::Parent => "parent",
            Tier::Origin => "origin",
        }
    }

    fn index(self) -> usize {
        match self {
            Tier::Edge => 0,
            Tier::Parent => 1,
            Tier::Origin => 2,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "edge" => Ok(Tier::Edge),
            "parent" => Ok(Tier::Parent),
            "origin" => Ok(Tier::Origin),
            _ => Err(format!("expected edge, parent or origin, got {s:?}")),
        }
    }
}

/// How an object's tier was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TierSource {
    /// The manifest's `tier` (recorded CDN headers).
    Manifest,
    /// The seeded hit ratio.
    Ratio,
}

/// Share of the objects without a recorded tier that hit the edge and the parent; the rest
/// goes to the origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HitRatio {
    edge: f64,
    parent: f64,
}

impl HitRatio {
    /// `edge` and `parent` in [0, 1] with `edge + parent ≤ 1`.
    pub fn new(edge: f64, parent: f64) -> Result<Self, String> {
        for (name, v) in [("edge", edge), ("parent", parent)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("hit ratio {name}={v}: expected a share in 0..=1"));
            }
        }
        // A little slack for decimal inputs such as 0.7 + 0.3.
        if edge + parent > 1.0 + 1e-9 {
            return Err(format!(
                "hit ratio edge={edge} + parent={parent} exceeds 1 (the rest is the origin's share)"
            ));
        }
        Ok(HitRatio { edge, parent })
    }

    /// The edge share.
    pub fn edge(&self) -> f64 {
        self.edge
    }

    /// The parent share.
    pub fn parent(&self) -> f64 {
        self.parent
    }

    /// The tier of a draw `u` in [0, 1): `[0, edge)` edge, `[edge, edge+parent)` parent,
    /// else origin.
    pub fn tier_of(&self, u: f64) -> Tier {
        if u < self.edge {
            Tier::Edge
        } else if u < self.edge + self.parent {
            Tier::Parent
        } else {
            Tier::Origin
        }
    }
}

/// The CDN model of one webreplay run.
#[derive(Debug, Clone, PartialEq)]
pub struct CdnConfig {
    /// Extra delay before the response head, indexed edge, parent, origin.
    delays: [Duration; 3],
    /// Tiers of objects the manifest gives none.
    pub ratio: HitRatio,
    /// Seed of the hit-ratio draw.
    pub seed: u64,
}

/// HotMobile'21: edge hit 0 ms, parent hit +10 ms (edge→parent RTT), origin +50 ms
/// (edge→parent 10 ms + parent→origin 40 ms).
pub const DEFAULT_DELAYS_MS: [f64; 3] = [0.0, 10.0, 50.0];

impl Default for CdnConfig {
    /// Default delays; objects without a recorded tier are edge hits (no extra delay), so
    /// only what the recording says missed costs time unless a hit ratio is given.
    fn default() -> Self {
        CdnConfig {
            delays: DEFAULT_DELAYS_MS.map(|ms| Duration::from_secs_f64(ms / 1e3)),
            ratio: HitRatio {
                edge: 1.0,
                parent: 0.0,
            },
            seed: 1,
        }
    }
}

impl CdnConfig {
    /// Sets the extra delay of `tier`.
    pub fn set_delay(&mut self, tier: Tier, d: Duration) {
        self.delays[tier.index()] = d;
    }

    /// The extra delay of `tier`.
    pub fn delay(&self, tier: Tier) -> Duration {
        self.delays[tier.index()]
    }

    /// The tier of the object at `url`: the recorded one, else the hit-ratio draw.
    pub fn tier(&self, recorded: Option<Tier>, url: &str) -> (Tier, TierSource) {
        match recorded {
            Some(t) => (t, TierSource::Manifest),
            None => (
                self.ratio.tier_of(ratio_draw(url, self.seed)),
                TierSource::Ratio,
            ),
        }
    }

    /// When the response head of a request that arrived at `now` may go out: after the
    /// object's think time and its tier's delay (the server thinks at the origin, so a
    /// parent hit or an origin fetch adds to it).
    pub fn due(&self, now: Instant, think: Duration, tier: Tier) -> Instant {
        now + think + self.delay(tier)
    }

    /// Applies `edge=MS,parent=MS,origin=MS` (any subset) to the delays.
    pub fn parse_delays(&mut self, spec: &str) -> Result<(), String> {
        for (tier, v) in parse_pairs(spec, "--cdn-delays-ms")? {
            if !v.is_finite() || !(0.0..=60_000.0).contains(&v) {
                return Err(format!(
                    "--cdn-delays-ms {tier}={v}: expected milliseconds in 0..=60000"
                ));
            }
            self.set_delay(tier, Duration::from_secs_f64(v / 1e3));
        }
        Ok(())
    }

    /// Applies `edge=SHARE,parent=SHARE` (origin gets the rest; an omitted tier is 0).
    pub fn parse_ratio(&mut self, spec: &str) -> Result<(), String> {
        let (mut edge, mut parent) = (0.0, 0.0);
        for (tier, v) in parse_pairs(spec, "--cdn-hit-ratio")? {
            match tier {
                Tier::Edge => edge = v,
                Tier::Parent => parent = v,
                Tier::Origin => {
                    return Err(
                        "--cdn-hit-ratio: give edge= and parent= only; the origin gets the rest"
                            .into(),
                    )
                }
            }
        }
        self.ratio = HitRatio::new(edge, parent).map_err(|e| format!("--cdn-hit-ratio: {e}"))?;
        Ok(())
    }
}

fn parse_pairs(spec: &str, flag: &str) -> Result<Vec<(Tier, f64)>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{flag}: expected TIER=NUMBER pairs, got {part:?}"))?;
        let tier: Tier = k.trim().parse().map_err(|e| format!("{flag}: {e}"))?;
        let num: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("{flag}: {tier}={v:?} is not a number"))?;
        out.push((tier, num));
    }
    if out.is_empty() {
        return Err(format!("{flag}: expected TIER=NUMBER pairs, got {spec:?}"));
    }
    Ok(out)
}

/// The hit-ratio draw of `url` under `seed`: the first 8 bytes of
/// `sha256("<seed>\0<url>")` as a big-endian integer, divided by 2^64.
pub fn ratio_draw(url: &str, seed: u64) -> f64 {
    let mut h = Sha256::new();
    h.update(seed.to_string().as_bytes());
    h.update([0u8]);
    h.update(url.as_bytes());
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    // 2^64 as f64 is exact; the quotient is < 1 except for rounding of values within
    // 2^-53 of 1, which min() keeps inside [0, 1).
    (u64::from_be_bytes(first) as f64 / 18_446_744_073_709_551_616.0).min(1.0 - f64::EPSILON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_draw_is_sha256_prefix() {
        let u = ratio_draw("https://a.test/x", 1);
        assert!((u - RATIO_A_X_SEED1).abs() < 1e-15, "{u}");
        assert_ne!(
            ratio_draw("https://a.test/x", 2),
            u,
            "seed changes the draw"
        );
        assert_eq!(ratio_draw("https://a.test/x", 1), u, "deterministic");
    }

    /// Python: int.from_bytes(hashlib.sha256(b"1\x00https://a.test/x").digest()[:8],
    /// "big") / 2**64 (also asserted in lab/tests/test_pages_cdn.py).
    const RATIO_A_X_SEED1: f64 = 0.289800063337906;

    #[test]
    fn hit_ratio_splits_the_unit_interval() {
        let r = HitRatio::new(0.6, 0.25).unwrap();
        assert_eq!(r.tier_of(0.0), Tier::Edge);
        assert_eq!(r.tier_of(0.599), Tier::Edge);
        assert_eq!(r.tier_of(0.6), Tier::Parent);
        assert_eq!(r.tier_of(0.849), Tier::Parent);
        assert_eq!(r.tier_of(0.85), Tier::Origin);
        assert_eq!(r.tier_of(0.999), Tier::Origin);
        assert!(HitRatio::new(0.7, 0.3).is_ok());
        assert!(HitRatio::new(0.8, 0.3).unwrap_err().contains("exceeds 1"));
        assert!(HitRatio::new(-0.1, 0.0).unwrap_err().contains("edge"));
    }

    #[test]
    fn ratio_mix_over_many_urls_matches_the_shares() {
        let mut cfg = CdnConfig::default();
        cfg.parse_ratio("edge=0.6,parent=0.25").unwrap();
        let mut n = [0usize; 3];
        for i in 0..10_000 {
            let (t, src) = cfg.tier(None, &format!("https://h.test/o{i}.png"));
            assert_eq!(src, TierSource::Ratio);
            n[t.index()] += 1;
        }
        // Binomial sd for 10 000 draws is ≤ 50 objects; allow 4 sd.
        for (got, want) in n.iter().zip([6000, 2500, 1500]) {
            assert!(got.abs_diff(want) <= 200, "{n:?}");
        }
    }

    #[test]
    fn recorded_tier_wins_over_the_ratio() {
        let mut cfg = CdnConfig::default();
        cfg.parse_ratio("edge=0,parent=0").unwrap();
        assert_eq!(
            cfg.tier(Some(Tier::Edge), "https://a.test/"),
            (Tier::Edge, TierSource::Manifest)
        );
        assert_eq!(
            cfg.tier(None, "https://a.test/"),
            (Tier::Origin, TierSource::Ratio)
        );
        // The default ratio: every unrecorded object is an edge hit.
        assert_eq!(
            CdnConfig::default().tier(None, "https://a.test/").0,
            Tier::Edge
        );
    }

    #[test]
    fn due_adds_think_and_tier_delay_to_now() {
        let now = Instant::now();
        let cfg = CdnConfig::default();
        let think = Duration::from_millis(12);
        assert_eq!(cfg.due(now, think, Tier::Edge), now + think);
        assert_eq!(
            cfg.due(now, think, Tier::Parent),
            now + Duration::from_millis(22)
        );
        assert_eq!(
            cfg.due(now, think, Tier::Origin),
            now + Duration::from_millis(62)
        );
        let mut c = CdnConfig::default();
        c.parse_delays("origin=120.5, parent=0").unwrap();
        assert_eq!(c.delay(Tier::Edge), Duration::ZERO);
        assert_eq!(c.delay(Tier::Parent), Duration::ZERO);
        assert_eq!(c.delay(Tier::Origin), Duration::from_micros(120_500));
    }

    #[test]
    fn bad_specs_name_the_flag() {
        let mut c = CdnConfig::default();
        for (spec, want) in [
            ("edge", "TIER=NUMBER"),
            ("cache=3", "expected edge, parent or origin"),
            ("origin=x", "not a number"),
            ("origin=-1", "0..=60000"),
            ("", "TIER=NUMBER"),
        ] {
            let e = c.parse_delays(spec).unwrap_err();
            assert!(
                e.contains("--cdn-delays-ms") && e.contains(want),
                "{spec}: {e}"
            );
        }
        let e = c.parse_ratio("origin=0.1").unwrap_err();
        assert!(e.contains("the origin gets the rest"), "{e}");
        let e = c.parse_ratio("edge=0.9,parent=0.2").unwrap_err();
        assert!(
            e.contains("--cdn-hit-ratio") && e.contains("exceeds 1"),
            "{e}"
        );
    }
}
