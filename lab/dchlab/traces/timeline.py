"""RTT timelines (`*.rtt.csv`, docs/formats.md): read, validate, write.

A timeline is two float arrays: `t_ms` strictly increasing from >= 0 and
`rtt_ms` >= 0. Its loop period is `t_last + (t_last - t_prev)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dchlab.traces.atomic import atomic_write_text
from dchlab.traces.csv_rows import csv_rows, number
from dchlab.traces.errors import TraceFormatError

HEADER = "t_ms,rtt_ms"


@dataclass
class RttTimeline:
    t_ms: npt.NDArray[np.float64]
    rtt_ms: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.t_ms)

    @property
    def period_ms(self) -> float:
        """Loop period: one more sample spacing after the last sample."""
        if len(self.t_ms) < 2:
            return float(self.t_ms[-1]) if len(self.t_ms) else 0.0
        return float(self.t_ms[-1] + (self.t_ms[-1] - self.t_ms[-2]))


def read_rtt(path: str | Path) -> RttTimeline:
    """Parse a `t_ms,rtt_ms` file; every problem names file, line and field."""
    path = Path(path)
    ts: list[float] = []
    rtts: list[float] = []
    prev = -math.inf
    for no, parts in csv_rows(path, HEADER):
        t = number(path, no, "t_ms", parts[0])
        rtt = number(path, no, "rtt_ms", parts[1])
        if t < 0:
            raise TraceFormatError(path, f"must be >= 0, got {parts[0]}", no, "t_ms")
        if t <= prev:
            raise TraceFormatError(
                path, f"must be strictly increasing, got {parts[0]} after {prev:g}", no, "t_ms"
            )
        if rtt < 0:
            raise TraceFormatError(path, f"must be >= 0, got {parts[1]}", no, "rtt_ms")
        prev = t
        ts.append(t)
        rtts.append(rtt)
    if not ts:
        raise TraceFormatError(path, "no samples after the header", line=1)
    return RttTimeline(np.asarray(ts), np.asarray(rtts))


def format_rtt(tl: RttTimeline) -> str:
    """CSV text; integral times are written without decimals, RTTs with 0.01 ms."""
    t = tl.t_ms
    if np.all(t == np.round(t)):
        t_txt = [str(int(v)) for v in t]
    else:
        t_txt = [f"{v:.3f}".rstrip("0").rstrip(".") for v in t]
    body = "\n".join(f"{a},{b:.2f}" for a, b in zip(t_txt, tl.rtt_ms.tolist(), strict=True))
    return f"{HEADER}\n{body}\n"


def write_rtt(path: str | Path, tl: RttTimeline) -> None:
    atomic_write_text(Path(path), format_rtt(tl))
