"""resolve_channel and friends: the API the testbed and campaigns use."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dchlab.traces import profiles
from dchlab.traces.errors import TraceFormatError
from dchlab.traces.profile_toml import load_profile
from dchlab.traces.scenarios import SCENARIOS


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("DCH_CACHE", str(cache))
    return cache


def _toml(path: str) -> dict:
    return tomllib.loads(Path(path).read_text())


def test_builtins_pass_through_unchanged() -> None:
    assert profiles.resolve_channel("urllc") == "urllc"
    assert profiles.resolve_channel("embb") == "embb"
    assert profiles.resolve_channel("fixed:40ms/200mbit") == "fixed:40ms/200mbit"
    assert profiles.trace_offset_ms("embb", 5) == 0
    assert profiles.trace_offset_ms("fixed:10ms/5mbit", 9) == 0


def test_scenario_is_synthesized_once_into_the_cache(_cache: Path) -> None:
    path = profiles.resolve_channel("MM-D", seed=2)
    assert path == str(_cache / "profiles" / "MM-D-seed2" / "profile.toml")
    p = load_profile(path)  # validates and checks the trace files exist
    assert p["delay"] == {"kind": "timeline", "file": "MM-D.rtt.csv"}
    assert p["uplink"]["rate"] == {"mbit": 60.0}
    assert p["downlink"]["rate"] == {"series": "MM-D.cap.csv", "column": "down_mbit"}
    assert p["uplink"]["queue"] == {"packets": 800} == p["downlink"]["queue"]
    assert p["downlink"]["drx"] == {"inactivity_ms": 30, "wake_period_ms": 40}
    assert "drx" not in p["uplink"]
    # Plain permissions (not mkstemp's 0600 / mkdtemp's 0700), as any file we write.
    import os

    umask = os.umask(0)
    os.umask(umask)
    assert Path(path).stat().st_mode & 0o777 == 0o666 & ~umask
    assert Path(path).parent.stat().st_mode & 0o777 == 0o777 & ~umask
    mtime = Path(path).stat().st_mtime_ns
    assert profiles.resolve_channel("mm-d", seed=2) == path  # reused, not rewritten
    assert Path(path).stat().st_mtime_ns == mtime
    lb = load_profile(profiles.resolve_channel("LB-W", seed=2))
    assert lb["uplink"]["rate"] == {"series": "LB-W.cap.csv", "column": "up_mbit"}
    assert lb["downlink"]["drx"] == {"inactivity_ms": 100, "wake_period_ms": 20}


def test_modifiers_on_a_fixed_channel() -> None:
    p = _toml(profiles.resolve_channel("urllc+loss=0.001+queue=100+drx=mmwave"))
    assert p["delay"] == {"kind": "fixed", "rtt_ms": 5.0}
    for side in ("uplink", "downlink"):
        assert p[side]["rate"] == {"mbit": 2.0}
        assert p[side]["loss"] == 0.001
        assert p[side]["queue"] == {"packets": 100}
    assert p["downlink"]["drx"] == {"inactivity_ms": 30, "wake_period_ms": 40}
    q = _toml(profiles.resolve_channel("fixed:40ms/200mbit+rtt=60"))
    assert q["delay"] == {"kind": "fixed", "rtt_ms": 60.0}
    g = _toml(profiles.resolve_channel("embb+cov=0.5"))
    assert g["delay"] == {"kind": "gaussian", "mean_rtt_ms": 40.0, "cov": 0.5, "resample_ms": 10}
    g = _toml(profiles.resolve_channel("embb+rtt=20+cov=0.25+resample=20"))
    assert g["delay"] == {"kind": "gaussian", "mean_rtt_ms": 20.0, "cov": 0.25, "resample_ms": 20.0}


def test_modifiers_on_a_scenario_keep_traces_reachable() -> None:
    path = profiles.resolve_channel("MM-D+cov=0.5+drx=none+loss=0.01", seed=1)
    p = load_profile(path)  # relative trace paths still resolve from the derived dir
    assert p["delay"]["kind"] == "gaussian"
    # Same mean RTT as the scenario's timeline (Table 1: 56.15 ms, within 5 %).
    assert p["delay"]["mean_rtt_ms"] == pytest.approx(56.15, rel=0.05)
    assert "drx" not in p["downlink"]
    assert p["uplink"]["loss"] == p["downlink"]["loss"] == 0.01
    series = Path(path).parent / p["downlink"]["rate"]["series"]
    assert series.resolve().name == "MM-D.cap.csv" and series.is_file()
    assert profiles.resolve_channel("MM-D+cov=0.5+drx=none+loss=0.01", seed=1) == path


def test_profile_path_with_and_without_modifiers(tmp_path: Path) -> None:
    base = Path(profiles.resolve_channel("LB-S", seed=1))
    assert profiles.resolve_channel(str(base)) == str(base.resolve())
    derived = load_profile(profiles.resolve_channel(f"{base}+queue=unlimited"))
    assert derived["uplink"]["queue"] == "unlimited"


def test_unknown_names_and_bad_modifiers_are_refused() -> None:
    with pytest.raises(ValueError) as e:
        profiles.resolve_channel("MM-X")
    msg = str(e.value)
    for name in ["urllc", "embb", "fixed:<rtt>ms/<rate>mbit", *SCENARIOS]:
        assert name in msg
    for bad in [
        "embb+loss=2",
        "embb+jitter=3",
        "embb+loss",
        "embb+drx=sleepy",
        "embb+resample=20",
        "embb+loss=x",
    ]:
        with pytest.raises(ValueError):
            profiles.resolve_channel(bad)


def test_bad_profile_names_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\n[delay]\nkind = "fixed"\nrtt_ms = 5\n[uplink]\nrate = { mbit = 1 }\nspeed = 3\n[downlink]\nrate = "unlimited"\n'
    )
    with pytest.raises(TraceFormatError) as e:
        profiles.resolve_channel(str(bad))
    assert str(bad) in str(e.value) and "uplink.speed" in str(e.value)
    bad.write_text('name = "x"\n[delay\n')
    with pytest.raises(TraceFormatError) as e:
        profiles.resolve_channel(str(bad))
    assert str(bad) in str(e.value) and "line 2" in str(e.value)


def test_trace_offset_is_a_deterministic_function_of_the_seed() -> None:
    a = profiles.trace_offset_ms("MM-S", 1)
    assert a == profiles.trace_offset_ms("MM-S", 1)
    assert 0 <= a < 60 * 60_000
    offsets = {profiles.trace_offset_ms("MM-D", s) for s in range(1, 6)}
    assert len(offsets) == 5 and all(0 <= o < 18 * 60_000 for o in offsets)
    # A derived profile over the same traces keeps the seed's offset (paired runs).
    assert profiles.trace_offset_ms("MM-D+loss=0.01", 3) == profiles.trace_offset_ms("MM-D", 3)


def test_known_channels_and_summary() -> None:
    names = profiles.known_channels()
    assert {"urllc", "embb", *SCENARIOS} == set(names)
    s = profiles.profile_summary("LB-D", seed=1)
    assert s["mean_rtt_ms"] == pytest.approx(68.84, rel=0.05)
    assert s["up_mbit"] == pytest.approx(15, rel=0.05)
    assert s["down_mbit"] == pytest.approx(57, rel=0.05)
    assert s["period_ms"] == 23 * 60_000
    assert s["drx"] == {"inactivity_ms": 100, "wake_period_ms": 20}
    e = profiles.profile_summary("urllc")
    assert (e["mean_rtt_ms"], e["up_mbit"], e["down_mbit"], e["trace_offset_ms"]) == (
        5.0,
        2.0,
        2.0,
        0,
    )


def test_fixed_unlimited_like_chanemu() -> None:
    assert profiles.resolve_channel("fixed:5ms/unlimited") == "fixed:5ms/unlimited"
    p = _toml(profiles.resolve_channel("fixed:5ms/unlimited+loss=0.5"))
    assert p["uplink"]["rate"] == "unlimited" == p["downlink"]["rate"]
    assert profiles.profile_summary("fixed:5ms/unlimited")["down_mbit"] is None


_RACE = """
import sys
from dchlab.traces.profiles import resolve_channel
print(resolve_channel(sys.argv[1], 4))
"""


def test_concurrent_runs_share_one_complete_scenario_dir(_cache: Path) -> None:
    """Four processes resolving the same scenario at once: same path, complete files,
    no temp directories left behind (build in a temp dir + atomic rename)."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "DCH_CACHE": str(_cache),
        "PYTHONPATH": str(Path(profiles.__file__).parents[2]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACE, spec], env=env, stdout=subprocess.PIPE, text=True
        )
        for spec in ("LB-D", "LB-D", "LB-D+loss=0.01", "lb-d")
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    base = _cache / "profiles" / "LB-D-seed4" / "profile.toml"
    assert outs[0] == outs[1] == outs[3] == str(base)
    load_profile(base)
    load_profile(outs[2])
    assert (base.parent / "LB-D.rtt.csv").read_text().count("\n") == 23 * 60_000 // 15 + 1
    leftovers = [p.name for p in (_cache / "profiles").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def _chanemu_with_check() -> Path | None:
    import subprocess

    from dchlab.paths import binary

    try:
        exe = binary("chanemu")
    except FileNotFoundError:
        return None
    helptext = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
    return exe if "check-profile" in helptext else None


@pytest.mark.skipif(_chanemu_with_check() is None, reason="chanemu (with check-profile) not built")
def test_chanemu_accepts_every_scenario_and_derived_profile() -> None:
    """The contract with the Rust side: chanemu's own parser accepts what we write."""
    import subprocess

    exe = _chanemu_with_check()
    assert exe is not None
    usage = subprocess.run([exe, "check-profile", "--help"], capture_output=True, text=True).stdout
    flag = ["--profile"] if "--profile" in usage else []
    specs = [
        *SCENARIOS,
        "MM-D+cov=0.5+loss=0.01+drx=lowband+queue=100",
        "embb+rtt=60",
        "LB-S+rtt=30",
    ]
    for spec in specs:
        path = profiles.resolve_channel(spec, seed=1)
        proc = subprocess.run([exe, "check-profile", *flag, path], capture_output=True, text=True)
        assert proc.returncode == 0, (spec, proc.stderr)


def test_cache_from_an_older_synthesizer_is_regenerated(_cache: Path) -> None:
    path = Path(profiles.resolve_channel("MM-D", seed=9))
    (path.parent / "VERSION").write_text("0\n")
    (path.parent / "MM-D.rtt.csv").write_text("t_ms,rtt_ms\n0,1\n")
    again = Path(profiles.resolve_channel("MM-D", seed=9))
    assert again == path
    assert (path.parent / "MM-D.rtt.csv").read_text().count("\n") == 18 * 60_000 // 15 + 1
    assert [p.name for p in (_cache / "profiles").iterdir() if p.name.startswith(".")] == []
