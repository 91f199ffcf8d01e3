"""Channel specs in the testbed: resolved by the traces package (`dchlab.traces.profiles`,
grammar in `dchlab.traces.builtin`), turned into the profile dicts the schemes combine
(`ideal`, the agents' nominal LLC rate) and the files chanemu reads.

A channel spec is a preset (`urllc`, `embb`, scenario names like `MM-D`, with
`+loss=..` modifiers), a profile TOML path, `fixed:<rtt>ms/<rate>mbit` or
`cellreplay:DIR` (a CellReplay trace directory).
"""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path
from typing import Any

from dchlab.testbed.errors import TestbedError
from dchlab.traces import profiles
from dchlab.traces.cellreplay import heavy_mbit, load_side
from dchlab.traces.cellreplay_profile import is_cellreplay_spec, without_base_delay
from dchlab.traces.profile_toml import TRACE_KEYS


def known_channels() -> list[str]:
    """Preset names a user can pass (plus `fixed:<rtt>ms/<rate>mbit` and file paths)."""
    return sorted(profiles.known_channels())


def resolve_channel(spec: str, seed: int) -> str:
    """The value for `chanemu --profile` (a built-in name or a profile file path).

    Raises TestbedError listing the known presets for an unknown name.
    """
    try:
        return profiles.resolve_channel(spec.strip(), seed)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise TestbedError(
            f"{exc.args[0] if exc.args else exc}; known presets: {', '.join(known_channels())}"
        ) from exc


def trace_offset_ms(spec: str, seed: int, fraction: float | None = None) -> int:
    """Start offset into the channel's traces for `seed`, or at `fraction` of the
    trace's period when given (0 for trace-less channels)."""
    return profiles.trace_offset_ms(spec, seed, fraction)


def profile_dict(resolved: str) -> dict[str, Any]:
    """A resolved channel as a profile dict (docs/formats.md), file paths made absolute."""
    try:
        fixed = profiles.builtin(resolved)
    except ValueError as exc:
        raise TestbedError(str(exc)) from exc
    if fixed:
        return profiles.fixed_profile(fixed.rtt_ms, fixed.rate_mbit, resolved)
    if is_cellreplay_spec(resolved):  # resolved: its directory is absolute
        return profiles.load_resolved(resolved)[0]
    path = Path(resolved)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TestbedError(f"cannot read channel profile {path}: {exc}") from exc
    return _absolutize(data, path.parent)


def _absolutize(node: Any, base: Path) -> Any:
    """Make every file reference (`file`, `series`, `mahimahi`, `cellreplay`) absolute."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in TRACE_KEYS and isinstance(v, str):
                out[k] = str((base / v).resolve())
            else:
                out[k] = _absolutize(v, base)
        return out
    return node


def nominal_mbit(resolved: str, direction: str) -> float:
    """Average capacity (Mbit/s) of one direction (`uplink`/`downlink`): the agents'
    `--llc-mbit`. Constant rates as given; series and Mahimahi traces averaged."""
    prof = profile_dict(resolved)
    rate = prof.get(direction, {}).get("rate", "unlimited")
    if isinstance(rate, dict):
        if "mbit" in rate:
            return float(rate["mbit"])
        if "series" in rate:
            with open(rate["series"], newline="") as f:
                vals = [float(r[rate["column"]]) for r in csv.DictReader(f)]
            return sum(vals) / len(vals) if vals else 0.0
        if "mahimahi" in rate:
            stamps = [int(x) for x in Path(rate["mahimahi"]).read_text().split()]
            if stamps and stamps[-1] > 0:
                return len(stamps) * 1500 * 8 / (stamps[-1] * 1000.0)
        if "cellreplay" in rate:  # its heavy PDOs: what a saturating sender gets
            side = profiles.cellreplay_side(rate, direction)
            return heavy_mbit(load_side(Path(rate["cellreplay"]), side).heavy_ms)
    raise TestbedError(
        f"channel {resolved}: {direction} rate {rate!r} has no nominal Mbit/s (the agents' "
        "--llc-mbit and objproxy's rates need one: give the channel a rate, e.g. fixed:5ms/2mbit)"
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def write_profile(prof: dict[str, Any], path: Path) -> Path:
    """Write a profile dict as the TOML chanemu reads."""
    lines = []
    for k in ("name", "description"):
        if k in prof:
            lines.append(f"{k} = {_toml_value(prof[k])}")
    for section in ("delay", "uplink", "downlink"):
        if section in prof:
            lines.append(f"\n[{section}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in prof[section].items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def ideal_profile(
    hbc: str, llc: str, hbc_label: str | None = None, llc_label: str | None = None
) -> dict[str, Any]:
    """The `ideal` channel: the LLC's delay (and radio sleep) with the HBC's capacity,
    queue and loss — the bound no steering between the two can beat. `hbc`/`llc` are
    resolved channels; the labels (the user's specs) name the result."""
    h, low = profile_dict(hbc), profile_dict(llc)
    out: dict[str, Any] = {
        "name": f"ideal({hbc_label or hbc} rate, {llc_label or llc} delay)",
        "description": f"ideal: rate/queue/loss of {hbc}, delay/DRX of {llc}",
        "delay": low["delay"],
    }
    for d in ("uplink", "downlink"):
        side = {k: v for k, v in h.get(d, {}).items() if k != "drx"}
        rate = side.get("rate")
        if isinstance(rate, dict) and profiles.is_cellreplay_rate(rate):
            # CellReplay's link carries its own base delay: the ideal keeps its PDOs
            # and takes the LLC's delay alone
            nobase = without_base_delay(Path(rate["cellreplay"]))
            side["rate"] = {**rate, "cellreplay": str(nobase)}
        if "drx" in low.get(d, {}):
            side["drx"] = low[d]["drx"]
        out[d] = side
    return out


def server_path_profile(one_way_ms: float) -> dict[str, Any]:
    """The gw↔srv path when `server_delay_ms` > 0: pure fixed delay, no rate limit."""
    side = {"rate": "unlimited", "queue": "unlimited", "loss": 0.0}
    return {
        "name": f"server-delay-{one_way_ms:g}ms",
        "delay": {"kind": "fixed", "rtt_ms": 2.0 * one_way_ms},
        "uplink": dict(side),
        "downlink": dict(side),
    }
