"""Channel faults: the `faults` table of a profile direction (docs/formats.md) and
the `dch shell` options that add one to any channel.

Rule (as chanemu's fault stage, crates/chanemu/src/outage.rs, has it): times are
run time of the emulator in ms, windows are [from_ms, to_ms); a dead link loses
what enters it or would leave it during an outage; a loss burst drops each
packet entering it with its probability; `repeat_ms` starts the schedule over.

`validate_faults` checks a table the way chanemu does (lab/tests/test_channel_grammar.py
feeds the same tables to both). `parse_outage`/`parse_burst` read the option values
`FROM-TO[:up|down|both]` and `FROM-TO:P[:up|down|both]` (times `2s`, `1.5s`,
`500ms`), and `with_faults` writes a channel spec plus faults as a profile file.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dchlab.paths import cache_dir
from dchlab.traces.atomic import atomic_write_text
from dchlab.traces.errors import TraceFormatError

DIRECTIONS = {"up": ("uplink",), "down": ("downlink",), "both": ("uplink", "downlink")}
# chanemu keeps run time in u64 ns; it refuses more than this many ms.
MAX_MS = 1e12
_TIME = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s)")


@dataclass(frozen=True)
class Fault:
    """One window on one link: an outage (`loss` None) or a loss burst."""

    from_ms: float
    to_ms: float
    directions: tuple[str, ...]
    loss: float | None = None


def _time_ms(text: str, what: str) -> float:
    m = _TIME.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{what}: expected a time like 2s, 1.5s or 500ms, got {text!r}")
    return float(m[1]) * (1000.0 if m[2] == "s" else 1.0)


def _window(text: str, what: str) -> tuple[float, float]:
    start, dash, end = text.partition("-")
    if not dash:
        raise ValueError(f"{what}: expected FROM-TO, e.g. 2s-4s, got {text!r}")
    a, b = _time_ms(start, what), _time_ms(end, what)
    if not b > a:
        raise ValueError(f"{what}: the window must end after it starts, got {text!r}")
    return a, b


def _directions(text: str | None, what: str) -> tuple[str, ...]:
    key = "both" if text is None else text.strip()
    if key not in DIRECTIONS:
        raise ValueError(f"{what}: direction must be up, down or both, got {text!r}")
    return DIRECTIONS[key]


def parse_outage(text: str) -> Fault:
    """`FROM-TO[:up|down|both]`: the link is down from FROM to TO (default both ways)."""
    what = f"outage {text!r}"
    window, _, direction = text.partition(":")
    a, b = _window(window, what)
    return Fault(a, b, _directions(direction or None, what))


def parse_burst(text: str) -> Fault:
    """`FROM-TO:P[:up|down|both]`: each packet entering in FROM..TO is lost with probability P."""
    what = f"loss burst {text!r}"
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"{what}: expected FROM-TO:P[:up|down|both], e.g. 2s-4s:0.3")
    a, b = _window(parts[0], what)
    try:
        p = float(parts[1])
    except ValueError:
        p = math.nan
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{what}: loss must be a probability in [0, 1], got {parts[1]!r}")
    return Fault(a, b, _directions(parts[2] if len(parts) == 3 else None, what), p)


def faults_table(faults: list[Fault], direction: str, repeat_ms: float | None) -> dict[str, Any]:
    """The `faults` table of `direction` for these faults ({} if none apply to it)."""
    mine = [f for f in faults if direction in f.directions]
    if not mine:
        return {}
    out: dict[str, Any] = {}
    if repeat_ms is not None:
        out["repeat_ms"] = repeat_ms
    down = [f for f in mine if f.loss is None]
    bursts = [f for f in mine if f.loss is not None]
    if down:
        out["down"] = [
            {"from_ms": f.from_ms, "to_ms": f.to_ms} for f in sorted(down, key=lambda f: f.from_ms)
        ]
    if bursts:
        out["loss_bursts"] = [
            {"from_ms": f.from_ms, "to_ms": f.to_ms, "loss": f.loss}
            for f in sorted(bursts, key=lambda f: f.from_ms)
        ]
    return out


def _ms(path: Path, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not (0 <= v <= MAX_MS):
        raise TraceFormatError(path, f"expected ms in [0, 1e12], got {v!r}", field=key)
    return float(v)


def _only_keys(path: Path, where: str, table: dict[str, Any], allowed: set[str]) -> None:
    for k in table:
        if k not in allowed:
            raise TraceFormatError(
                path,
                f"unknown key (expected one of {', '.join(sorted(allowed))})",
                field=f"{where}.{k}",
            )


def _windows(path: Path, key: str, items: Any, extra: set[str], repeat: float | None) -> None:
    if not isinstance(items, list):
        raise TraceFormatError(path, f"expected a list of tables, got {items!r}", field=key)
    prev_end: float | None = None
    for i, w in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(w, dict):
            raise TraceFormatError(path, f"expected a table, got {w!r}", field=where)
        allowed = {"from_ms", "to_ms"} | extra
        _only_keys(path, where, w, allowed)
        for k in sorted(allowed - set(w)):
            raise TraceFormatError(path, "missing", field=f"{where}.{k}")
        a, b = _ms(path, f"{where}.from_ms", w["from_ms"]), _ms(path, f"{where}.to_ms", w["to_ms"])
        if not b > a:
            raise TraceFormatError(path, "expected to_ms > from_ms", field=where)
        if prev_end is not None and a < prev_end:
            raise TraceFormatError(
                path, "windows must be sorted by time and must not overlap", field=where
            )
        if repeat is not None and b > repeat:
            raise TraceFormatError(path, f"ends after repeat_ms = {repeat:g}", field=where)
        if "loss" in extra:
            v = w["loss"]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                raise TraceFormatError(
                    path, f"expected a probability in [0, 1], got {v!r}", field=f"{where}.loss"
                )
        prev_end = b


def validate_faults(path: Path, key: str, t: Any) -> None:
    """Check a `<direction>.faults` table as chanemu does; errors name file and key."""
    if not isinstance(t, dict):
        raise TraceFormatError(path, f"expected a table, got {t!r}", field=key)
    _only_keys(path, key, t, {"repeat_ms", "down", "loss_bursts"})
    repeat = None
    if "repeat_ms" in t:
        repeat = _ms(path, f"{key}.repeat_ms", t["repeat_ms"])
        if repeat == 0:
            raise TraceFormatError(path, "expected > 0", field=f"{key}.repeat_ms")
    _windows(path, f"{key}.down", t.get("down", []), set(), repeat)
    _windows(path, f"{key}.loss_bursts", t.get("loss_bursts", []), {"loss"}, repeat)


def with_faults(spec: str, seed: int, faults: list[Fault], repeat_ms: float | None = None) -> str:
    """The channel `spec` with these faults added: a profile file in the cache (trace
    paths absolute, so its traces and start offset are the spec's). `spec` unchanged
    when there are no faults. A direction that already has faults gets them replaced."""
    # late imports: profiles imports profile_toml, which imports this module
    from dchlab.traces import profiles
    from dchlab.traces.profile_toml import dump_profile, validate

    if not faults:
        return spec
    prof, rel_to = profiles.load_resolved(profiles.resolve_channel(spec, seed))
    if rel_to is not None:
        prof = _absolute(prof, rel_to.resolve())
    for d in ("uplink", "downlink"):
        prof[d] = {k: v for k, v in prof[d].items() if k != "faults"}
        table = faults_table(faults, d, repeat_ms)
        if table:
            prof[d]["faults"] = table
    prof["name"] = f"{prof['name']}+faults"
    text = dump_profile(prof)
    digest = hashlib.sha256(f"{spec}|{seed}|{text}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9.=_-]+", "_", Path(spec).stem if spec.endswith(".toml") else spec)
    out = cache_dir() / "profiles" / "faults" / f"{slug[:40]}-{digest}" / "profile.toml"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        validate(prof, out)
        atomic_write_text(out, text)
    return str(out)


def _absolute(node: Any, base: Path) -> Any:
    """Every trace file reference (`file`, `series`, `mahimahi`, `cellreplay`) made absolute."""
    from dchlab.traces.profile_toml import TRACE_KEYS

    if isinstance(node, dict):
        return {
            k: str((base / v).resolve())
            if k in TRACE_KEYS and isinstance(v, str)
            else _absolute(v, base)
            for k, v in node.items()
        }
    return node
