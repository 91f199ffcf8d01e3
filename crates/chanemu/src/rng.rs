//! Small deterministic random numbers (no dependency, stable across versions).
//!
//! A run must give the same packet schedule for the same seed on every machine and
//! every release, so the generators are written out here instead of depending on
//! a crate whose algorithms may change.

/// SplitMix64 finaliser: a good 64-bit mixing function (Steele et al., 2014).
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in [0, 1) from the top 53 bits.
pub fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Sequential stream (SplitMix64), one per direction and stage.
#[derive(Debug, Clone)]
pub struct Stream {
    state: u64,
}

impl Stream {
    /// `stream` separates independent consumers (loss uplink, loss downlink, …).
    pub fn new(seed: u64, stream: u64) -> Self {
        Stream {
            state: mix64(seed ^ mix64(stream)),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        unit_f64(self.next_u64())
    }
}

/// Counter-based standard normal draw: the `index`-th sample of stream `stream`.
/// Random access (no state) lets the Gaussian delay stage jump to any resampling
/// window, so the schedule does not depend on when packets happen to arrive.
pub fn normal_at(seed: u64, stream: u64, index: u64) -> f64 {
    let base = mix64(seed ^ mix64(stream ^ 0x5EED));
    let u1 = unit_f64(mix64(base ^ mix64(index.wrapping_mul(2))));
    let u2 = unit_f64(mix64(base ^ mix64(index.wrapping_mul(2) + 1)));
    // Box–Muller; 1 - u1 is in (0, 1], so the log is finite.
    (-2.0 * (1.0 - u1).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut s = Stream::new(7, 1);
                move |_| s.next_u64()
            })
            .collect();
        let mut s = Stream::new(7, 1);
        let b: Vec<u64> = (0..4).map(|_| s.next_u64()).collect();
        assert_eq!(a, b);
        let mut other = Stream::new(7, 2);
        assert_ne!(a[0], other.next_u64());
    }

    #[test]
    fn normal_moments() {
        let n = 200_000u64;
        let xs: Vec<f64> = (0..n).map(|i| normal_at(1, 3, i)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        // Standard error of the mean is 1/sqrt(n) = 0.0022; allow 5 sigma.
        assert!(mean.abs() < 0.011, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "var {var}");
    }
}
