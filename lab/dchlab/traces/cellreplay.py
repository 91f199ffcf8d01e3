"""CellReplay trace directories (NSDI'25, github williamsentosa95/cellreplay): read and
validate them as chanemu does (crates/chanemu/src/trace/cellreplay.rs; the format is
docs/formats.md "CellReplay trace directory").

Per direction (`up`/`down`) a directory holds `<dir>-delay-light-pdo` (one recorded
packet train a line: `TIME_MS BASE_DELAY_MS PDO_MS...`, single spaces, integers, ≥ 3
lines, times non-decreasing, last > 0), `<dir>-heavy-pdo` (integer ms a line,
non-decreasing, last > 0; 1400 bytes each) and optionally `latency-offset-<dir>`
(`SIZE_BYTES OFFSET_MS`, sizes 100, 200, ... in order). The rules are chanemu's, and
so is every error's file, line and field (lab/tests/test_cellreplay_lab.py feeds the
same malformed files to both); chanemu stays the authority when it runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dchlab.traces.builtin import rust_f64
from dchlab.traces.errors import TraceFormatError
from dchlab.units import is_uint

PDO_BYTES = 1400  # bytes one PDO carries (crates/chanemu/src/pdo_link.rs PDO_BYTES)
SIDES = ("up", "down")


def side_files(directory: Path, side: str) -> tuple[Path, Path, Path]:
    """(light, heavy, offsets) file paths of `side` (`up`/`down`) in `directory`."""
    return (
        directory / f"{side}-delay-light-pdo",
        directory / f"{side}-heavy-pdo",
        directory / f"latency-offset-{side}",
    )


def is_cellreplay_dir(path: Path) -> bool:
    """A directory with at least one side's light-PDO file."""
    return path.is_dir() and any(side_files(path, s)[0].is_file() for s in SIDES)


@dataclass(frozen=True)
class LightTrace:
    """A `*-delay-light-pdo` file: per train its time, base delay and light PDOs (ms)."""

    time_ms: npt.NDArray[np.int64]
    base_delay_ms: npt.NDArray[np.int64]
    pdos_ms: list[list[int]]

    @property
    def period_ms(self) -> int:
        """Loop period: the last train's time."""
        return int(self.time_ms[-1])


@dataclass(frozen=True)
class CellReplaySide:
    """The files of one direction."""

    light: LightTrace
    heavy_ms: npt.NDArray[np.int64]  # heavy PDO times
    offsets_ms: list[float] | None  # offsets_ms[i] for (i + 1) * 100 bytes; None: no file

    @property
    def heavy_period_ms(self) -> int:
        return int(self.heavy_ms[-1])


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise TraceFormatError(path, f"cannot read: {e.strerror}", 0, "file") from None
    except UnicodeDecodeError as e:
        raise TraceFormatError(path, f"not a text file ({e})") from None


def _maybe_int(s: str) -> int | None:
    """`s` as Rust's `i64::from_str` reads it: an optional sign, then ASCII digits."""
    body = s[1:] if s[:1] in ("+", "-") else s
    return int(s) if is_uint(body) else None


def _int(path: Path, line: int, field: str, s: str) -> int:
    v = _maybe_int(s)
    if v is None:
        raise TraceFormatError(path, f"expected an integer number of ms, got {s!r}", line, field)
    return v


def _stamp(path: Path, line: int, field: str, s: str) -> int:
    v = _int(path, line, field, s)
    if v < 0:
        raise TraceFormatError(path, f"expected ≥ 0 ms, got {v}", line, field)
    return v


def _lines(path: Path, text: str, field: str) -> Iterator[tuple[int, str]]:
    """Numbered lines; an empty one is refused (mm-cellular refuses it too)."""
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            raise TraceFormatError(
                path, "invalid empty line (mm-cellular refuses it too)", i, field
            )
        yield i, line


def _non_decreasing(path: Path, line: int, field: str, v: int, prev: int | None) -> None:
    if prev is not None and v < prev:
        raise TraceFormatError(
            path, f"expected non-decreasing timestamps, got {v} after {prev}", line, field
        )


