//! Delay stage: one-way propagation delay, chosen by the packet's arrival time at
//! the link, and the no-overtaking rule.
//!
//! Models: fixed; an RTT timeline (linear interpolation, each direction RTT/2);
//! Gaussian RTT with mean and coefficient of variation, clipped at 0 and resampled
//! every `resample` ns (each direction its own draws, one-way = sample/2).
//!
//! **Overtaking.** Packets of one direction leave in arrival order. A packet's
//! release is `max(link_finish + one_way(arrival), previous release)`. When the
//! delay falls faster than time passes (slope below −1 ms per ms, e.g. a step
//! down in an RTT timeline or a new Gaussian draw much smaller than the previous
//! one), the later packets are held until the earlier one has been released, so
//! for a moment they see more delay than the trace says — as on a real path,
//! where a shorter delay does not let packets pass the ones already in flight.

use crate::rng::normal_at;
use crate::time::{ms_f64, Nanos};
use crate::trace::rtt::RttTimeline;

/// How the one-way delay of a direction is chosen.
#[derive(Debug, Clone)]
pub enum DelayModel {
    /// One-way delay in ns.
    Fixed(Nanos),
    /// Half the RTT of an RTT timeline, interpolated at the packet's arrival.
    Timeline {
        /// The RTT timeline.
        rtt: RttTimeline,
        /// Start offset into the timeline (run time t is timeline time t + offset).
        offset: Nanos,
    },
    /// Half of an RTT drawn from a normal distribution, redrawn every `resample`.
    Gaussian {
        /// Mean RTT (ms).
        mean_rtt_ms: f64,
        /// Coefficient of variation (standard deviation / mean).
        cov: f64,
        /// How long one draw holds.
        resample: Nanos,
        /// Seed of the random stream.
        seed: u64,
        /// Stream id (one per direction, so directions draw independently).
        stream: u64,
        /// Start offset (run time t is model time t + offset).
        offset: Nanos,
    },
}

impl DelayModel {
    /// One-way delay of a packet that arrived at run time `arrival`.
    pub fn one_way(&self, arrival: Nanos) -> Nanos {
        match self {
            DelayModel::Fixed(d) => *d,
            DelayModel::Timeline { rtt, offset } => ms_f64(rtt.rtt_at(arrival + offset) / 2.0),
            DelayModel::Gaussian {
                mean_rtt_ms,
                cov,
                resample,
                seed,
                stream,
                offset,
            } => {
                let window = (arrival + offset) / resample.max(&1);
                let z = normal_at(*seed, *stream, window);
                let rtt = (mean_rtt_ms + mean_rtt_ms * cov * z).max(0.0);
                ms_f64(rtt / 2.0)
            }
        }
    }
}

/// The delay stage with its FIFO rule.
#[derive(Debug, Clone)]
pub struct DelayStage {
    model: DelayModel,
    last_release: Nanos,
}

impl DelayStage {
    /// A delay stage with `model`.
    pub fn new(model: DelayModel) -> Self {
        DelayStage {
            model,
            last_release: 0,
        }
    }

    /// Its model.
    pub fn model(&self) -> &DelayModel {
        &self.model
    }

    /// Release time of a packet that arrived at `arrival` and left the link at `link_finish`.
    pub fn release(&mut self, arrival: Nanos, link_finish: Nanos) -> Nanos {
        let r = self.would_release(arrival, link_finish);
        self.last_release = r;
        r
    }

    /// What [`release`](Self::release) would return, without taking the slot.
    pub fn would_release(&self, arrival: Nanos, link_finish: Nanos) -> Nanos {
        (link_finish + self.model.one_way(arrival)).max(self.last_release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    #[test]
    fn fixed_adds_delay_after_link() {
        let mut d = DelayStage::new(DelayModel::Fixed(20 * NS_PER_MS));
        assert_eq!(d.release(0, 3 * NS_PER_MS), 23 * NS_PER_MS);
    }

    #[test]
    fn timeline_halves_interpolated_rtt() {
        // RTT 40 ms at 0, 80 ms at 100 ms → at 25 ms RTT 50 ms → one-way 25 ms
        let tl = RttTimeline::from_samples(&[(0.0, 40.0), (100.0, 80.0)]);
        let m = DelayModel::Timeline {
            rtt: tl.clone(),
            offset: 0,
        };
        assert_eq!(m.one_way(25 * NS_PER_MS), 25 * NS_PER_MS);
        // offset 50 ms: run time 0 is trace time 50 ms → RTT 60 → 30 ms
        let m = DelayModel::Timeline {
            rtt: tl,
            offset: 50 * NS_PER_MS,
        };
        assert_eq!(m.one_way(0), 30 * NS_PER_MS);
    }

    #[test]
    fn no_overtaking_when_delay_drops_faster_than_time() {
        // step from RTT 200 ms to 20 ms within 1 ms at t = 100 ms
        let tl = RttTimeline::from_samples(&[
            (0.0, 200.0),
            (100.0, 200.0),
            (101.0, 20.0),
            (1000.0, 20.0),
        ]);
        let mut d = DelayStage::new(DelayModel::Timeline { rtt: tl, offset: 0 });
        // arrives at 99 ms, one-way 100 ms → 199 ms
        assert_eq!(d.release(99 * NS_PER_MS, 99 * NS_PER_MS), 199 * NS_PER_MS);
        // arrives at 110 ms, one-way 10 ms → 120 ms would overtake: held to 199 ms
        assert_eq!(d.release(110 * NS_PER_MS, 110 * NS_PER_MS), 199 * NS_PER_MS);
        // arrives at 195 ms: 205 ms, no longer constrained
        assert_eq!(d.release(195 * NS_PER_MS, 195 * NS_PER_MS), 205 * NS_PER_MS);
    }

    #[test]
    fn gaussian_zero_cov_is_mean_and_resamples_per_window() {
        let m = DelayModel::Gaussian {
            mean_rtt_ms: 10.0,
            cov: 0.0,
            resample: 10 * NS_PER_MS,
            seed: 1,
            stream: 1,
            offset: 0,
        };
        assert_eq!(m.one_way(123), 5 * NS_PER_MS);
        let g = DelayModel::Gaussian {
            mean_rtt_ms: 10.0,
            cov: 0.5,
            resample: 10 * NS_PER_MS,
            seed: 1,
            stream: 1,
            offset: 0,
        };
        // constant within a window
        assert_eq!(g.one_way(10 * NS_PER_MS), g.one_way(19 * NS_PER_MS));
        // mean and CoV over many windows: mean 5 ms one-way, sd 2.5 ms (clipping at 0 is 2.3% mass, small effect)
        let xs: Vec<f64> = (0..20_000u64)
            .map(|w| g.one_way(w * 10 * NS_PER_MS) as f64 / 1e6)
            .collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!((mean - 5.0).abs() < 0.1, "{mean}");
        assert!((sd - 2.5).abs() < 0.15, "{sd}");
        assert!(xs.iter().all(|x| *x >= 0.0));
    }
}
