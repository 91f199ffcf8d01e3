//! Mahimahi link traces, unchanged: one line per 1500-byte delivery opportunity,
//! integer ms, non-decreasing; the trace loops with period = last timestamp.

use super::{content_lines, non_negative, TraceError};
use std::path::Path;

/// Bytes one delivery opportunity can carry (Mahimahi's PACKET_SIZE).
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// A Mahimahi link trace.
#[derive(Debug, Clone, PartialEq)]
pub struct MahimahiTrace {
    /// Opportunity timestamps (ms), non-decreasing, last > 0.
    pub opportunities_ms: Vec<u64>,
}

impl MahimahiTrace {
    /// Parses a Mahimahi trace (`file` names it in errors).
    pub fn parse(file: &Path, text: &str) -> Result<Self, TraceError> {
        let mut ops: Vec<u64> = Vec::new();
        for (ln, l) in content_lines(text) {
            let v: i64 = l.parse().map_err(|_| {
                TraceError::new(
                    file,
                    ln,
                    "timestamp_ms",
                    format!("expected an integer number of ms, got {l:?}"),
                )
            })?;
            let v = non_negative(file, ln, "timestamp_ms", v, "")? as u64;
            if let Some(&prev) = ops.last() {
                if v < prev {
                    return Err(TraceError::new(
                        file,
                        ln,
                        "timestamp_ms",
                        format!("expected non-decreasing timestamps, got {v} after {prev}"),
                    ));
                }
            }
            ops.push(v);
        }
        match ops.last() {
            None => Err(TraceError::new(
                file,
                0,
                "timestamp_ms",
                "empty trace: expected ≥ 1 delivery opportunity",
            )),
            Some(0) => Err(TraceError::new(
                file,
                ops.len(),
                "timestamp_ms",
                "the last timestamp (the loop period) must be > 0",
            )),
            Some(_) => Ok(MahimahiTrace {
                opportunities_ms: ops,
            }),
        }
    }

    /// Length of one loop of the trace (ms).
    pub fn period_ms(&self) -> u64 {
        *self.opportunities_ms.last().expect("validated non-empty")
    }

    /// Mean capacity in bit/s over one period.
    pub fn mean_bps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0 * 1000.0
            / self.period_ms() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str) -> Result<MahimahiTrace, TraceError> {
        MahimahiTrace::parse(Path::new("l.up"), t)
    }

    #[test]
    fn parses_and_reports_capacity() {
        let t = p("1\n1\n2\n4\n").unwrap();
        assert_eq!(t.period_ms(), 4);
        // 4 opportunities × 1500 B × 8 / 4 ms = 12 Mbit/s
        assert_eq!(t.mean_bps(), 12e6);
    }

    #[test]
    fn errors() {
        let e = p("1\n3\n2\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "timestamp_ms"));
        let e = p("1\n1.5\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = p("-1\n").unwrap_err();
        assert!(e.msg.contains("≥ 0"));
        let e = p("\n").unwrap_err();
        assert!(e.msg.contains("empty"));
        let e = p("0\n0\n").unwrap_err();
        assert!(e.msg.contains("period"));
    }
}
