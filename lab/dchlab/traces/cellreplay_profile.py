"""The channel spec `cellreplay:DIR` and the profiles made from CellReplay directories.

`cellreplay:DIR` is CellReplay's model alone over a trace directory (uplink its `up-*`
files, downlink its `down-*`; no other delay, loss or DRX), as chanemu's built-in of the
same name. DIR may hold `$NAME` / `${NAME}` environment variables (a campaign names
the published archive as `cellreplay:$DCH_CELLREPLAY_TRACES/tmobile/driving`); an
unset variable or a missing directory is refused saying where the traces go. A
profile TOML maps directions itself: `rate = { cellreplay = "DIR", side = "up" }`
(docs/formats.md).

`without_base_delay` is the ideal link's view of a CellReplay HBC: the same PDOs with
every base delay 0, so the ideal profile's delay (the LLC's) is the only path delay.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from dchlab.paths import cache_dir
from dchlab.traces.atomic import build_dir_once
from dchlab.traces.cellreplay import SIDES, load_side, side_files

PREFIX = "cellreplay:"
ARCHIVE_ENV = "DCH_CELLREPLAY_TRACES"
ARCHIVE_HINT = (
    f"point ${ARCHIVE_ENV} at the folder CellReplay's published traces unpack into "
    "(github williamsentosa95/cellreplay: `unzip traces/cellular-traces.zip -d ROOT` gives "
    "ROOT/tmobile/driving/up-delay-light-pdo and the other files of each set; "
    "docs/traces.md, 'CellReplay traces')"
)
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def is_cellreplay_spec(base: str) -> bool:
    """`base` (a spec without modifiers) names a CellReplay directory."""
    return base.startswith(PREFIX)


def expand(text: str) -> str:
    """`text` with `$NAME` / `${NAME}` replaced from the environment; ValueError naming
    an unset variable (and, for the archive's, where the traces go)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        value = os.environ.get(name)
        if not value:
            hint = f": {ARCHIVE_HINT}" if name == ARCHIVE_ENV else ""
            raise ValueError(f"channel {PREFIX}{text}: ${name} is not set{hint}")
        return value

    return _VAR.sub(one, text)


def spec_dir(base: str, check: bool = True) -> Path:
    """The absolute directory of `cellreplay:DIR` (variables expanded). With `check`,
    both directions' files are read and validated (TraceFormatError naming file, line
    and field); a missing directory is a ValueError saying where traces go."""
    raw = base[len(PREFIX) :]
    if not raw:
        raise ValueError(f"channel {base!r}: expected {PREFIX}DIR (a CellReplay trace directory)")
    d = Path(expand(raw)).resolve()
    if not d.is_dir():
        hint = f"; {ARCHIVE_HINT}" if ARCHIVE_ENV in raw else ""
        raise ValueError(f"channel {base!r}: CellReplay trace directory {d} does not exist{hint}")
    if check:
        for side in SIDES:
            load_side(d, side)
    return d


def cellreplay_profile(directory: Path, name: str) -> dict[str, Any]:
    """The profile chanemu builds for `cellreplay:<directory>` (paths absolute)."""
    return {
        "name": name,
        "description": f"CellReplay traces {directory}",
        "delay": {"kind": "fixed", "rtt_ms": 0.0},
        "uplink": {"rate": {"cellreplay": str(directory), "side": "up"}, "loss": 0.0},
        "downlink": {"rate": {"cellreplay": str(directory), "side": "down"}, "loss": 0.0},
    }


def without_base_delay(directory: Path) -> Path:
    """A copy of `directory` in the cache whose light traces have every base delay 0
    (times and PDOs unchanged; heavy PDOs and offsets linked, not copied)."""
    key = "|".join(
        f"{p}:{p.stat().st_mtime_ns}:{p.stat().st_size}"
        for side in SIDES
        for p in side_files(directory, side)
        if p.exists()
    )
    digest = hashlib.sha256(f"{directory}|{key}".encode()).hexdigest()[:12]
    final = cache_dir() / "profiles" / "cellreplay-nobase" / f"{directory.name}-{digest}"

    def build(tmp: Path) -> None:
        for side in SIDES:
            light, heavy, offsets = side_files(directory, side)
            lines = []
            for raw in light.read_text().splitlines():
                words = raw.rstrip().split(" ")
                lines.append(" ".join([words[0], "0", *words[2:]]))
            side_files(tmp, side)[0].write_text("\n".join(lines) + "\n")
            for src in (heavy, offsets):
                if src.exists():
                    os.symlink(src.resolve(), tmp / src.name)
        (tmp / "SOURCE").write_text(f"{directory} with every base delay 0 (the ideal link)\n")

    build_dir_once(final, build, "SOURCE")
    return final
