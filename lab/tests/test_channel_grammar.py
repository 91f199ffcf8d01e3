"""The Python channel-name grammar (dchlab.traces.builtin) against chanemu's own:
the same names go to both, and they must accept, refuse and read them alike."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import require_binaries

from dchlab.paths import binary
from dchlab.testbed import TestbedError
from dchlab.testbed import channels as ch
from dchlab.traces.builtin import Fixed, parse_builtin

GOOD = [
    "urllc",
    "embb",
    "fixed:5ms/2mbit",
    "fixed:5ms/unlimited",
    "fixed:0ms/unlimited",
    "fixed:40ms/200mbit",
    "fixed:2.5ms/0.5mbit",
    "fixed:.5ms/2mbit",
    "fixed:5.ms/2mbit",
    "fixed:1e3ms/2mbit",
    "fixed:1E-1ms/2e2mbit",
    "fixed:+5ms/2mbit",
    "fixed:-0ms/2mbit",
]
BAD = [
    "fixed:5/2mbit",
    "fixed:5ms2mbit",
    "fixed:5ms/2",
    "fixed:5ms/0mbit",
    "fixed:5ms/-2mbit",
    "fixed:-1ms/2mbit",
    "fixed:ms/2mbit",
    "fixed:5ms/mbit",
    "fixed:5 ms/2mbit",
    "fixed:1_000ms/2mbit",
    "fixed:infms/2mbit",
    "fixed:nanms/2mbit",
    "fixed:5ms/infmbit",
    "fixed:1e400ms/2mbit",
    "fixed:5ms/unlimitedmbit",
    "fixed:5ms/Unlimited",
    "fixed:5ms/2mbit/3",
    "fixed:",
]
# Not built-ins for either (chanemu then reads them as file paths, which do not exist).
NOT_BUILTIN = ["URLLC", "Embb", "FIXED:5ms/2mbit", "fixd:5ms/2mbit", "nosuch.toml"]


def _chanemu(name: str) -> dict | None:
    """chanemu's reading of `name` (its resolved profile), or None if it refuses it."""
    p = subprocess.run(
        [str(binary("chanemu")), "check-profile", name],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",  # relative names must not find a file by accident
    )
    assert p.returncode in (0, 1), p.stderr  # 1 is its refusal; anything else is a crash
    return json.loads(p.stdout) if p.returncode == 0 else None


def _python(name: str) -> Fixed | None:
    try:
        return parse_builtin(name)
    except ValueError:
        return None


@pytest.mark.parametrize("name", GOOD + BAD + NOT_BUILTIN)
def test_python_and_chanemu_agree(name: str) -> None:
    require_binaries("chanemu")
    rust, py = _chanemu(name), _python(name)
    assert (rust is not None) == (py is not None), (name, rust, py)
    assert (py is not None) == (name in GOOD)
    if py is None or rust is None:
        return
    assert rust["delay"] == {"kind": "fixed", "rtt_ms": pytest.approx(py.rtt_ms)}
    for side in ("uplink", "downlink"):
        rate = rust[side]["rate"]
        if py.rate_mbit is None:
            assert rate == "unlimited"
        else:
            assert rate == {"mbit": pytest.approx(py.rate_mbit)}
    # The name Python writes back for it is one chanemu reads as the same channel.
    again = _chanemu(py.spec())
    assert again is not None and again["delay"] == rust["delay"]
    assert again["downlink"]["rate"] == rust["downlink"]["rate"]


def test_malformed_fixed_is_an_error_naming_the_problem() -> None:
    with pytest.raises(ValueError, match=r"fixed:5/2mbit.*RTT must end in `ms`"):
        parse_builtin("fixed:5/2mbit")
    with pytest.raises(ValueError, match="rate must be > 0"):
        parse_builtin("fixed:5ms/0mbit")
    assert parse_builtin("profile.toml") is None


def test_spec_round_trips_exact_values() -> None:
    assert Fixed(5.0, None).spec() == "fixed:5ms/unlimited"
    assert Fixed(40.0, 200.0).spec() == "fixed:40ms/200mbit"
    odd = Fixed(12.3456789, 0.1234567891)
    assert parse_builtin(odd.spec()) == odd


def test_testbed_reads_unlimited_builtin() -> None:
    # The testbed once had its own copy of the grammar without `unlimited`.
    prof = ch.profile_dict("fixed:5ms/unlimited")
    assert prof["delay"] == {"kind": "fixed", "rtt_ms": 5.0}
    assert prof["uplink"]["rate"] == "unlimited" == prof["downlink"]["rate"]
    ideal = ch.ideal_profile("fixed:40ms/200mbit", "fixed:5ms/unlimited")
    assert ideal["delay"]["rtt_ms"] == 5.0 and ideal["downlink"]["rate"] == {"mbit": 200.0}
    with pytest.raises(TestbedError, match="no nominal Mbit/s"):
        ch.nominal_mbit("fixed:5ms/unlimited", "uplink")
    with pytest.raises(TestbedError, match="RTT must end in `ms`"):
        ch.profile_dict("fixed:5/2mbit")
    assert ch.resolve_channel("fixed:5ms/unlimited", 1) == "fixed:5ms/unlimited"
