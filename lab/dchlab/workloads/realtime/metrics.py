"""What a real-time session's records mean: latencies, freezes, frame rate, bitrate.

Pure functions of time stamps (s, one monotonic clock), so tests give them
hand-computed inputs:
  * input-to-display latency of input s: the display time of the first frame (in
    display order) whose patch shows an input sequence number >= s, minus the time s
    was sent (the server draws the latest seq it received, so that frame is the first
    to reflect s); inputs no displayed frame reflects are "undelivered";
  * freezes: gaps > FREEZE_S between consecutive new frames displayed (the issue's
    definition), counted, with their total length; when the connection was lost, the
    gap from the last frame to the session's end is one more;
  * delivered frame rate: new frames displayed / (last display - first display);
  * bitrate: payload bits received / span of the arrivals.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

#: A gap longer than this without a new frame is a freeze (s).
FREEZE_S = 0.200


def input_to_display(
    sent: dict[int, float], shown: Sequence[tuple[float, int]]
) -> dict[int, float]:
    """{seq: latency s} of each input of `sent` ({seq: send time}) that a frame of
    `shown` ([(display time, seq in the patch)], any order) reflects."""
    out: dict[int, float] = {}
    pending = sorted(sent)
    i = 0
    best = 0
    for t, seq in sorted(shown):
        if seq <= best:
            continue
        best = seq
        while i < len(pending) and pending[i] <= best:
            s = pending[i]
            out[s] = t - sent[s]
            i += 1
    return out


def freezes(
    display_times: Iterable[float], threshold: float = FREEZE_S, end: float | None = None
) -> tuple[int, float]:
    """(count, total length s) of gaps > `threshold` between consecutive times, and,
    given `end` (a session whose connection was lost: it ends dark), from the last
    time to `end`."""
    ts = sorted(display_times)
    if end is not None and ts and end > ts[-1]:
        ts.append(end)
    gaps = [b - a for a, b in itertools.pairwise(ts) if b - a > threshold]
    return len(gaps), float(sum(gaps))


def frame_rate(display_times: Sequence[float]) -> float | None:
    """New frames per second over the span of `display_times` (None: < 2 frames)."""
    if len(display_times) < 2:
        return None
    span = max(display_times) - min(display_times)
    return (len(display_times) - 1) / span if span > 0 else None


def bitrate_bps(arrivals: Sequence[tuple[float, int]]) -> float | None:
    """Payload bit/s of [(arrival s, bytes)] over their span (None: < 2 packets)."""
    if len(arrivals) < 2:
        return None
    t0 = min(t for t, _ in arrivals)
    t1 = max(t for t, _ in arrivals)
    return 8 * sum(b for _, b in arrivals) / (t1 - t0) if t1 > t0 else None


def percentiles(values: Sequence[float], scale: float = 1000.0) -> dict[str, float | None]:
    """p50, p95, p99 and mean of `values` times `scale` (s -> ms by default)."""
    if not values:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    a = np.asarray(values, dtype=np.float64) * scale
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
        "mean": round(float(a.mean()), 2),
    }


def median_ms(values: Sequence[float]) -> float | None:
    """The median of `values` (s) in ms, None when empty or not finite."""
    if not values:
        return None
    m = float(np.median(values)) * 1000
    return round(m, 2) if math.isfinite(m) else None
