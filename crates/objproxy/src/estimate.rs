//! Per-channel estimates that feed the policies, sans-I/O: SRTT samples from TCP_INFO and
//! downstream rates from interface counters, each with an explicit `now` (ms).

use std::collections::VecDeque;

use crate::policy::ChannelView;

/// IANS looks at the last five minutes.
pub const WINDOW_MS: f64 = 300_000.0;
/// The "current" rate is the rate over the last second.
pub const CURRENT_MS: f64 = 1_000.0;
/// Memory bound on SRTT samples (the oldest are dropped first).
const MAX_SRTT_SAMPLES: usize = 4096;

/// SRTT samples of a channel's connections over the last [`WINDOW_MS`].
#[derive(Debug, Default, Clone)]
pub struct SrttWindow {
    samples: VecDeque<(f64, f64)>,
}

impl SrttWindow {
    pub fn push(&mut self, now_ms: f64, srtt_ms: f64) {
        if !(srtt_ms.is_finite() && srtt_ms > 0.0) {
            return;
        }
        self.samples.push_back((now_ms, srtt_ms));
        if self.samples.len() > MAX_SRTT_SAMPLES {
            self.samples.pop_front();
        }
        self.expire(now_ms);
    }

    fn expire(&mut self, now_ms: f64) {
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| now_ms - t > WINDOW_MS)
        {
            self.samples.pop_front();
        }
    }

    pub fn min(&self) -> Option<f64> {
        self.samples.iter().map(|&(_, s)| s).reduce(f64::min)
    }

    /// Median (the lower middle element for even counts, so it is always a real sample).
    pub fn median(&self) -> Option<f64> {
        if self.samples.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = self.samples.iter().map(|&(_, s)| s).collect();
        v.sort_by(f64::total_cmp);
        Some(v[(v.len() - 1) / 2])
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Downstream rate from a monotonically increasing byte counter (`rx_bytes`).
#[derive(Debug, Default, Clone)]
pub struct RateMeter {
    /// Counter samples of the last [`CURRENT_MS`] (plus the one just before).
    counters: VecDeque<(f64, u64)>,
    /// One-second rates (B/ms) of the last [`WINDOW_MS`].
    rates: VecDeque<(f64, f64)>,
    current: f64,
}

impl RateMeter {
    /// Feed a counter reading taken at `now_ms`.
    pub fn on_counter(&mut self, now_ms: f64, bytes: u64) {
        if let Some(&(t, b)) = self.counters.back() {
            if bytes < b || now_ms < t {
                // Counter reset (interface re-created) or clock confusion: start over.
                self.counters.clear();
            }
        }
        self.counters.push_back((now_ms, bytes));
        // Keep exactly one sample at or before now - CURRENT_MS as the rate's base.
        while self.counters.len() > 2 && now_ms - self.counters[1].0 >= CURRENT_MS {
            self.counters.pop_front();
        }
        let (t0, b0) = self.counters[0];
        if now_ms > t0 {
            self.current = (bytes - b0) as f64 / (now_ms - t0);
            self.rates.push_back((now_ms, self.current));
        }
        while self
            .rates
            .front()
            .is_some_and(|&(t, _)| now_ms - t > WINDOW_MS)
        {
            self.rates.pop_front();
        }
    }

    /// Rate over (about) the last second, B/ms.
    pub fn current(&self) -> f64 {
        self.current
    }

    /// Highest one-second rate of the last five minutes, B/ms.
    pub fn max(&self) -> f64 {
        self.rates.iter().map(|&(_, r)| r).fold(0.0, f64::max)
    }
}

/// Priors for a channel before it has been measured: the nominal RTT and rate
/// (`--hbc-rtt-ms/--hbc-mbit`, `--llc-rtt-ms/--llc-mbit`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prior {
    pub rtt_ms: f64,
    pub rate: f64,
}

/// Everything the proxy knows about one channel.
#[derive(Debug, Clone)]
pub struct ChannelEstimate {
    pub prior: Prior,
    pub srtt: SrttWindow,
    pub rate: RateMeter,
    /// Ignore measurements and use the priors only (`--static-estimates`).
    pub static_only: bool,
}

