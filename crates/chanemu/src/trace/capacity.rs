//! Per-second capacity series (`t_s,up_mbit,down_mbit`): one row per second.

use super::{csv_fields, csv_header, non_negative, parse_f64, TraceError};
use std::path::Path;

/// One column of a capacity series, in bit/s per second of the (looped) trace.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySeries {
    /// Bits per second, one value per second of the trace.
    pub bps: Vec<u64>,
}

impl CapacitySeries {
    /// Parse `text` and take the column named `column` (e.g. `up_mbit`).
    pub fn parse(file: &Path, text: &str, column: &str) -> Result<Self, TraceError> {
        let ((hl, header), lines) = csv_header(file, text, "t_s,up_mbit,down_mbit")?;
        let cols: Vec<&str> = header.split(',').map(str::trim).collect();
        if cols.first() != Some(&"t_s") {
            return Err(TraceError::new(
                file,
                hl,
                "header",
                format!("expected first column `t_s`, got {header:?}"),
            ));
        }
        let ci = cols.iter().position(|c| *c == column).ok_or_else(|| {
            TraceError::new(
                file,
                hl,
                column,
                format!("no such column; the header has {}", cols[1..].join(", ")),
            )
        })?;
        if !column.ends_with("_mbit") {
            return Err(TraceError::new(
                file,
                hl,
                column,
                "expected a column in Mbit/s (name ending in `_mbit`)",
            ));
        }
        let mut bps = Vec::new();
        for (ln, l) in lines {
            let f = csv_fields(file, ln, l, cols.len(), "")?;
            let t = parse_f64(file, ln, "t_s", f[0])?;
            if t != bps.len() as f64 {
                return Err(TraceError::new(
                    file,
                    ln,
                    "t_s",
                    format!(
                        "expected consecutive seconds from 0: {} here, got {t}",
                        bps.len()
                    ),
                ));
            }
            let mbit = parse_f64(file, ln, column, f[ci])?;
            let mbit = non_negative(file, ln, column, mbit, " Mbit/s")?;
            bps.push((mbit * 1e6).round() as u64);
        }
        if bps.is_empty() {
            return Err(TraceError::new(
                file,
                0,
                "t_s",
                "empty trace: no rows after the header",
            ));
        }
        if bps.iter().all(|&b| b == 0) {
            return Err(TraceError::new(
                file,
                0,
                column,
                "every second has 0 Mbit/s: the link would never deliver",
            ));
        }
        Ok(CapacitySeries { bps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str, col: &str) -> Result<CapacitySeries, TraceError> {
        CapacitySeries::parse(Path::new("c.cap.csv"), text, col)
    }

    #[test]
    fn picks_column() {
        let t = "t_s,up_mbit,down_mbit\n0,60,140.5\n1,60,131.2\n";
        assert_eq!(p(t, "up_mbit").unwrap().bps, vec![60_000_000, 60_000_000]);
        assert_eq!(
            p(t, "down_mbit").unwrap().bps,
            vec![140_500_000, 131_200_000]
        );
    }

    #[test]
    fn errors() {
        let e = p("t_s,up_mbit,down_mbit\n0,1,2\n2,1,2\n", "up_mbit").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "t_s"));
        let e = p("t_s,up_mbit,down_mbit\n0,-1,2\n", "up_mbit").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "up_mbit"));
        let e = p("t_s,up_mbit,down_mbit\n0,1,2\n", "up_kbit").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "up_kbit"));
        let e = p("t_s,up_kbit\n0,1\n", "up_kbit").unwrap_err();
        assert!(e.msg.contains("Mbit/s"), "{e}");
        let e = p("t_s,up_mbit,down_mbit\n0,1\n", "up_mbit").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "row"));
        let e = p("t_s,up_mbit,down_mbit\n0,0,1\n", "up_mbit").unwrap_err();
        assert!(e.msg.contains("never deliver"), "{e}");
        let e = p("t_s,up_mbit,down_mbit\n", "up_mbit").unwrap_err();
        assert!(e.msg.contains("empty"), "{e}");
    }
}
