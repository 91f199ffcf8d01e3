"""Per-second capacity series (`*.cap.csv`, docs/formats.md): read, validate, write.

One row per second, `t_s` = 0, 1, 2, ... consecutive; `up_mbit` and
`down_mbit` >= 0 in Mbit/s (10^6 bit/s).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dchlab.traces.atomic import atomic_write_text
from dchlab.traces.csv_rows import csv_rows, number
from dchlab.traces.errors import TraceFormatError

HEADER = "t_s,up_mbit,down_mbit"
COLUMNS = ("up_mbit", "down_mbit")


@dataclass
class CapacitySeries:
    up_mbit: npt.NDArray[np.float64]
    down_mbit: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.up_mbit)

    @property
    def period_ms(self) -> int:
        return 1000 * len(self.up_mbit)

    def column(self, name: str) -> npt.NDArray[np.float64]:
        if name == "up_mbit":
            return self.up_mbit
        if name == "down_mbit":
            return self.down_mbit
        raise KeyError(name)


def read_capacity(path: str | Path) -> CapacitySeries:
    path = Path(path)
    up: list[float] = []
    down: list[float] = []
    for no, parts in csv_rows(path, HEADER):
        t = number(path, no, "t_s", parts[0])
        if t != len(up):
            raise TraceFormatError(
                path, f"expected consecutive seconds, {len(up)} here, got {parts[0]}", no, "t_s"
            )
        values = []
        for name, text in zip(COLUMNS, parts[1:], strict=True):
            v = number(path, no, name, text)
            if v < 0:
                raise TraceFormatError(path, f"must be >= 0 Mbit/s, got {text}", no, name)
            values.append(v)
        up.append(values[0])
        down.append(values[1])
    if not up:
        raise TraceFormatError(path, "no rows after the header", line=1)
    return CapacitySeries(np.asarray(up), np.asarray(down))


def format_capacity(cap: CapacitySeries) -> str:
    rows = (
        f"{i},{u:.3f},{d:.3f}"
        for i, (u, d) in enumerate(zip(cap.up_mbit.tolist(), cap.down_mbit.tolist(), strict=True))
    )
    return HEADER + "\n" + "\n".join(rows) + "\n"


def write_capacity(path: str | Path, cap: CapacitySeries) -> None:
    atomic_write_text(Path(path), format_capacity(cap))
