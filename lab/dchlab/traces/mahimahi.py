"""Mahimahi link traces: one 1500-byte delivery opportunity per line (integer ms).

Reading turns a trace into a per-second rate (opportunities in [n s, n+1 s) x
1500 B x 8 / 10^6 Mbit). Writing turns a per-second rate series into
opportunities: the cumulative byte budget grows linearly inside each second and
an opportunity is placed at the first millisecond where it covers another
1500 B, so every second carries its rate to within one packet and the fraction
is carried into the next second. If the last opportunity falls before the end
of the series, one more is added at the end, so the trace loops with exactly
the series' period (Mahimahi loops with period = last timestamp): the last
second may carry one packet (12 kbit) more than asked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from dchlab.traces.atomic import atomic_write_text
from dchlab.traces.errors import TraceFormatError
from dchlab.units import is_uint

PACKET_BYTES = 1500
MBIT_PER_OPPORTUNITY = PACKET_BYTES * 8 / 1e6


def read_mahimahi(path: str | Path) -> npt.NDArray[np.int64]:
    """Opportunity timestamps (ms), validated: integers >= 0, non-decreasing, last > 0."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as e:
        raise TraceFormatError(path, f"not a Mahimahi trace: not a text file ({e})") from None
    out: list[int] = []
    prev = 0
    for no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if not is_uint(line):
            raise TraceFormatError(
                path, f"expected an integer ms timestamp, got {line!r}", no, "timestamp"
            )
        v = int(line)
        if v < prev:
            raise TraceFormatError(
                path, f"timestamps must not decrease ({v} after {prev})", no, "timestamp"
            )
        prev = v
        out.append(v)
    if not out or out[-1] == 0:
        raise TraceFormatError(path, "empty trace or last timestamp 0 (the loop period would be 0)")
    return np.asarray(out, dtype=np.int64)


def opportunities_to_rate(ts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per-second Mbit/s over the loop period (last timestamp, rounded up to whole s).

    Second n holds the opportunities in (1000 n, 1000 (n+1)] ms (t = 0 goes to
    second 0), matching the writer, which stamps budget earned during a
    millisecond at that millisecond's end.
    """
    period = int(ts[-1])
    seconds = max(-(-period // 1000), 1)
    sec = np.clip((ts - 1) // 1000, 0, seconds - 1)
    counts = np.bincount(sec, minlength=seconds)[:seconds]
    rate: npt.NDArray[np.float64] = counts.astype(np.float64) * MBIT_PER_OPPORTUNITY
    return rate


def rate_to_opportunities(rate_mbit: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    rate = np.asarray(rate_mbit, dtype=float)
    if len(rate) == 0 or np.any(rate < 0) or not np.all(np.isfinite(rate)):
        raise ValueError("rate series must be non-empty, finite and >= 0")
    # Packets per ms, per millisecond of the series.
    per_ms = np.repeat(rate * 1e6 / 8 / PACKET_BYTES / 1000.0, 1000)
    cum = np.cumsum(per_ms)  # packets available by the end of each ms (index 0 = ms 1)
    total = int(np.floor(cum[-1] + 1e-6))
    if total == 0:
        raise ValueError("rate series carries less than one 1500-byte packet in total")
    k = np.arange(1, total + 1)
    ts = np.searchsorted(cum, k - 1e-6) + 1  # first ms whose budget covers packet k
    end = len(rate) * 1000
    if ts[-1] < end:  # pin the loop period with one extra opportunity at the end
        ts = np.append(ts, end)
    return ts.astype(np.int64)


def write_mahimahi(path: str | Path, ts: npt.NDArray[np.int64]) -> None:
    atomic_write_text(Path(path), "\n".join(map(str, ts.tolist())) + "\n")
