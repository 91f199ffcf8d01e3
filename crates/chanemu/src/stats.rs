//! Per-direction counters and a fixed-size log-linear histogram (≤ 0.1 % relative
//! error, no allocation after construction) for delay percentiles.

use serde_json::json;

/// Values in µs. Below 2048 exact; above, 1024 sub-buckets per power of two.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; (64 * SUB) as usize],
            total: 0,
            max: 0,
        }
    }
}

impl Histogram {
    fn index(v: u64) -> usize {
        if v < 2 * SUB {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // ≥ SUB_BITS + 1
        let shift = exp - SUB_BITS;
        let mantissa = (v >> shift) - SUB; // 0..SUB
        ((shift as u64 + 1) * SUB + mantissa) as usize
    }

    /// Lower edge of a bucket.
    fn value(i: usize) -> u64 {
        let i = i as u64;
        if i < 2 * SUB {
            return i;
        }
        let shift = i / SUB - 1;
        (SUB + i % SUB) << shift
    }

    /// Middle of a bucket (the value reported for it: unbiased).
    fn mid(i: usize) -> u64 {
        let lo = Self::value(i);
        let width = if (i as u64) < 2 * SUB {
            1
        } else {
            1u64 << ((i as u64) / SUB - 1)
        };
        lo + width / 2
    }

    /// Counts one value.
    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Largest value counted.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The q-quantile (0 ≤ q ≤ 1), nearest-rank; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::mid(i).min(self.max);
            }
        }
        self.max
    }
}

/// What the summary reports for one direction.
#[derive(Debug, Clone, Default)]
pub struct DirStats {
    /// Packets that entered the link.
    pub pkts_in: u64,
    /// Bytes that entered the link.
    pub bytes_in: u64,
    /// Packets that left the link.
    pub pkts_out: u64,
    /// Bytes that left the link.
    pub bytes_out: u64,
    /// Packets dropped by the queue limit.
    pub pkts_dropped_queue: u64,
    /// Packets dropped by the loss stage.
    pub pkts_dropped_loss: u64,
    /// Packets lost to an outage (sent into, or in flight on, a dead link).
    pub pkts_dropped_outage: u64,
    /// Packets dropped by a loss burst.
    pub pkts_dropped_burst: u64,
    /// Emulated delay (release − arrival), µs.
    pub delay_us: Histogram,
    /// Actual write time − scheduled release, µs (driver precision).
    pub release_error_us: Histogram,
}

impl DirStats {
    /// The stats JSON of this direction (docs/chanemu.md).
    pub fn to_json(&self) -> serde_json::Value {
        let ms = |h: &Histogram, q: f64| h.quantile(q) as f64 / 1000.0;
        let d = &self.delay_us;
        let e = &self.release_error_us;
        json!({
            "pkts_in": self.pkts_in, "bytes_in": self.bytes_in,
            "pkts_out": self.pkts_out, "bytes_out": self.bytes_out,
            "pkts_dropped_queue": self.pkts_dropped_queue, "pkts_dropped_loss": self.pkts_dropped_loss,
            "pkts_dropped_outage": self.pkts_dropped_outage, "pkts_dropped_burst": self.pkts_dropped_burst,
            "delay_ms": {"p50": ms(d, 0.5), "p90": ms(d, 0.9), "p99": ms(d, 0.99), "max": d.max() as f64 / 1000.0},
            "release_error_ms": {"p50": ms(e, 0.5), "p99": ms(e, 0.99), "max": e.max() as f64 / 1000.0},
        })
    }

    /// A one-line human summary of direction `name`.
    pub fn human(&self, name: &str) -> String {
        let d = &self.delay_us;
        format!(
            "{name:>8}: in {} pkts / {} B, out {} pkts / {} B, dropped {} (queue) + {} (loss) + {} (outage) + {} (burst); delay ms p50 {:.3} p99 {:.3} max {:.3}; release error ms p99 {:.3}",
            self.pkts_in, self.bytes_in, self.pkts_out, self.bytes_out, self.pkts_dropped_queue, self.pkts_dropped_loss,
            self.pkts_dropped_outage, self.pkts_dropped_burst,
            d.quantile(0.5) as f64 / 1e3, d.quantile(0.99) as f64 / 1e3, d.max() as f64 / 1e3,
            self.release_error_us.quantile(0.99) as f64 / 1e3,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_below_2048_and_bounded_error_above() {
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!(h.quantile(1.0), 100);
        let mut g = Histogram::default();
        for v in [20_000u64, 40_000, 1_234_567] {
            g.record(v);
        }
        // 40 000 lies in the octave 32768..65536, buckets of 32: reported as 40 016
        assert_eq!(g.quantile(0.5), 40_016);
        assert_eq!(g.max(), 1_234_567);
        assert!(g.quantile(1.0) <= 1_234_567);
        for v in [2047u64, 2048, 2049, 5000, 65_535, 1 << 40] {
            let i = Histogram::index(v);
            assert!(
                Histogram::value(i) <= v && v - Histogram::value(i) <= v / 1024,
                "{v}"
            );
            assert!(Histogram::mid(i).abs_diff(v) <= v / 1024, "{v}");
        }
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }
}
