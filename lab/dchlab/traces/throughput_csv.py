"""Per-second throughput CSV (e.g. Raca et al. MMSys'20 5G dataset) -> capacity series.

The dataset logs about one row per second, but its `Timestamp` column
(YYYY.MM.DD_HH.MM.SS) drifts: some seconds have two rows, some none. Rows are
therefore binned by their timestamp second:
- several rows in one second are averaged;
- a second without rows inside a stretch (gap <= max_gap_s) repeats the
  previous second's value;
- rows whose `NetworkMode` is not selected are dropped; longer gaps (e.g. a
  stretch on 4G when importing 5G) are cut out and the remaining stretches
  joined, so the series only contains the selected technology.
Rates are converted from `unit` (kbit/s by default) to Mbit/s.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from dchlab.traces.capacity import CapacitySeries
from dchlab.traces.errors import TraceFormatError

MODES = {
    "5G": {"5G", "NR", "NR5G"},
    "4G": {"LTE", "4G", "LTE-A", "LTE+"},
    "3G": {"HSPA+", "HSPA", "HSDPA", "HSUPA", "UMTS", "3G"},
}
UNITS = {"bit": 1e-6, "kbit": 1e-3, "mbit": 1.0}
# The defaults fit the Raca et al. 5G dataset; `dch traces import csv` offers the same.
DEFAULT_MODE = "5G"
DEFAULT_DOWN_COL = "DL_bitrate"
DEFAULT_UP_COL = "UL_bitrate"
DEFAULT_UNIT = "kbit"
DEFAULT_MAX_GAP_S = 3
TIME_FORMATS = ("%Y.%m.%d_%H.%M.%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")


@dataclass
class ThroughputImport:
    series: CapacitySeries
    rows_total: int
    rows_used: int
    stretches: int
    notes: list[str] = field(default_factory=list)


def _parse_time(path: Path, line: int, text: str) -> float:
    text = text.strip()
    for fmt in TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            pass
    try:
        return float(text)  # epoch seconds
    except ValueError:
        raise TraceFormatError(
            path,
            f"expected a time like 2019.12.16_13.40.04 or epoch seconds, got {text!r}",
            line,
            "Timestamp",
        ) from None


def _rate(path: Path, line: int, col: str, text: str, scale: float) -> float:
    try:
        v = float(text)
    except ValueError:
        raise TraceFormatError(path, f"expected a number, got {text!r}", line, col) from None
    if not math.isfinite(v) or v < 0:
        raise TraceFormatError(path, f"expected a rate >= 0, got {text!r}", line, col)
    return v * scale


def import_throughput_csv(
    path: Path,
    mode: str = DEFAULT_MODE,
    down_col: str = DEFAULT_DOWN_COL,
    up_col: str = DEFAULT_UP_COL,
    unit: str = DEFAULT_UNIT,
    time_col: str = "Timestamp",
    mode_col: str = "NetworkMode",
    max_gap_s: int = DEFAULT_MAX_GAP_S,
) -> ThroughputImport:
    scale = UNITS[unit]
    wanted = None if mode.lower() == "all" else MODES.get(mode.upper(), {mode})
    f = path.open(newline="")
    reader = csv.DictReader(f)
    try:
        with f:
            secs, ups, downs, total = _read_rows(
                path, reader, wanted, scale, time_col, down_col, up_col, mode_col
            )
    except UnicodeDecodeError as e:
        raise TraceFormatError(path, f"not a text file ({e})") from None
    except csv.Error as e:
        # e.g. a line longer than the csv module's field limit (128 KiB): not a table
        raise TraceFormatError(path, f"not a CSV table ({e})", reader.line_num or None) from None
    if not secs:
        raise TraceFormatError(path, f"no rows with {mode_col} in {sorted(wanted or [])}")
    s = np.asarray(secs)
    if np.any(np.diff(s) < 0):
        bad = int(np.flatnonzero(np.diff(s) < 0)[0])
        raise TraceFormatError(
            path, f"timestamps go backwards at data row {bad + 2}", field=time_col
        )
    uniq, inverse = np.unique(s, return_inverse=True)
    counts = np.bincount(inverse)
    up_s = np.bincount(inverse, weights=ups) / counts
    down_s = np.bincount(inverse, weights=downs) / counts
    out_up: list[float] = []
    out_down: list[float] = []
    stretches = 1
    filled = 0
    for i, sec in enumerate(uniq):
        if i > 0:
            gap = int(sec - uniq[i - 1]) - 1
            if 0 < gap <= max_gap_s:
                out_up.extend([out_up[-1]] * gap)
                out_down.extend([out_down[-1]] * gap)
                filled += gap
            elif gap > max_gap_s:
                stretches += 1
        out_up.append(float(up_s[i]))
        out_down.append(float(down_s[i]))
    notes = [
        f"{len(secs)} of {total} rows with mode {mode}",
        f"{int((counts > 1).sum())} seconds averaged from several rows",
        f"{filled} missing seconds filled",
        f"{stretches} stretch(es) joined",
    ]
    series = CapacitySeries(np.round(np.asarray(out_up), 6), np.round(np.asarray(out_down), 6))
    return ThroughputImport(series, total, len(secs), stretches, notes)


def _read_rows(
    path: Path,
    reader: csv.DictReader[str],
    wanted: set[str] | None,
    scale: float,
    time_col: str,
    down_col: str,
    up_col: str,
    mode_col: str,
) -> tuple[list[int], list[float], list[float], int]:
    """The (second, up, down) of every data row whose mode is `wanted` (all if None),
    and how many data rows there were."""
    header = reader.fieldnames or []
    needed = [time_col, down_col, up_col] + ([mode_col] if wanted else [])
    for col in needed:
        if col not in header:
            raise TraceFormatError(
                path, f"missing column {col!r} (header: {','.join(header)})", line=1, field=col
            )
    secs: list[int] = []
    ups: list[float] = []
    downs: list[float] = []
    total = 0
    t0: float | None = None
    for row in reader:
        total += 1
        no = reader.line_num
        if None in row or any(row.get(c) is None for c in needed):
            raise TraceFormatError(path, f"expected {len(header)} columns", no)
        t = _parse_time(path, no, row[time_col])
        t0 = t if t0 is None else t0
        down = _rate(path, no, down_col, row[down_col], scale)
        up = _rate(path, no, up_col, row[up_col], scale)
        if wanted and row[mode_col].strip() not in wanted:
            continue
        secs.append(round(t - t0))
        ups.append(up)
        downs.append(down)
    return secs, ups, downs, total
