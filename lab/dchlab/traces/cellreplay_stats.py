"""Statistics of a CellReplay trace directory, one row per direction (`dch traces stats DIR`).

Rules (each number over one loop of the direction's files):
- span_min: the light trace's period (its last train's time), in minutes;
- trains: lines of the light trace; base_* : its base delays (one-way ms) over trains:
  min, median, 98th percentile, mean;
- light_pdos: light PDOs per train (mean);
- light_mbit: the light PDO rate, per train with ≥ 2 PDOs spanning > 0 ms:
  (PDOs after the first) × 1400 B × 8 / (last PDO − first PDO), the median over such
  trains (how fast a short train is delivered);
- heavy_mbit: heavy PDOs × 1400 B × 8 / the heavy period (a saturating sender's rate);
- offset_100_ms / offset_1400_ms: the packet-size latency offset at 100 and 1400
  bytes (None without a `latency-offset-*` file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dchlab.traces.cellreplay import (
    PDO_BYTES,
    SIDES,
    LightTrace,
    heavy_mbit,
    load_side,
    offset_ms,
    side_files,
)

COLUMNS = [
    "span_min",
    "trains",
    "base_min",
    "base_p50",
    "base_p98",
    "base_mean",
    "light_pdos",
    "light_mbit",
    "heavy_mbit",
    "offset_100_ms",
    "offset_1400_ms",
]
HEADINGS = [
    "span(min)", "trains", "base min", "p50", "p98", "mean", "PDOs/train",
    "light Mbit/s", "heavy Mbit/s", "offset@100B", "offset@1400B",
]  # fmt: skip


def light_rates(light: LightTrace) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(train times in ms, light PDO rates in Mbit/s) of the trains with ≥ 2 PDOs
    spanning > 0 ms: (PDOs after the first) × 1400 B × 8 / (last PDO − first PDO)."""
    pairs = [
        (float(t), (len(p) - 1) * PDO_BYTES * 8 / 1000 / (p[-1] - p[0]))
        for t, p in zip(light.time_ms.tolist(), light.pdos_ms, strict=True)
        if len(p) >= 2 and p[-1] > p[0]
    ]
    return np.asarray([t for t, _ in pairs]), np.asarray([r for _, r in pairs])


def side_stats(directory: Path, side: str) -> dict[str, Any]:
    """One row of COLUMNS for `side` of `directory` (see the module docstring)."""
    s = load_side(directory, side)
    base = s.light.base_delay_ms.astype(float)
    _, rates = light_rates(s.light)
    return {
        "file": f"{directory} ({side})",
        "kind": "cellreplay",
        "side": side,
        "span_min": s.light.period_ms / 60000,
        "trains": len(base),
        "base_min": float(base.min()),
        "base_p50": float(np.percentile(base, 50)),
        "base_p98": float(np.percentile(base, 98)),
        "base_mean": float(base.mean()),
        "light_pdos": float(np.mean([len(p) for p in s.light.pdos_ms])),
        "light_mbit": float(np.median(rates)) if len(rates) else None,
        "heavy_mbit": heavy_mbit(s.heavy_ms),
        "offset_100_ms": None if s.offsets_ms is None else offset_ms(s.offsets_ms, 100),
        "offset_1400_ms": None if s.offsets_ms is None else offset_ms(s.offsets_ms, 1400),
    }


def dir_stats(directory: Path) -> list[dict[str, Any]]:
    """A row per direction present in `directory` (each side's files validated)."""
    return [side_stats(directory, s) for s in SIDES if side_files(directory, s)[0].exists()]
