//! CellReplay trace directories, unchanged (github williamsentosa95/cellreplay, the
//! files its `mm-cellular` takes; readers mirror `CellularQueue::CellularQueue` in
//! `src/frontend/cellular_queue.cc`). Per direction (`up`/`down`):
//!
//! - `<dir>-delay-light-pdo`: one line per recorded packet train,
//!   `TIME_MS BASE_DELAY_MS PDO_MS...` separated by single spaces: when the train
//!   was sent (ms, non-decreasing), the one-way delay of its first packet, and the
//!   light packet-delivery opportunities (ms after the train's first packet). At
//!   least three lines; the trace loops with period = the last line's time.
//! - `<dir>-heavy-pdo`: one integer ms per line, non-decreasing, last > 0: the
//!   delivery opportunities a saturating sender saw (Mahimahi's link format, but
//!   each opportunity carries 1400 bytes); loops with period = the last value.
//! - `latency-offset-<dir>` (optional): `SIZE_BYTES OFFSET_MS` per line, sizes
//!   100, 200, 300, ... in that order: extra one-way delay by packet size.
//!
//! A start offset `start_ms` mirrors `--start-timestamp`: lines before it are
//! dropped and the rest shifted by it (both time-stamped files).

use super::{parse_f64, read_text, TraceError};
use std::path::{Path, PathBuf};

/// One recorded packet train of a light trace.
#[derive(Debug, Clone, PartialEq)]
pub struct LightTrain {
    /// When the train was sent (ms since the trace start, after the start offset).
    pub time_ms: u64,
    /// One-way delay of its first packet (ms).
    pub base_delay_ms: i64,
    /// Light delivery opportunities (ms after the train's first packet), ≥ 1.
    pub pdos_ms: Vec<i64>,
}

/// A `*-delay-light-pdo` file.
#[derive(Debug, Clone, PartialEq)]
pub struct LightTrace {
    /// The trains, ≥ 3, times non-decreasing.
    pub trains: Vec<LightTrain>,
}

/// A `*-heavy-pdo` file.
#[derive(Debug, Clone, PartialEq)]
pub struct HeavyTrace {
    /// Opportunity times (ms), non-decreasing, last > 0.
    pub opportunities_ms: Vec<u64>,
}

/// A `latency-offset-*` file: offset (ms) for 100, 200, ... bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeOffsets {
    /// `offsets_ms[i]` applies to packets of (i + 1)·100 bytes.
    pub offsets_ms: Vec<f64>,
}

/// The three files of one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct CellReplayDir {
    /// Base delays and light PDOs.
    pub light: LightTrace,
    /// Heavy PDOs.
    pub heavy: HeavyTrace,
    /// Packet-size latency offsets, if the file exists.
    pub offsets: Option<SizeOffsets>,
}

/// The direction of a CellReplay file set (`up` or `down` in its file names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellReplaySide {
    /// `up-*`, `latency-offset-up`.
    Up,
    /// `down-*`, `latency-offset-down`.
    Down,
}

impl CellReplaySide {
    /// `up` or `down`, as in the file names.
    pub fn as_str(self) -> &'static str {
        match self {
            CellReplaySide::Up => "up",
            CellReplaySide::Down => "down",
        }
    }
}

impl CellReplayDir {
    /// The file names of `side` in `dir`: (light, heavy, offsets).
    pub fn paths(dir: &Path, side: CellReplaySide) -> (PathBuf, PathBuf, PathBuf) {
        let w = side.as_str();
        (
            dir.join(format!("{w}-delay-light-pdo")),
            dir.join(format!("{w}-heavy-pdo")),
            dir.join(format!("latency-offset-{w}")),
        )
    }

    /// Loads `side` of the trace directory `dir`, starting `start_ms` into it (the
    /// offsets file is optional: mm-cellular applies none without it).
    pub fn load(dir: &Path, side: CellReplaySide, start_ms: u64) -> Result<Self, TraceError> {
        let (l, h, o) = Self::paths(dir, side);
        let light = LightTrace::parse(&l, &read_text(&l)?, start_ms)?;
        let heavy = HeavyTrace::parse(&h, &read_text(&h)?, start_ms)?;
        let offsets = if o.exists() {
            Some(SizeOffsets::parse(&o, &read_text(&o)?)?)
        } else {
            None
        };
        Ok(CellReplayDir {
            light,
            heavy,
            offsets,
        })
    }
}

