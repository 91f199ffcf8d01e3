//! RTT timeline (`t_ms,rtt_ms`): linear interpolation between samples, looped.

use super::{csv_fields, csv_header, non_negative, parse_f64, TraceError};
use crate::time::{Nanos, NS_PER_MS};
use std::path::Path;

/// A looped RTT timeline. Times are kept in ms as f64 (traces have any spacing).
#[derive(Debug, Clone, PartialEq)]
pub struct RttTimeline {
    t_ms: Vec<f64>,
    rtt_ms: Vec<f64>,
    /// Loop period: t_last + (t_last − t_prev); 0 for a single sample (constant).
    period_ms: f64,
}

impl RttTimeline {
    /// Build from samples (already validated: ≥ 1, strictly increasing, ≥ 0).
    pub fn from_samples(samples: &[(f64, f64)]) -> Self {
        let n = samples.len();
        let period_ms = if n >= 2 {
            samples[n - 1].0 + (samples[n - 1].0 - samples[n - 2].0)
        } else {
            0.0
        };
        RttTimeline {
            t_ms: samples.iter().map(|s| s.0).collect(),
            rtt_ms: samples.iter().map(|s| s.1).collect(),
            period_ms,
        }
    }

    /// Parses an RTT timeline (`file` names it in errors).
    pub fn parse(file: &Path, text: &str) -> Result<Self, TraceError> {
        let ((hl, header), lines) = csv_header(file, text, "t_ms,rtt_ms")?;
        let cols: Vec<&str> = header.split(',').map(str::trim).collect();
        if cols != ["t_ms", "rtt_ms"] {
            return Err(TraceError::new(
                file,
                hl,
                "header",
                format!("expected `t_ms,rtt_ms`, got {header:?}"),
            ));
        }
        let mut samples: Vec<(f64, f64)> = Vec::new();
        for (ln, l) in lines {
            let f = csv_fields(file, ln, l, 2, " `t_ms,rtt_ms`")?;
            let t = parse_f64(file, ln, "t_ms", f[0])?;
            let r = parse_f64(file, ln, "rtt_ms", f[1])?;
            non_negative(file, ln, "t_ms", t, "")?;
            non_negative(file, ln, "rtt_ms", r, "")?;
            if let Some(&(prev, _)) = samples.last() {
                if t <= prev {
                    return Err(TraceError::new(
                        file,
                        ln,
                        "t_ms",
                        format!("expected strictly increasing times, got {t} after {prev}"),
                    ));
                }
            }
            samples.push((t, r));
        }
        if samples.is_empty() {
            return Err(TraceError::new(
                file,
                0,
                "t_ms",
                "empty trace: no samples after the header",
            ));
        }
        Ok(Self::from_samples(&samples))
    }

    /// Length of one loop of the timeline (ms).
    pub fn period_ms(&self) -> f64 {
        self.period_ms
    }

    /// Interpolated RTT (ms) at trace time `t_ms` (any value ≥ 0; the trace loops).
    pub fn rtt_at_ms(&self, t_ms: f64) -> f64 {
        let n = self.t_ms.len();
        if n == 1 {
            return self.rtt_ms[0];
        }
        let p = self.period_ms;
        let mut u = t_ms.rem_euclid(p);
        if u < self.t_ms[0] {
            u += p; // before the first sample: on the wrap segment of the previous period
        }
        // Index of the last sample ≤ u (u ≥ t_ms[0] here).
        let i = self.t_ms.partition_point(|&t| t <= u) - 1;
        let (t0, r0) = (self.t_ms[i], self.rtt_ms[i]);
        let (t1, r1) = if i + 1 < n {
            (self.t_ms[i + 1], self.rtt_ms[i + 1])
        } else {
            (self.t_ms[0] + p, self.rtt_ms[0]) // wrap: towards the next period's first sample
        };
        r0 + (r1 - r0) * (u - t0) / (t1 - t0)
    }

    /// RTT at trace time in ns (convenience for the delay stage).
    pub fn rtt_at(&self, t: Nanos) -> f64 {
        self.rtt_at_ms(t as f64 / NS_PER_MS as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<RttTimeline, TraceError> {
        RttTimeline::parse(Path::new("x.rtt.csv"), text)
    }

    #[test]
    fn interpolates_and_loops() {
        let tl = p("t_ms,rtt_ms\n0,20\n10,40\n20,40\n").unwrap();
        assert_eq!(tl.period_ms(), 30.0);
        assert_eq!(tl.rtt_at_ms(0.0), 20.0);
        assert_eq!(tl.rtt_at_ms(5.0), 30.0);
        assert_eq!(tl.rtt_at_ms(15.0), 40.0);
        // wrap segment 20..30 goes from 40 back to the first sample (20)
        assert_eq!(tl.rtt_at_ms(25.0), 30.0);
        assert_eq!(tl.rtt_at_ms(35.0), 30.0); // second period, 5 ms in
    }

    #[test]
    fn first_sample_after_zero_wraps_backwards() {
        // samples at 10 and 20 → period 30; t=5 lies on the wrap from (20,60) to (40,0)
        let tl = p("t_ms,rtt_ms\n10,0\n20,60\n").unwrap();
        assert!((tl.rtt_at_ms(5.0) - 15.0).abs() < 1e-9); // 60 + (0-60)*(35-20)/20 = 15
    }

    #[test]
    fn fifteen_ms_series_loops_every_15n() {
        let tl = p("t_ms,rtt_ms\n0,1\n15,2\n30,3\n").unwrap();
        assert_eq!(tl.period_ms(), 45.0);
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = p("t_ms,rtt_ms\n0,20\n0,30\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "t_ms"));
        assert!(
            e.to_string().starts_with("x.rtt.csv:3: field `t_ms`"),
            "{e}"
        );
        let e = p("t_ms,rtt_ms\n0,-1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "rtt_ms"));
        let e = p("t_ms,rtt_ms\n-5,1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "t_ms"));
        let e = p("t_ms,rtt_ms\n0,20ms\n").unwrap_err();
        assert!(e.msg.contains("expected a number"), "{e}");
        let e = p("").unwrap_err();
        assert!(e.msg.contains("empty"), "{e}");
        let e = p("t_ms,rtt_ms\n").unwrap_err();
        assert!(e.msg.contains("empty"), "{e}");
        let e = p("t,rtt\n0,1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "header"));
    }
}
