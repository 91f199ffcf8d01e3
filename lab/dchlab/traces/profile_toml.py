"""Channel profiles (TOML, docs/formats.md): validate, load and write.

A profile is kept as the plain dict that TOML gives; `validate` checks it the
way chanemu does (unknown keys are errors, every value typed and in range,
referenced trace files exist) and names the file and the key path on error.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from dchlab.traces.errors import TraceFormatError
from dchlab.traces.faults import validate_faults

Profile = dict[str, Any]
# keys whose values name trace files or directories (relative to the profile file)
TRACE_KEYS = ("file", "series", "mahimahi", "cellreplay")

_TOP = {"name", "description", "delay", "uplink", "downlink"}
_DIR = {"rate", "queue", "loss", "drx", "faults"}
_DELAY = {
    "fixed": {"kind", "rtt_ms"},
    "timeline": {"kind", "file"},
    "gaussian": {"kind", "mean_rtt_ms", "cov", "resample_ms"},
}


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TraceFormatError(path, f"not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise TraceFormatError(path, f"not a text file ({e})") from None
    validate(data, path)
    return data


def _num(path: Path, key: str, v: Any, lo: float = 0.0, hi: float = math.inf) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not (lo <= v <= hi):
        raise TraceFormatError(path, f"expected a number in [{lo:g}, {hi:g}], got {v!r}", field=key)
    return float(v)


def _keys(path: Path, where: str, table: Any, allowed: set[str], required: set[str]) -> None:
    if not isinstance(table, dict):
        raise TraceFormatError(path, f"expected a table, got {table!r}", field=where)
    for k in table:
        if k not in allowed:
            raise TraceFormatError(
                path,
                f"unknown key (expected one of {', '.join(sorted(allowed))})",
                field=f"{where}.{k}".lstrip("."),
            )
    for k in required - set(table):
        raise TraceFormatError(path, "missing", field=f"{where}.{k}".lstrip("."))


def validate(p: Profile, path: Path, check_files: bool = True) -> None:
    _keys(path, "", p, _TOP, {"name", "delay", "uplink", "downlink"})
    if not isinstance(p["name"], str) or not p["name"]:
        raise TraceFormatError(path, "expected a non-empty string", field="name")
    d = p["delay"]
    kind = d.get("kind") if isinstance(d, dict) else None
    if kind not in _DELAY:
        raise TraceFormatError(
            path, f"expected fixed|timeline|gaussian, got {kind!r}", field="delay.kind"
        )
    _keys(path, "delay", d, _DELAY[kind], _DELAY[kind] - {"resample_ms"})
    base = path.parent
    if kind == "fixed":
        _num(path, "delay.rtt_ms", d["rtt_ms"])
    elif kind == "gaussian":
        _num(path, "delay.mean_rtt_ms", d["mean_rtt_ms"])
        _num(path, "delay.cov", d["cov"])
        if "resample_ms" in d:
            _num(path, "delay.resample_ms", d["resample_ms"], lo=1e-3)
    else:
        _file(path, "delay.file", d["file"], base, check_files)
    for direction in ("uplink", "downlink"):
        t = p[direction]
        _keys(path, direction, t, _DIR, {"rate"})
        _rate(path, direction, t["rate"], base, check_files)
        if isinstance(t["rate"], dict) and "cellreplay" in t["rate"] and "queue" in t:
            raise TraceFormatError(
                path,
                "not used with rate = { cellreplay = ... }: its heavy-PDO link queue is "
                "unlimited, as mm-cellular's default",
                field=f"{direction}.queue",
            )
        q = t.get("queue", {"packets": 800})
        if q != "unlimited":
            _keys(path, f"{direction}.queue", q, {"packets", "bytes"}, set())
            if len(q) != 1:
                raise TraceFormatError(
                    path, "expected { packets = N } or { bytes = N }", field=f"{direction}.queue"
                )
            for k, v in q.items():
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise TraceFormatError(
                        path, f"expected an integer >= 1, got {v!r}", field=f"{direction}.queue.{k}"
                    )
        _num(path, f"{direction}.loss", t.get("loss", 0.0), 0.0, 1.0)
        if "drx" in t:
            _keys(
                path,
                f"{direction}.drx",
                t["drx"],
                {"inactivity_ms", "wake_period_ms"},
                {"inactivity_ms", "wake_period_ms"},
            )
            for k, v in t["drx"].items():
                _num(path, f"{direction}.drx.{k}", v)
        if "faults" in t:
            validate_faults(path, f"{direction}.faults", t["faults"])


def _file(path: Path, key: str, name: Any, base: Path, check: bool) -> None:
    if not isinstance(name, str) or not name:
        raise TraceFormatError(path, f"expected a file name, got {name!r}", field=key)
    if check and not (base / name).is_file():
        raise TraceFormatError(path, f"file {base / name} does not exist", field=key)


def _rate(path: Path, where: str, r: Any, base: Path, check: bool) -> None:
    key = f"{where}.rate"
    if r == "unlimited":
        return
    if not isinstance(r, dict):
        raise TraceFormatError(path, f'expected "unlimited" or a table, got {r!r}', field=key)
    if set(r) == {"mbit"}:
        _num(path, f"{key}.mbit", r["mbit"], lo=1e-6)
    elif set(r) == {"series", "column"}:
        _file(path, f"{key}.series", r["series"], base, check)
        if r["column"] not in ("up_mbit", "down_mbit"):
            raise TraceFormatError(
                path, f"expected up_mbit|down_mbit, got {r['column']!r}", field=f"{key}.column"
            )
    elif set(r) == {"mahimahi"}:
        _file(path, f"{key}.mahimahi", r["mahimahi"], base, check)
    elif "cellreplay" in r:
        _cellreplay_rate(path, key, r, base, check)
    else:
        raise TraceFormatError(
            path,
            f"expected {{ mbit = R }}, {{ series = F, column = C }}, {{ mahimahi = F }} or "
            f"{{ cellreplay = DIR }}, got keys {sorted(r)}",
            field=key,
        )


def _cellreplay_rate(path: Path, key: str, r: dict[str, Any], base: Path, check: bool) -> None:
    """`{ cellreplay = DIR, side = "up"|"down", long_to_short_timer_ms = N }` (chanemu's
    parse_cellreplay); with `check`, the side's files are read and validated."""
    from dchlab.traces.cellreplay import load_side

    for k in r:
        if k not in ("cellreplay", "side", "long_to_short_timer_ms"):
            raise TraceFormatError(
                path,
                'unknown key; with cellreplay, expected side = "up"|"down" or '
                "long_to_short_timer_ms = N",
                field=f"{key}.{k}",
            )
    d = r["cellreplay"]
    if not isinstance(d, str) or not d:
        raise TraceFormatError(path, "expected a directory name string", field=f"{key}.cellreplay")
    side = r.get("side", "up" if key.startswith("uplink") else "down")
    if side not in ("up", "down"):
        raise TraceFormatError(path, f'expected "up" or "down", got {side!r}', field=f"{key}.side")
    timer = r.get("long_to_short_timer_ms", 0)
    if not isinstance(timer, int) or isinstance(timer, bool) or timer < 0:
        raise TraceFormatError(
            path, f"expected an integer number of ms ≥ 0, got {timer!r}",
            field=f"{key}.long_to_short_timer_ms",
        )  # fmt: skip
    if check:
        if not (base / d).is_dir():
            raise TraceFormatError(
                path, f"directory {base / d} does not exist", field=f"{key}.cellreplay"
            )
        load_side(base / d, side)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0.0"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):  # fault windows
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} to TOML")


def dump_profile(p: Profile) -> str:
    """TOML text in the layout of docs/formats.md (inline tables for rate/queue/drx)."""
    lines = []
    for k in ("name", "description"):
        if k in p:
            lines.append(f"{k} = {_value(p[k])}")
    for table in ("delay", "uplink", "downlink"):
        lines.append("")
        lines.append(f"[{table}]")
        for k, v in p[table].items():
            lines.append(f"{k} = {_value(v)}")
    return "\n".join(lines) + "\n"
