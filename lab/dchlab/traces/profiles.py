"""Channel specs -> what `chanemu --profile` takes. The API other parts of the lab use.

Grammar of a spec: BASE [+KEY=VALUE]...
- BASE: `urllc`, `embb`, `fixed:<rtt>ms/<rate>mbit` (built into chanemu),
  `cellreplay:DIR` (a CellReplay trace directory, dchlab.traces.cellreplay_profile),
  a Table 1 scenario name (MM-S MM-W MM-D LB-S LB-W LB-D; synthesized per seed
  into `cache_dir()/profiles/<NAME>-seed<seed>/`), or a path to a profile TOML.
- modifiers: `loss=P` (both directions), `rtt=MS` (fixed RTT), `cov=C` (gaussian
  delay with the same mean RTT, `resample=MS`, default 10), `queue=N` (packets,
  or `unlimited`; not with CellReplay's own link), `drx=mmwave|lowband|none` (downlink).
A built-in without modifiers is returned unchanged (`cellreplay:DIR` with DIR made
absolute, its files validated); anything else becomes a profile file in the cache
(written atomically, reused by later runs).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dchlab.paths import cache_dir
from dchlab.traces.atomic import atomic_write_text, build_dir_once
from dchlab.traces.builtin import BUILTINS, FIXED_SYNTAX, Fixed, parse_builtin
from dchlab.traces.capacity import read_capacity
from dchlab.traces.cellreplay import heavy_mbit, load_side
from dchlab.traces.cellreplay_profile import (
    PREFIX as CELLREPLAY_PREFIX,
)
from dchlab.traces.cellreplay_profile import (
    cellreplay_profile,
    is_cellreplay_spec,
    spec_dir,
)
from dchlab.traces.mahimahi import opportunities_to_rate, read_mahimahi
from dchlab.traces.profile_toml import Profile, dump_profile, load_profile, validate
from dchlab.traces.scenario_files import SYNTH_VERSION, write_scenario
from dchlab.traces.scenarios import DRX_PRESETS, QUEUE_PACKETS, SCENARIOS
from dchlab.traces.timeline import read_rtt

MODIFIERS = ("loss", "rtt", "cov", "resample", "queue", "drx")
DEFAULT_RESAMPLE_MS = 10


def known_channels() -> list[str]:
    """Runnable channel names: the built-ins and the six scenarios (fixed:... also works)."""
    return [*BUILTINS, *SCENARIOS]


@dataclass
class Spec:
    base: str
    mods: dict[str, str]


def parse_spec(spec: str) -> Spec:
    parts = spec.strip().split("+")
    base, mods = parts[0].strip(), {}
    if not base:
        raise ValueError(f"channel spec {spec!r}: empty base name")
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or not value:
            raise ValueError(f"channel spec {spec!r}: modifier {part!r} is not KEY=VALUE")
        if key not in MODIFIERS:
            raise ValueError(
                f"channel spec {spec!r}: unknown modifier {key!r} (known: {', '.join(MODIFIERS)})"
            )
        if key in mods:
            raise ValueError(f"channel spec {spec!r}: modifier {key!r} given twice")
        mods[key] = value
    return Spec(base, mods)


def _unknown(base: str) -> ValueError:
    return ValueError(
        f"unknown channel {base!r}: expected a preset ({', '.join(BUILTINS)}, {FIXED_SYNTAX}), "
        f"{CELLREPLAY_PREFIX}DIR, a scenario ({', '.join(SCENARIOS)}) or the path of a profile TOML"
    )


def fixed_profile(rtt_ms: float, rate_mbit: float | None, name: str) -> Profile:
    """The profile chanemu builds for `fixed:<rtt>ms/<rate>mbit` (rate None: unlimited)."""
    rate: Any = "unlimited" if rate_mbit is None else {"mbit": rate_mbit}
    side = {"rate": rate, "queue": {"packets": QUEUE_PACKETS}, "loss": 0.0}
    what = "unlimited rate" if rate_mbit is None else f"{rate_mbit:g} Mbit/s each way"
    return {
        "name": name,
        "description": f"fixed {rtt_ms:g} ms RTT, {what}",
        "delay": {"kind": "fixed", "rtt_ms": rtt_ms},
        "uplink": dict(side),
        "downlink": dict(side),
    }


def builtin(name: str) -> Fixed | None:
    """chanemu's built-in `name` (urllc/embb in any case), None for anything else;
    ValueError for a malformed `fixed:` (dchlab.traces.builtin has the grammar)."""
    return parse_builtin(name.lower() if name.lower() in BUILTINS else name)


def scenario_dir(name: str, seed: int) -> Path:
    return cache_dir() / "profiles" / f"{name}-seed{seed}"


def scenario_profile_path(name: str, seed: int = 1) -> Path:
    """Synthesize scenario `name` for `seed` into the cache once; return its profile."""
    name = name.upper()
    final = scenario_dir(name, seed)
    version_file = final / "VERSION"
    if (final / "profile.toml").exists() and version_file.exists():
        if version_file.read_text().strip() == str(SYNTH_VERSION):
            return final / "profile.toml"
        # Made by an older synthesizer: move it aside atomically and rebuild.
        stale = final.with_name(f".{final.name}.stale-{os.getpid()}")
        with contextlib.suppress(OSError):
            os.rename(final, stale)
        shutil.rmtree(stale, ignore_errors=True)

    def build(tmp: Path) -> None:
        write_scenario(name, seed, tmp)
        (tmp / "VERSION").write_text(f"{SYNTH_VERSION}\n")

    build_dir_once(final, build, "VERSION")
    return final / "profile.toml"


def _base_profile(base: str, seed: int) -> tuple[Profile, Path | None]:
    """The base as a profile dict plus the directory its file paths are relative to."""
    fixed = builtin(base)
    if fixed:
        return fixed_profile(fixed.rtt_ms, fixed.rate_mbit, base), None
    if is_cellreplay_spec(base):
        return cellreplay_profile(spec_dir(base), base), None
    if base.upper() in SCENARIOS:
        path = scenario_profile_path(base.upper(), seed)
        return load_profile(path), path.parent
    path = Path(base)
    if path.suffix == ".toml" and path.is_file():
        return load_profile(path), path.resolve().parent
    raise _unknown(base)


def resolve_channel(spec: str, seed: int = 1) -> str:
    """What to pass to `chanemu --profile` for `spec` (see the module docstring)."""
    s = parse_spec(spec)
    if not s.mods and builtin(s.base):
        return s.base.lower() if s.base.lower() in BUILTINS else s.base
    if not s.mods and is_cellreplay_spec(s.base):
        return f"{CELLREPLAY_PREFIX}{spec_dir(s.base)}"
    if not s.mods:
        if s.base.upper() in SCENARIOS:
            return str(scenario_profile_path(s.base.upper(), seed))
        path = Path(s.base)
        if path.suffix == ".toml" and path.is_file():
            load_profile(path)  # refuse a bad profile here, with its file and key
            return str(path.resolve())
        raise _unknown(s.base)
    profile, rel_to = _base_profile(s.base, seed)
    derived = apply_modifiers(profile, s.mods, rel_to, spec)
    return str(_write_derived(derived, rel_to, spec, seed))


def _mean_rtt(profile: Profile, rel_to: Path | None) -> float:
    d = profile["delay"]
    if d["kind"] == "fixed":
        return float(d["rtt_ms"])
    if d["kind"] == "gaussian":
        return float(d["mean_rtt_ms"])
    tl = read_rtt(_ref(rel_to, d["file"]))
    return timeline_mean(tl.t_ms, tl.rtt_ms, tl.period_ms)


def timeline_mean(t: np.ndarray, rtt: np.ndarray, period: float) -> float:
    """Time-weighted mean over one loop, with linear interpolation (and the wrap)."""
    if len(t) < 2:
        return float(rtt[0])
    tt = np.append(t, t[0] + period)
    rr = np.append(rtt, rtt[0])
    return float(np.sum((rr[1:] + rr[:-1]) / 2 * np.diff(tt)) / (tt[-1] - tt[0]))


def apply_modifiers(
    profile: Profile, mods: dict[str, str], rel_to: Path | None, spec: str
) -> Profile:
    p: Profile = {k: (dict(v) if isinstance(v, dict) else v) for k, v in profile.items()}

    def num(key: str, lo: float, hi: float = float("inf")) -> float:
        try:
            v = float(mods[key])
        except ValueError:
            raise ValueError(
                f"channel spec {spec!r}: {key}= expects a number, got {mods[key]!r}"
            ) from None
        if not lo <= v <= hi:
            raise ValueError(
                f"channel spec {spec!r}: {key}={mods[key]} out of range [{lo:g}, {hi:g}]"
            )
        return v

    if "rtt" in mods:
        p["delay"] = {"kind": "fixed", "rtt_ms": num("rtt", 0.0)}
    if "cov" in mods:
        resample = num("resample", 1e-3) if "resample" in mods else DEFAULT_RESAMPLE_MS
        p["delay"] = {
            "kind": "gaussian",
            "mean_rtt_ms": round(_mean_rtt(p, rel_to), 3),
            "cov": num("cov", 0.0),
            "resample_ms": resample,
        }
    elif "resample" in mods:
        if p["delay"]["kind"] != "gaussian":
            raise ValueError(
                f"channel spec {spec!r}: resample= needs a gaussian delay (add +cov=C)"
            )
        p["delay"]["resample_ms"] = num("resample", 1e-3)
    for side in ("uplink", "downlink"):
        if "loss" in mods:
            p[side]["loss"] = num("loss", 0.0, 1.0)
        if "queue" in mods and is_cellreplay_rate(p[side]["rate"]):
            raise ValueError(
                f"channel spec {spec!r}: queue= does not apply to a CellReplay direction "
                "(its heavy-PDO link queue is unlimited, as mm-cellular's)"
            )
        if "queue" in mods:
            if mods["queue"].lower() == "unlimited":
                p[side]["queue"] = "unlimited"
            else:
                p[side]["queue"] = {"packets": int(num("queue", 1))}
    if "drx" in mods:
        preset = mods["drx"].lower()
        if preset == "none":
            p["downlink"].pop("drx", None)
        elif preset in DRX_PRESETS:
            p["downlink"]["drx"] = dict(DRX_PRESETS[preset])
        else:
            raise ValueError(
                f"channel spec {spec!r}: drx= expects mmwave|lowband|none, got {preset!r}"
            )
    suffix = "".join(f"+{k}={v}" for k, v in mods.items())
    p["name"] = f"{profile['name']}{suffix}"
    p["description"] = f"{profile.get('description', profile['name'])}; modified: {suffix[1:]}"
    return p


def _rebase(p: Profile, rel_to: Path | None, new_dir: Path) -> Profile:
    """Rewrite trace file references so they stay valid from `new_dir`."""
    if rel_to is None:
        return p

    def fix(name: str) -> str:
        return os.path.relpath(rel_to / name, new_dir)

    if p["delay"]["kind"] == "timeline":
        p["delay"]["file"] = fix(p["delay"]["file"])
    for side in ("uplink", "downlink"):
        r = p[side]["rate"]
        if isinstance(r, dict):
            r = dict(r)
            for key in ("series", "mahimahi", "cellreplay"):
                if key in r:
                    r[key] = fix(r[key])
            p[side]["rate"] = r
    return p


def _write_derived(p: Profile, rel_to: Path | None, spec: str, seed: int) -> Path:
    root = cache_dir() / "profiles" / "derived"
    key = f"{spec}|seed={seed}|{dump_profile(p)}|{rel_to}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    base, _, mods = spec.partition("+")
    readable = f"{Path(base).stem}+{mods}" if base.endswith(".toml") else spec
    slug = re.sub(r"[^A-Za-z0-9.=_-]+", "_", readable)[:60]
    out = root / f"{slug}-{digest}"
    path = out / "profile.toml"
    if not path.exists():
        p = _rebase(p, rel_to, out)
        out.mkdir(parents=True, exist_ok=True)
        validate(p, path)
        atomic_write_text(path, dump_profile(p))
    return path


def is_cellreplay_rate(rate: Any) -> bool:
    """A direction's rate is `{ cellreplay = DIR, ... }` (CellReplay's model)."""
    return isinstance(rate, dict) and "cellreplay" in rate


def cellreplay_side(rate: dict[str, Any], direction: str) -> str:
    """The side (`up`/`down`) a `{ cellreplay = ... }` rate replays: `side`, else
    by direction (chanemu's default)."""
    return str(rate.get("side", "up" if direction == "uplink" else "down"))


def load_resolved(resolved: str) -> tuple[Profile, Path | None]:
    """A resolved channel (what `resolve_channel` returns) as a profile dict plus the
    directory its file paths are relative to (None: they are absolute or absent)."""
    fixed = builtin(resolved)
    if fixed:
        return fixed_profile(fixed.rtt_ms, fixed.rate_mbit, resolved), None
    if is_cellreplay_spec(resolved):
        return cellreplay_profile(spec_dir(resolved, check=False), resolved), None
    path = Path(resolved)
    return load_profile(path), path.parent


def _profile_for(spec_or_profile: str, seed: int) -> tuple[Profile, Path | None]:
    return load_resolved(resolve_channel(spec_or_profile, seed))


def _ref(base: Path | None, name: str) -> Path:
    """A trace file named in a profile: relative to `base`, or absolute (base None)."""
    return Path(name) if base is None else base / name


def _periods_ms(p: Profile, base: Path | None) -> list[float]:
    out: list[float] = []
    if p["delay"]["kind"] == "timeline":
        out.append(read_rtt(_ref(base, p["delay"]["file"])).period_ms)
    for side in ("uplink", "downlink"):
        r = p[side]["rate"]
        if isinstance(r, dict) and "series" in r:
            out.append(float(read_capacity(_ref(base, r["series"])).period_ms))
        elif isinstance(r, dict) and "mahimahi" in r:
            out.append(float(read_mahimahi(_ref(base, r["mahimahi"]))[-1]))
        elif is_cellreplay_rate(r):
            cr = load_side(_ref(base, r["cellreplay"]), cellreplay_side(r, side))
            out += [float(cr.light.period_ms), float(cr.heavy_period_ms)]
    return out


def trace_offset_ms(spec_or_profile: str, seed: int, fraction: float | None = None) -> int:
    """Where time 0 of a run falls in the looped traces: a deterministic function of the
    seed (same seed, same offset, whatever the scheme), in [0, longest period); with
    `fraction` (a campaign's stratified offsets, dchlab.experiments.offsets) that
    fraction of the longest period instead. 0 for channels without traces."""
    p, base = _profile_for(spec_or_profile, seed)
    periods = _periods_ms(p, base)
    if not periods:
        return 0
    period = int(max(periods))
    if fraction is not None:
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"trace offset fraction must lie in [0, 1), got {fraction}")
        return int(fraction * period) % max(period, 1)
    h = int.from_bytes(hashlib.sha256(f"dchannel-trace-offset:{seed}".encode()).digest()[:8], "big")
    return h % max(period, 1)


