"""Write a synthesized scenario as trace files plus its channel profile."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from dchlab.traces.atomic import atomic_write_text
from dchlab.traces.capacity import write_capacity
from dchlab.traces.profile_toml import Profile, dump_profile
from dchlab.traces.scenarios import DRX_PRESETS, QUEUE_PACKETS, scenario
from dchlab.traces.synth import CAPACITY_MODELS, LATENT, synthesize
from dchlab.traces.timeline import write_rtt

#: Bump when the synthesizer's output changes, so caches regenerate.
SYNTH_VERSION = 3


def scenario_profile(name: str, seed: int, rtt_file: str, cap_file: str) -> Profile:
    sc = scenario(name)
    queue = {"packets": QUEUE_PACKETS}
    up_rate: dict[str, object] = (
        {"mbit": float(sc.up_mbit)}
        if sc.fixed_uplink
        else {"series": cap_file, "column": "up_mbit"}
    )
    return {
        "name": sc.name,
        "description": f"{sc.description} (synthetic, seed {seed})",
        "delay": {"kind": "timeline", "file": rtt_file},
        "uplink": {"rate": up_rate, "queue": queue, "loss": 0.0},
        "downlink": {
            "rate": {"series": cap_file, "column": "down_mbit"},
            "queue": queue,
            "loss": 0.0,
            "drx": dict(DRX_PRESETS[sc.band]),
        },
    }


def write_scenario(name: str, seed: int, out: Path) -> Path:
    """Synthesize `name` with `seed` into directory `out`; returns the profile path."""
    sc = scenario(name)
    out.mkdir(parents=True, exist_ok=True)
    rtt, cap = synthesize(sc.name, seed)
    rtt_file, cap_file = f"{sc.name}.rtt.csv", f"{sc.name}.cap.csv"
    write_rtt(out / rtt_file, rtt)
    write_capacity(out / cap_file, cap)
    meta = {
        "scenario": sc.name,
        "seed": seed,
        "synth_version": SYNTH_VERSION,
        "latent": LATENT.as_dict(),
        "capacity_model": asdict(CAPACITY_MODELS[sc.mobility]),
        "rtt_rows": len(rtt),
        "capacity_rows": len(cap),
    }
    atomic_write_text(out / "source.json", json.dumps(meta, indent=2) + "\n")
    profile = out / "profile.toml"
    atomic_write_text(profile, dump_profile(scenario_profile(sc.name, seed, rtt_file, cap_file)))
    return profile
