"""The rows of the lab's own trace CSVs (`*.rtt.csv`, `*.cap.csv`), read one way.

Both formats (docs/formats.md) are a fixed header line, then rows of as many
comma-separated numbers as the header names; blank lines are skipped. What a value
means (increasing times, consecutive seconds, >= 0) each format checks itself.
"""

from __future__ import annotations

import math
from pathlib import Path

from dchlab.traces.errors import TraceFormatError


def csv_rows(path: Path, header: str) -> list[tuple[int, list[str]]]:
    """(line number, values) of every non-blank row after `header`, which must be the
    first line (spaces ignored). A row with another number of values than the header
    has names, a header that differs or a file that is not text raise TraceFormatError."""
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as e:
        raise TraceFormatError(path, f"not a text file ({e})") from None
    if not lines or lines[0].strip().replace(" ", "") != header:
        got = lines[0].strip() if lines else "an empty file"
        raise TraceFormatError(path, f"expected header {header!r}, got {got!r}", line=1)
    width = header.count(",") + 1
    rows = []
    for no, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if not line:
            continue
        parts = line.split(",")
        if len(parts) != width:
            raise TraceFormatError(
                path, f"expected {width} comma-separated values, got {line!r}", line=no
            )
        rows.append((no, parts))
    return rows


def number(path: Path, line: int, field: str, text: str) -> float:
    """`text` as a finite float; else TraceFormatError naming the line and field."""
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(
            path, f"expected a number, got {text.strip()!r}", line, field
        ) from None
    if not math.isfinite(value):
        raise TraceFormatError(path, f"expected a finite number, got {text.strip()!r}", line, field)
    return value