/// An integer field as `myatoi` takes it (no sign check here).
fn int(file: &Path, line: usize, field: &str, s: &str) -> Result<i64, TraceError> {
    s.parse().map_err(|_| {
        TraceError::new(
            file,
            line,
            field,
            format!("expected an integer number of ms, got {s:?}"),
        )
    })
}

/// A non-negative integer timestamp.
fn stamp(file: &Path, line: usize, field: &str, s: &str) -> Result<u64, TraceError> {
    let v = int(file, line, field, s)?;
    u64::try_from(v)
        .map_err(|_| TraceError::new(file, line, field, format!("expected ≥ 0 ms, got {v}")))
}

/// Lines with their 1-based numbers; mm-cellular refuses empty lines in the
/// time-stamped files, and so do we (trailing newline excepted).
fn lines_no_blank<'a>(
    file: &'a Path,
    text: &'a str,
    field: &'a str,
) -> impl Iterator<Item = Result<(usize, &'a str), TraceError>> + 'a {
    text.lines().enumerate().map(move |(i, l)| {
        let l = l.trim_end_matches('\r');
        if l.trim().is_empty() {
            Err(TraceError::new(
                file,
                i + 1,
                field,
                "invalid empty line (mm-cellular refuses it too)",
            ))
        } else {
            Ok((i + 1, l))
        }
    })
}

fn non_decreasing(
    file: &Path,
    line: usize,
    field: &str,
    v: u64,
    prev: Option<u64>,
) -> Result<(), TraceError> {
    match prev {
        Some(p) if v < p => Err(TraceError::new(
            file,
            line,
            field,
            format!("expected non-decreasing timestamps, got {v} after {p}"),
        )),
        _ => Ok(()),
    }
}

impl LightTrace {
    /// Parses a `*-delay-light-pdo` file (`file` names it in errors).
    pub fn parse(file: &Path, text: &str, start_ms: u64) -> Result<Self, TraceError> {
        let mut trains: Vec<LightTrain> = Vec::new();
        for r in lines_no_blank(file, text, "time_ms") {
            let (ln, l) = r?;
            // single spaces, as mm-cellular's getline(iss, word, ' '): a doubled
            // space is an empty field there and an error here
            let mut words = l.trim_end().split(' ');
            let t = stamp(file, ln, "time_ms", words.next().unwrap_or(""))?;
            let Some(d) = words.next() else {
                return Err(TraceError::new(
                    file,
                    ln,
                    "base_delay_ms",
                    "expected `TIME_MS BASE_DELAY_MS PDO_MS...`, got one field",
                ));
            };
            let d = int(file, ln, "base_delay_ms", d)?;
            if d < 0 {
                return Err(TraceError::new(
                    file,
                    ln,
                    "base_delay_ms",
                    format!("expected ≥ 0 ms, got {d}"),
                ));
            }
            let pdos = words
                .enumerate()
                .map(|(i, w)| int(file, ln, &format!("pdo_ms[{i}]"), w))
                .collect::<Result<Vec<_>, _>>()?;
            if pdos.is_empty() {
                // mm-cellular reads pdo[size - 1] of such a train: undefined
                return Err(TraceError::new(
                    file,
                    ln,
                    "pdo_ms[0]",
                    "expected ≥ 1 light PDO after the base delay",
                ));
            }
            if t < start_ms {
                continue;
            }
            let t = t - start_ms;
            non_decreasing(file, ln, "time_ms", t, trains.last().map(|x| x.time_ms))?;
            trains.push(LightTrain {
                time_ms: t,
                base_delay_ms: d,
                pdos_ms: pdos,
            });
        }
        if trains.last().is_some_and(|t| t.time_ms == 0) {
            // mm-cellular would loop forever looking for the next train
            return Err(TraceError::new(
                file,
                0,
                "time_ms",
                "the last train's time (the loop period) must be > 0",
            ));
        }
        if trains.len() < 3 {
            return Err(TraceError::new(
                file,
                0,
                "time_ms",
                format!(
                    "expected ≥ 3 trains at or after the start offset, got {}",
                    trains.len()
                ),
            ));
        }
        Ok(LightTrace { trains })
    }

    /// Length of one loop (ms): the last train's time.
    pub fn period_ms(&self) -> u64 {
        self.trains.last().expect("validated ≥ 3").time_ms
    }
}

impl HeavyTrace {
    /// Parses a `*-heavy-pdo` file (`file` names it in errors).
    pub fn parse(file: &Path, text: &str, start_ms: u64) -> Result<Self, TraceError> {
        let mut ops: Vec<u64> = Vec::new();
        for r in lines_no_blank(file, text, "timestamp_ms") {
            let (ln, l) = r?;
            let v = stamp(file, ln, "timestamp_ms", l.trim())?;
            if v < start_ms {
                continue;
            }
            let v = v - start_ms;
            non_decreasing(file, ln, "timestamp_ms", v, ops.last().copied())?;
            ops.push(v);
        }
        match ops.last() {
            None => Err(TraceError::new(
                file,
                0,
                "timestamp_ms",
                "no opportunity at or after the start offset: expected ≥ 1",
            )),
            Some(0) => Err(TraceError::new(
                file,
                0,
                "timestamp_ms",
                "the last timestamp (the loop period) must be > 0",
            )),
            Some(_) => Ok(HeavyTrace {
                opportunities_ms: ops,
            }),
        }
    }

    /// Length of one loop (ms).
    pub fn period_ms(&self) -> u64 {
        *self.opportunities_ms.last().expect("validated non-empty")
    }
}

impl SizeOffsets {
    /// Parses a `latency-offset-*` file (`file` names it in errors). Blank lines
    /// are skipped, as mm-cellular does.
    pub fn parse(file: &Path, text: &str) -> Result<Self, TraceError> {
        let mut offsets_ms = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let ln = i + 1;
            let l = l.trim();
            if l.is_empty() {
                continue;
            }
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() != 2 {
                return Err(TraceError::new(
                    file,
                    ln,
                    "row",
                    format!("expected `SIZE_BYTES OFFSET_MS`, got {} fields", f.len()),
                ));
            }
            let want = (offsets_ms.len() as i64 + 1) * 100;
            let size = f[0].parse::<i64>().ok();
            if size != Some(want) {
                return Err(TraceError::new(
                    file,
                    ln,
                    "size_bytes",
                    format!(
                        "expected {want} (sizes start at 100 and step by 100), got {:?}",
                        f[0]
                    ),
                ));
            }
            offsets_ms.push(parse_f64(file, ln, "offset_ms", f[1])?);
        }
        if offsets_ms.is_empty() {
            return Err(TraceError::new(
                file,
                0,
                "size_bytes",
                "empty file: expected `100 OFFSET_MS` and more lines",
            ));
        }
        Ok(SizeOffsets { offsets_ms })
    }

    /// The offset (ms) for a packet of `size` bytes, as
    /// `CellularQueue::get_psize_latency_offset`: the first entry below 100 B, the
    /// last at and beyond the last size, linear between entries.
    pub fn offset_ms(&self, size: u32) -> f64 {
        let o = &self.offsets_ms;
        let idx = (size / 100) as usize;
        let rem = size % 100;
        if idx == 0 {
            o[0]
        } else if idx >= o.len() {
            // the source: (size / 100) − 1 ≥ entries − 1
            o[o.len() - 1]
        } else {
            let i = idx - 1;
            o[i] + (rem as f64 / 100.0) * (o[i + 1] - o[i])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn light(t: &str, start: u64) -> Result<LightTrace, TraceError> {
        LightTrace::parse(Path::new("up-delay-light-pdo"), t, start)
    }

    #[test]
    fn light_trace_parses_and_applies_the_start_offset() {
        let t = light("0 20 0 2 5\n100 30 1\n200 40 3 4\n", 0).unwrap();
        assert_eq!(t.trains.len(), 3);
        assert_eq!(t.trains[0].pdos_ms, vec![0, 2, 5]);
        assert_eq!(t.trains[1].base_delay_ms, 30);
        assert_eq!(t.period_ms(), 200);
        // --start-timestamp=100 drops the first line and shifts the others by 100
        let s = light("0 20 0\n100 30 1\n200 40 3\n300 50 6\n", 100).unwrap();
        assert_eq!(
            s.trains.iter().map(|x| x.time_ms).collect::<Vec<_>>(),
            vec![0, 100, 200]
        );
    }

    #[test]
    fn light_trace_errors_name_file_line_and_field() {
        let e = light("0 20 0\n100 x 1\n200 40 3\n", 0).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "base_delay_ms"));
        assert!(e
            .to_string()
            .starts_with("up-delay-light-pdo:2: field `base_delay_ms`"));
        let e = light("0 20 0\n100 30 1  2\n200 40 3\n", 0).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "pdo_ms[1]"));
        let e = light("0 20 0\n\n200 40 3\n", 0).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.msg.contains("empty line"));
        let e = light("0 20 0\n100 30\n200 40 3\n", 0).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "pdo_ms[0]"));
        let e = light("0 20 0\n300 30 1\n200 40 3\n", 0).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "time_ms"));
        let e = light("0 -1 0\n100 30 1\n200 40 3\n", 0).unwrap_err();
        assert!(e.msg.contains("≥ 0"));
        // mm-cellular: "there should be at least three lines"
        let e = light("0 20 0\n100 30 1\n", 0).unwrap_err();
        assert!(e.msg.contains("≥ 3"));
    }

    #[test]
    fn heavy_trace_parses_with_offset_and_refuses_bad_lines() {
        let p = |t: &str, s| HeavyTrace::parse(Path::new("down-heavy-pdo"), t, s);
        assert_eq!(p("1\n1\n3\n", 0).unwrap().period_ms(), 3);
        assert_eq!(p("1\n2\n5\n", 2).unwrap().opportunities_ms, vec![0, 3]);
        let e = p("1\n3\n2\n", 0).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "timestamp_ms"));
        let e = p("1\n1.5\n", 0).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(p("0\n0\n", 0).unwrap_err().msg.contains("period"));
        assert!(p("1\n", 5).unwrap_err().msg.contains("start offset"));
    }

    #[test]
    fn size_offsets_interpolate_as_get_psize_latency_offset() {
        let f = Path::new("latency-offset-up");
        let o = SizeOffsets::parse(f, "100 0.5\n200 1.5\n300 4\n").unwrap();
        assert_eq!(o.offset_ms(40), 0.5); // below 100 B: the first entry
        assert_eq!(o.offset_ms(100), 0.5);
        assert_eq!(o.offset_ms(150), 1.0); // 0.5 + 0.5 · (1.5 − 0.5)
        assert_eq!(o.offset_ms(250), 2.75); // 1.5 + 0.5 · (4 − 1.5)
        assert_eq!(o.offset_ms(300), 4.0); // the last size and beyond: the last entry
        assert_eq!(o.offset_ms(1400), 4.0);
        let e = SizeOffsets::parse(f, "100 0.5\n300 1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "size_bytes"));
        let e = SizeOffsets::parse(f, "100 x\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "offset_ms"));
        let e = SizeOffsets::parse(f, "100\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "row"));
    }

    fn testdata() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/cellreplay")
    }

    #[test]
    fn loads_the_synthetic_directory_per_side() {
        let up = CellReplayDir::load(&testdata(), CellReplaySide::Up, 0).unwrap();
        assert_eq!(up.light.trains[1].pdos_ms, vec![0, 2, 4, 6]);
        assert_eq!(up.heavy.period_ms(), 1000);
        assert_eq!(up.offsets.as_ref().unwrap().offset_ms(1400), 6.5);
        let down = CellReplayDir::load(&testdata(), CellReplaySide::Down, 0).unwrap();
        assert_eq!(down.light.trains[2].base_delay_ms, 22);
        assert_eq!(down.heavy.opportunities_ms.len(), 200);
        // start offset 500: only the trains at 500 and 1000 remain → refused
        let e = CellReplayDir::load(&testdata(), CellReplaySide::Down, 500).unwrap_err();
        assert!(e.msg.contains("≥ 3 trains"), "{e}");
    }

    #[test]
    fn a_missing_or_malformed_file_is_named() {
        let e = CellReplayDir::load(Path::new("/nonexistent"), CellReplaySide::Up, 0).unwrap_err();
        assert!(e.file.ends_with("up-delay-light-pdo"), "{e}");
        let d = tempfile::tempdir().unwrap();
        for f in [
            "down-delay-light-pdo",
            "down-heavy-pdo",
            "latency-offset-down",
        ] {
            std::fs::copy(testdata().join(f), d.path().join(f)).unwrap();
        }
        std::fs::write(d.path().join("down-heavy-pdo"), "5\n10\nten\n").unwrap();
        let e = CellReplayDir::load(d.path(), CellReplaySide::Down, 0).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "timestamp_ms"));
        assert!(
            e.to_string()
                .contains("down-heavy-pdo:3: field `timestamp_ms`"),
            "{e}"
        );
        // without a latency-offset file, no offsets (mm-cellular's default)
        std::fs::remove_file(d.path().join("latency-offset-down")).unwrap();
        std::fs::copy(
            testdata().join("down-heavy-pdo"),
            d.path().join("down-heavy-pdo"),
        )
        .unwrap();
        assert_eq!(
            CellReplayDir::load(d.path(), CellReplaySide::Down, 0)
                .unwrap()
                .offsets,
            None
        );
    }
}
