//! Percentiles of queueing delays: exact for one page load (its values kept),
//! approximate for a whole cell (a log-linear histogram, since a cell of 10k
//! users sees more LLC packets than is worth keeping).
//!
//! Both use the nearest-rank definition: the p-th percentile of n values is
//! the ⌈p·n⌉-th smallest.

/// The nearest-rank `p`-th percentile (0 < p ≤ 1) of `sorted` (ascending);
/// `None` if empty.
pub fn nearest_rank(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Sub-buckets per power of two: values are kept to within 1/64 (1.6 %).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;

/// A histogram of non-negative integers (ns) with log-linear buckets: exact
/// below 64, then 64 buckets per power of two.
#[derive(Clone, Debug)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram {
            counts: vec![0; bucket(u64::MAX) + 1],
            total: 0,
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = e - SUB_BITS;
    let mantissa = (v >> shift) - SUB; // 0..SUB
    (SUB + u64::from(shift) * SUB + mantissa) as usize
}

/// The smallest and largest value of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i);
    }
    let shift = (i - SUB) / SUB;
    let mantissa = (i - SUB) % SUB;
    let lo = (SUB + mantissa) << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

impl LogHistogram {
    /// Counts one value.
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.total += 1;
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The nearest-rank `p`-th percentile, as the middle of its bucket (within
    /// 1/128 of the true value); `None` if empty.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                return Some((lo as f64 + hi as f64) / 2.0);
            }
        }
        unreachable!("rank {rank} <= total {}", self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_its_definition() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(nearest_rank(&v, 0.5), Some(5.0));
        assert_eq!(nearest_rank(&v, 0.95), Some(10.0)); // ceil(9.5) = 10th
        assert_eq!(nearest_rank(&v, 0.91), Some(10.0));
        assert_eq!(nearest_rank(&v, 0.9), Some(9.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
    }

    #[test]
    fn buckets_tile_the_integers_and_keep_values_within_one_64th() {
        let mut prev_hi = None;
        for i in 0..bucket(1 << 40) {
            let (lo, hi) = bounds(i);
            assert_eq!(bucket(lo), i);
            assert_eq!(bucket(hi), i);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {i}");
            }
            prev_hi = Some(hi);
            assert!(
                (hi - lo) as f64 <= lo as f64 / 64.0,
                "bucket {i}: {lo}..{hi}"
            );
        }
        assert_eq!(bucket(u64::MAX), LogHistogram::default().counts.len() - 1);
    }

    #[test]
    fn histogram_percentiles_are_close_to_exact_ones() {
        let mut h = LogHistogram::default();
        let mut exact = Vec::new();
        for i in 0..10_000u64 {
            let v = (i * 7919) % 5_000_000; // spread over 0..5 ms in ns
            h.record(v);
            exact.push(v as f64);
        }
        exact.sort_by(f64::total_cmp);
        for p in [0.5, 0.95, 0.99] {
            let want = nearest_rank(&exact, p).unwrap();
            let got = h.percentile(p).unwrap();
            assert!((got - want).abs() <= want / 64.0, "p{p}: {got} vs {want}");
        }
        assert_eq!(h.count(), 10_000);
        assert_eq!(LogHistogram::default().percentile(0.5), None);
    }
}