def read_light(path: Path) -> LightTrace:
    """A `*-delay-light-pdo` file, validated."""
    times: list[int] = []
    bases: list[int] = []
    pdos: list[list[int]] = []
    for ln, line in _lines(path, _text(path), "time_ms"):
        words = line.rstrip().split(" ")
        t = _stamp(path, ln, "time_ms", words[0])
        if len(words) < 2:
            raise TraceFormatError(
                path, "expected `TIME_MS BASE_DELAY_MS PDO_MS...`, got one field", ln,
                "base_delay_ms",
            )  # fmt: skip
        d = _int(path, ln, "base_delay_ms", words[1])
        if d < 0:
            raise TraceFormatError(path, f"expected ≥ 0 ms, got {d}", ln, "base_delay_ms")
        train = [_int(path, ln, f"pdo_ms[{i}]", w) for i, w in enumerate(words[2:])]
        if not train:
            raise TraceFormatError(
                path, "expected ≥ 1 light PDO after the base delay", ln, "pdo_ms[0]"
            )
        _non_decreasing(path, ln, "time_ms", t, times[-1] if times else None)
        times.append(t)
        bases.append(d)
        pdos.append(train)
    if times and times[-1] == 0:
        raise TraceFormatError(
            path, "the last train's time (the loop period) must be > 0", 0, "time_ms"
        )
    if len(times) < 3:
        raise TraceFormatError(
            path, f"expected ≥ 3 trains at or after the start offset, got {len(times)}", 0,
            "time_ms",
        )  # fmt: skip
    return LightTrace(np.asarray(times, np.int64), np.asarray(bases, np.int64), pdos)


def read_heavy(path: Path) -> npt.NDArray[np.int64]:
    """A `*-heavy-pdo` file, validated: opportunity times (ms)."""
    ops: list[int] = []
    for ln, line in _lines(path, _text(path), "timestamp_ms"):
        v = _stamp(path, ln, "timestamp_ms", line.strip())
        _non_decreasing(path, ln, "timestamp_ms", v, ops[-1] if ops else None)
        ops.append(v)
    if not ops:
        raise TraceFormatError(
            path, "no opportunity at or after the start offset: expected ≥ 1", 0, "timestamp_ms"
        )
    if ops[-1] == 0:
        raise TraceFormatError(
            path, "the last timestamp (the loop period) must be > 0", 0, "timestamp_ms"
        )
    return np.asarray(ops, np.int64)


def read_offsets(path: Path) -> list[float]:
    """A `latency-offset-*` file, validated (blank lines skipped, as mm-cellular does)."""
    out: list[float] = []
    for ln, raw in enumerate(_text(path).splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        f = line.split(" ")
        if len(f) != 2:
            raise TraceFormatError(
                path, f"expected `SIZE_BYTES OFFSET_MS`, got {len(f)} fields", ln, "row"
            )
        want = (len(out) + 1) * 100
        if _maybe_int(f[0]) != want:
            raise TraceFormatError(
                path, f"expected {want} (sizes start at 100 and step by 100), got {f[0]!r}", ln,
                "size_bytes",
            )  # fmt: skip
        v = rust_f64(f[1])
        if v is None:
            raise TraceFormatError(path, f"expected a number, got {f[1]!r}", ln, "offset_ms")
        if not math.isfinite(v):
            raise TraceFormatError(path, f"expected a finite number, got {f[1]!r}", ln, "offset_ms")
        out.append(v)
    if not out:
        raise TraceFormatError(
            path, "empty file: expected `100 OFFSET_MS` and more lines", 0, "size_bytes"
        )
    return out


def offset_ms(offsets: list[float], size: int) -> float:
    """The offset for a packet of `size` bytes, as chanemu's `SizeOffsets::offset_ms`
    (CellReplay's `get_psize_latency_offset`): the first entry below 100 B, the last
    at and beyond the last size, linear between entries."""
    idx, rem = divmod(size, 100)
    if idx == 0:
        return offsets[0]
    if idx >= len(offsets):
        return offsets[-1]
    i = idx - 1
    return offsets[i] + rem / 100 * (offsets[i + 1] - offsets[i])


def load_side(directory: Path, side: str) -> CellReplaySide:
    """`side` of `directory`, every file validated (the offsets file is optional).
    Cached per file version: a campaign resolves its channel for every load."""
    light, heavy, offsets = side_files(directory, side)
    stamps = tuple(_stamp_of(p) for p in (light, heavy, offsets))
    return _load_side(directory, side, stamps)


def _stamp_of(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=16)
def _load_side(directory: Path, side: str, stamps: object) -> CellReplaySide:
    light, heavy, offsets = side_files(directory, side)
    return CellReplaySide(
        read_light(light),
        read_heavy(heavy),
        read_offsets(offsets) if offsets.exists() else None,
    )


def heavy_mbit(heavy_ms: npt.NDArray[np.int64]) -> float:
    """Mean rate of a heavy-PDO trace over one loop: opportunities × 1400 B / period."""
    return float(len(heavy_ms) * PDO_BYTES * 8 / 1000 / heavy_ms[-1])
