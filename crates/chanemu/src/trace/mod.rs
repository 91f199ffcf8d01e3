//! Readers for the three trace formats of docs/formats.md. Each parser takes the
//! file's text plus its path (for messages) and refuses bad input with a
//! [`TraceError`] naming the file, the line and the field.

pub mod capacity;
pub mod cellreplay;
pub mod mahimahi;
pub mod rtt;

use std::path::{Path, PathBuf};

/// A refused trace: `file:line: field `x`: what was expected`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}: field `{field}`: {msg}", file.display())]
pub struct TraceError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line number; 0 when the problem concerns the whole file.
    pub line: usize,
    /// The field (column) at fault.
    pub field: String,
    /// What was expected.
    pub msg: String,
}

impl TraceError {
    /// An error at `file:line` about `field`.
    pub fn new(file: &Path, line: usize, field: &str, msg: impl Into<String>) -> Self {
        TraceError {
            file: file.to_path_buf(),
            line,
            field: field.to_string(),
            msg: msg.into(),
        }
    }
}

/// Read a trace file, turning I/O errors into the same message shape.
pub fn read_text(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path)
        .map_err(|e| TraceError::new(path, 0, "file", format!("cannot read: {e}")))
}

/// Parse one numeric CSV field, naming it on failure.
pub(crate) fn parse_f64(file: &Path, line: usize, field: &str, s: &str) -> Result<f64, TraceError> {
    let v: f64 = s.trim().parse().map_err(|_| {
        TraceError::new(
            file,
            line,
            field,
            format!("expected a number, got {:?}", s.trim()),
        )
    })?;
    if !v.is_finite() {
        return Err(TraceError::new(
            file,
            line,
            field,
            format!("expected a finite number, got {s:?}"),
        ));
    }
    Ok(v)
}

/// Refuses a negative `v` (`unit` follows the 0 in the message, e.g. " Mbit/s").
pub(crate) fn non_negative<T: PartialOrd + Default + std::fmt::Display>(
    file: &Path,
    line: usize,
    field: &str,
    v: T,
    unit: &str,
) -> Result<T, TraceError> {
    if v < T::default() {
        return Err(TraceError::new(
            file,
            line,
            field,
            format!("expected ≥ 0{unit}, got {v}"),
        ));
    }
    Ok(v)
}

/// Splits a CSV trace into its header line (line number, text) and the content lines
/// after it; a trace without one is refused, naming the `expected` header and its
/// first column as the field.
pub(crate) fn csv_header<'a>(
    file: &Path,
    text: &'a str,
    expected: &str,
) -> Result<(NumberedLine<'a>, impl Iterator<Item = NumberedLine<'a>>), TraceError> {
    let mut lines = content_lines(text);
    let first_column = expected.split(',').next().unwrap_or(expected);
    let header = lines.next().ok_or_else(|| {
        TraceError::new(
            file,
            0,
            first_column,
            format!("empty trace: expected header `{expected}` and ≥ 1 row"),
        )
    })?;
    Ok((header, lines))
}

/// The comma-separated fields of row `line`, refused unless there are `n` of them
/// (`what` follows "expected N fields" in the message).
pub(crate) fn csv_fields<'a>(
    file: &Path,
    line: usize,
    row: &'a str,
    n: usize,
    what: &str,
) -> Result<Vec<&'a str>, TraceError> {
    let f: Vec<&str> = row.split(',').collect();
    if f.len() != n {
        return Err(TraceError::new(
            file,
            line,
            "row",
            format!("expected {n} fields{what}, got {}", f.len()),
        ));
    }
    Ok(f)
}

/// A line of a trace with its 1-based number.
pub(crate) type NumberedLine<'a> = (usize, &'a str);

/// Non-empty lines with their 1-based line numbers (blank lines and `#` comments skipped).
pub(crate) fn content_lines(text: &str) -> impl Iterator<Item = NumberedLine<'_>> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}
