//! Loss stage: i.i.d. drops with probability `p`, from a seeded stream, so the
//! same seed and the same packet sequence give the same drops.

use crate::rng::Stream;

/// The loss stage (see the module docs).
#[derive(Debug, Clone)]
pub struct Loss {
    p: f64,
    rng: Stream,
}

impl Loss {
    /// `stream` keeps the two directions' draws independent.
    pub fn new(p: f64, seed: u64, stream: u64) -> Self {
        Loss {
            p,
            rng: Stream::new(seed, stream),
        }
    }

    /// True if the next packet is dropped. Draws even when p = 0 so that changing
    /// only the loss rate does not shift any other random decision.
    pub fn drop_next(&mut self) -> bool {
        let u = self.rng.next_f64();
        u < self.p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_one() {
        let mut l = Loss::new(0.0, 1, 1);
        assert!((0..1000).all(|_| !l.drop_next()));
        let mut l = Loss::new(1.0, 1, 1);
        assert!((0..1000).all(|_| l.drop_next()));
    }

    #[test]
    fn one_percent_is_binomial_and_seeded() {
        let n = 100_000;
        let mut l = Loss::new(0.01, 42, 1);
        let drops: Vec<bool> = (0..n).map(|_| l.drop_next()).collect();
        let k = drops.iter().filter(|d| **d).count() as f64;
        // Binomial(100000, 0.01): mean 1000, sd 31.5; 99.9% interval ±3.29 sd.
        assert!((k - 1000.0).abs() < 3.29 * 31.46, "{k}");
        let mut again = Loss::new(0.01, 42, 1);
        assert!(drops.iter().all(|d| *d == again.drop_next()));
    }
}
