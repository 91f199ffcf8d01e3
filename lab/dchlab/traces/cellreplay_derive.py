"""A CellReplay-format trace set *derived* from recordings we have, and the
Mahimahi-model profile of the same recording (`dch traces derive-cellreplay`).

A stand-in, not CellReplay's measurement: CellReplay records light packet trains and
a saturating sender on a live network; here both come from older recordings, by
these rules (docs/traces.md, "A derived CellReplay stand-in"):

1. Heavy PDOs: a Mahimahi cellular link trace per direction, its lines unchanged
   (CellReplay's mm-cellular gives each 1400 bytes, Mahimahi's mm-link 1500).
2. Base delay: ping runs (e.g. the IMC'23 driving pings), parsed as `dch traces
   import ping` does, concatenated in run order (natural sort of their paths) until
   they cover the heavy traces' period P (the longer one), then sampled every
   `step_ms` on [0, P) by linear interpolation. RTT r at a sample, rounded to a
   whole ms, is split up = r // 2, down = r − up.
3. Light trains: a line per sample at its time with its base delay; its light PDOs
   are the first `train` heavy opportunities of that direction at or after the time
   (the heavy trace looped), as ms after the first of them: a short train meets the
   opportunities a saturating sender met. A last line at P repeats the first, so
   the light trace loops with period P.
4. No `latency-offset-*` files: the sources carry no packet-size measurement
   (mm-cellular then applies no offset).

The Mahimahi model of the same recording (`mahimahi-model.toml`): delay timeline
`base.rtt.csv` (the samples' up + down base, i.e. the rounded RTT, every `step_ms`,
period P) and each direction's heavy-PDO file as its Mahimahi link trace, queues
unlimited (as CellReplay's heavy link and mm-link's default), no loss, no DRX.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dchlab.traces.atomic import atomic_write_text
from dchlab.traces.cellreplay import read_heavy, side_files
from dchlab.traces.ping import parse_ping
from dchlab.traces.profile_toml import dump_profile, validate
from dchlab.traces.timeline import RttTimeline, write_rtt

DEFAULT_STEP_MS = 200  # the IMC'23 pings' interval (ping -i 0.2)
DEFAULT_TRAIN = 10  # light PDOs per train
MODEL_PROFILE = "mahimahi-model.toml"
RTT_FILE = "base.rtt.csv"


@dataclass(frozen=True)
class Derived:
    """What was written: the directory, period, samples and the ping files used."""

    out: Path
    period_ms: int
    samples: int
    ping_files: list[str]


def _natural(path: Path) -> list[object]:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", str(path))]


def ping_files(source: Path) -> list[Path]:
    """The ping outputs (`*.out`) under `source` (or `source` itself), in natural order."""
    if source.is_file():
        return [source]
    files = sorted(source.rglob("*.out"), key=_natural)
    if not files:
        raise ValueError(f"{source}: no ping outputs (*.out) found")
    return files


def rtt_samples(
    files: list[Path], period_ms: int, step_ms: int
) -> tuple[npt.NDArray[np.float64], list[str]]:
    """RTTs at 0, step, ... < period from the runs concatenated (rule 2), and the files used."""
    ts: list[npt.NDArray[np.float64]] = []
    rs: list[npt.NDArray[np.float64]] = []
    used: list[str] = []
    offset = 0.0
    for f in files:
        if offset >= period_ms:
            break
        tl = parse_ping(f).timeline
        if len(tl) < 2:
            continue
        ts.append(tl.t_ms - tl.t_ms[0] + offset)
        rs.append(tl.rtt_ms)
        offset += tl.period_ms - tl.t_ms[0]
        used.append(str(f))
    if offset < period_ms:
        raise ValueError(
            f"ping runs cover {offset / 1000:.1f} s, less than the link traces' {period_ms / 1000:.1f} s"
        )
    grid = np.arange(0, period_ms, step_ms, dtype=float)
    return np.interp(grid, np.concatenate(ts), np.concatenate(rs)), used


def light_pdos(heavy: npt.NDArray[np.int64], t: int, train: int) -> list[int]:
    """The first `train` opportunities at or after `t` (looped), as ms after the first."""
    period = int(heavy[-1])
    loops, within = divmod(t, period)
    i = int(np.searchsorted(heavy, within, side="left"))
    times: list[int] = []
    while len(times) < train:
        if i == len(heavy):
            i, loops = 0, loops + 1
        times.append(int(heavy[i]) + loops * period)
        i += 1
    return [x - times[0] for x in times]


def derive(
    up_link: Path,
    down_link: Path,
    pings: Path,
    out: Path,
    step_ms: int = DEFAULT_STEP_MS,
    train: int = DEFAULT_TRAIN,
) -> Derived:
    """Write the CellReplay directory and the Mahimahi-model profile into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    heavy = {"up": read_heavy(up_link), "down": read_heavy(down_link)}
    period = int(max(h[-1] for h in heavy.values()))
    rtt, used = rtt_samples(ping_files(pings), period, step_ms)
    total = np.rint(rtt).astype(np.int64)
    base = {"up": total // 2, "down": total - total // 2}
    grid = np.arange(0, period, step_ms, dtype=np.int64)
    for side, src in (("up", up_link), ("down", down_link)):
        light, heavy_file, _ = side_files(out, side)
        lines = [
            " ".join(map(str, [int(t), int(b), *light_pdos(heavy[side], int(t), train)]))
            for t, b in zip(grid, base[side], strict=True)
        ]
        first = lines[0].split(" ", 1)[1]
        lines.append(f"{period} {first}")  # closes the loop at P
        atomic_write_text(light, "\n".join(lines) + "\n")
        atomic_write_text(heavy_file, src.read_text())
    write_rtt(out / RTT_FILE, RttTimeline(grid.astype(float), total.astype(float)))
    profile = {
        "name": f"mahimahi-model({out.name})",
        "description": "Mahimahi model of the derived CellReplay stand-in: base delay as the "
        "RTT timeline, heavy PDOs as the link traces",
        "delay": {"kind": "timeline", "file": RTT_FILE},
        "uplink": {"rate": {"mahimahi": "up-heavy-pdo"}, "queue": "unlimited", "loss": 0.0},
        "downlink": {"rate": {"mahimahi": "down-heavy-pdo"}, "queue": "unlimited", "loss": 0.0},
    }
    validate(profile, out / MODEL_PROFILE)
    atomic_write_text(out / MODEL_PROFILE, dump_profile(profile))
    source = {
        "what": "derived CellReplay stand-in (not CellReplay's measurement); rules in "
        "lab/dchlab/traces/cellreplay_derive.py and docs/traces.md",
        "up_link": str(up_link),
        "down_link": str(down_link),
        "pings": used,
        "step_ms": step_ms,
        "train": train,
        "period_ms": period,
    }
    atomic_write_text(out / "SOURCE.json", json.dumps(source, indent=2) + "\n")
    return Derived(out, period, len(grid), used)
