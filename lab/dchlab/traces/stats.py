"""Table 1 statistics of trace files: span, RTT min/p50/p98/mean/CV, mean up/down.

RTT statistics are over samples (synthesized and ping timelines are evenly
spaced, where that equals the time average). Span is the loop period.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dchlab.traces.capacity import CapacitySeries, read_capacity
from dchlab.traces.errors import TraceFormatError
from dchlab.traces.mahimahi import opportunities_to_rate, read_mahimahi
from dchlab.traces.timeline import RttTimeline, read_rtt
from dchlab.units import is_uint

COLUMNS = [
    "span_min",
    "rtt_min",
    "rtt_p50",
    "rtt_p98",
    "rtt_mean",
    "rtt_cv",
    "up_mbit",
    "down_mbit",
]


def rtt_stats(tl: RttTimeline) -> dict[str, float]:
    v = tl.rtt_ms
    mean = float(v.mean())
    return {
        "min": float(v.min()),
        "p50": float(np.percentile(v, 50)),
        "p98": float(np.percentile(v, 98)),
        "mean": mean,
        "cv": float(v.std() / mean) if mean > 0 else float("nan"),
    }


def _rtt_row(tl: RttTimeline) -> dict[str, Any]:
    return {"span_min": tl.period_ms / 60000, **{f"rtt_{k}": v for k, v in rtt_stats(tl).items()}}


def _cap_row(cap: CapacitySeries) -> dict[str, Any]:
    return {
        "span_min": cap.period_ms / 60000,
        "up_mbit": float(cap.up_mbit.mean()),
        "down_mbit": float(cap.down_mbit.mean()),
    }


def sniff(path: Path) -> str:
    """rtt | cap | profile | mahimahi | ping, from the name and the first line."""
    if path.suffix == ".toml":
        return "profile"
    try:
        with path.open() as f:
            first = f.readline().strip().replace(" ", "")
            second = f.readline().strip()
    except UnicodeDecodeError:
        raise TraceFormatError(path, "not a text file") from None
    if first == "t_ms,rtt_ms":
        return "rtt"
    if first == "t_s,up_mbit,down_mbit":
        return "cap"
    if is_uint(first) and (is_uint(second) or not second):
        return "mahimahi"  # integer ms per line (ping logs may start with one epoch line)
    if first.startswith("PING ") or is_uint(first) or "bytes from" in first:
        return "ping"
    raise TraceFormatError(
        path,
        "unrecognized trace: expected a header t_ms,rtt_ms or t_s,up_mbit,down_mbit, "
        "a profile .toml, a Mahimahi trace (.up/.down) or ping output",
        line=1,
    )


def file_stats(path: str | Path, seed: int = 1) -> dict[str, Any]:
    """One Table 1 row for a trace file or profile; columns absent for a file are None."""
    path = Path(path)
    kind = sniff(path)
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row["file"] = str(path)
    row["kind"] = kind
    if kind == "rtt":
        row.update(_rtt_row(read_rtt(path)))
    elif kind == "cap":
        row.update(_cap_row(read_capacity(path)))
    elif kind == "mahimahi":
        rate = opportunities_to_rate(read_mahimahi(path))
        row.update({"span_min": len(rate) / 60, "down_mbit": float(rate.mean())})
    elif kind == "ping":
        from dchlab.traces.ping import parse_ping

        row.update(_rtt_row(parse_ping(path).timeline))
    else:
        from dchlab.traces.profiles import profile_summary

        s = profile_summary(str(path), seed)
        row.update({k: s.get(k) for k in COLUMNS if k in s})
        row["rtt_mean"] = s["mean_rtt_ms"]
        row["up_mbit"], row["down_mbit"] = s["up_mbit"], s["down_mbit"]
        row["span_min"] = s["period_ms"] / 60000 if s["period_ms"] else None
    return row