impl ChannelEstimate {
    pub fn new(prior: Prior, static_only: bool) -> Self {
        ChannelEstimate {
            prior,
            srtt: SrttWindow::default(),
            rate: RateMeter::default(),
            static_only,
        }
    }

    /// The policy's view. The maximum rate is the larger of the nominal rate and the
    /// highest measured one: a link seldom saturated would otherwise look slower than it is.
    pub fn view(&self, conns: u32, can_reuse: bool) -> ChannelView {
        if self.static_only {
            return ChannelView {
                min_srtt_ms: self.prior.rtt_ms,
                median_srtt_ms: self.prior.rtt_ms,
                max_rate: self.prior.rate,
                cur_rate: 0.0,
                conns,
                can_reuse,
            };
        }
        ChannelView {
            min_srtt_ms: self.srtt.min().unwrap_or(self.prior.rtt_ms),
            median_srtt_ms: self.srtt.median().unwrap_or(self.prior.rtt_ms),
            max_rate: self.rate.max().max(self.prior.rate),
            cur_rate: self.rate.current(),
            conns,
            can_reuse,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srtt_min_median_and_expiry() {
        let mut w = SrttWindow::default();
        assert_eq!(w.min(), None);
        for (t, s) in [(0.0, 9.0), (10.0, 5.0), (20.0, 7.0), (30.0, 6.0)] {
            w.push(t, s);
        }
        assert_eq!(w.min(), Some(5.0));
        // sorted 5 6 7 9 → lower middle 6.
        assert_eq!(w.median(), Some(6.0));
        // Five minutes after the 5 ms sample, it and the 9 ms one are gone.
        w.push(10.0 + WINDOW_MS + 1.0, 8.0);
        assert_eq!(w.len(), 3);
        assert_eq!(w.min(), Some(6.0));
        assert_eq!(w.median(), Some(7.0));
        w.push(1e9, f64::NAN);
        assert_eq!(w.len(), 3);
    }

    #[test]
    fn rate_meter_current_and_max() {
        let mut m = RateMeter::default();
        m.on_counter(0.0, 0);
        // 250 B/ms for a second, sampled every 250 ms.
        for i in 1..=4u64 {
            m.on_counter(250.0 * i as f64, 62_500 * i);
        }
        assert!((m.current() - 250.0).abs() < 1e-9, "{}", m.current());
        // Then idle for two seconds: current drops to 0, max stays 250.
        for i in 5..=12u64 {
            m.on_counter(250.0 * i as f64, 250_000);
        }
        assert_eq!(m.current(), 0.0);
        assert!((m.max() - 250.0).abs() < 1e-9);
        // Six minutes later the burst is forgotten.
        m.on_counter(360_000.0, 250_000);
        assert_eq!(m.max(), 0.0);
    }

    #[test]
    fn rate_meter_survives_counter_reset() {
        let mut m = RateMeter::default();
        m.on_counter(0.0, 1_000_000);
        m.on_counter(1000.0, 10);
        m.on_counter(2000.0, 1010);
        assert!((m.current() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn view_uses_priors_until_measured() {
        let prior = Prior {
            rtt_ms: 5.0,
            rate: 250.0,
        };
        let mut e = ChannelEstimate::new(prior, false);
        let v = e.view(0, false);
        assert_eq!(
            (v.min_srtt_ms, v.median_srtt_ms, v.max_rate),
            (5.0, 5.0, 250.0)
        );
        e.srtt.push(0.0, 6.5);
        e.rate.on_counter(0.0, 0);
        e.rate.on_counter(1000.0, 500_000); // 500 B/ms measured > prior
        let v = e.view(2, true);
        assert_eq!(
            (v.min_srtt_ms, v.max_rate, v.cur_rate, v.conns),
            (6.5, 500.0, 500.0, 2)
        );
        let s = ChannelEstimate {
            static_only: true,
            ..e
        };
        assert_eq!(s.view(2, true).min_srtt_ms, 5.0);
    }
}