def _rate_summary(r: Any, base: Path | None, direction: str) -> float | None:
    if r == "unlimited":
        return None
    if "mbit" in r:
        return float(r["mbit"])
    if "series" in r:
        return float(read_capacity(_ref(base, r["series"])).column(r["column"]).mean())
    if is_cellreplay_rate(r):  # the heavy PDOs' mean (a saturating sender's rate)
        return heavy_mbit(
            load_side(_ref(base, r["cellreplay"]), cellreplay_side(r, direction)).heavy_ms
        )
    return float(opportunities_to_rate(read_mahimahi(_ref(base, r["mahimahi"]))).mean())


def profile_summary(spec: str, seed: int = 1) -> dict[str, Any]:
    """Numbers for reports: mean RTT, mean rates, queue, loss, DRX, trace period."""
    p, base = _profile_for(spec, seed)
    d = p["delay"]
    out: dict[str, Any] = {
        "spec": spec,
        "seed": seed,
        "name": p["name"],
        "description": p.get("description", ""),
        "profile": resolve_channel(spec, seed),
        "delay_kind": d["kind"],
        "mean_rtt_ms": round(_mean_rtt(p, base), 3),
    }
    if d["kind"] == "timeline":
        from dchlab.traces.stats import rtt_stats

        out.update(
            {
                f"rtt_{k}": v
                for k, v in rtt_stats(read_rtt(_ref(base, d["file"]))).items()
                if k != "mean"
            }
        )
    if d["kind"] == "gaussian":
        out["cov"] = d["cov"]
        out["resample_ms"] = d.get("resample_ms", DEFAULT_RESAMPLE_MS)
    for side, short in (("uplink", "up"), ("downlink", "down")):
        t = p[side]
        rate = _rate_summary(t["rate"], base, side)
        out[f"{short}_mbit"] = None if rate is None else round(rate, 3)
        q = t.get(
            "queue", "unlimited" if is_cellreplay_rate(t["rate"]) else {"packets": QUEUE_PACKETS}
        )
        out[f"{short}_queue"] = q if q == "unlimited" else dict(q)
        out[f"{short}_loss"] = float(t.get("loss", 0.0))
    out["drx"] = p["downlink"].get("drx")
    periods = _periods_ms(p, base)
    out["period_ms"] = max(periods) if periods else None
    out["trace_offset_ms"] = trace_offset_ms(spec, seed)
    return out
