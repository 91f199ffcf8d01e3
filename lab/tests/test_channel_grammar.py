"""The Python channel-name grammar (dchlab.traces.builtin) and fault-schedule rules
(dchlab.traces.faults, via profile_toml) against chanemu's own: the same names and
profile files go to both, and they must accept, refuse and read them alike."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import require_binaries

from dchlab.paths import binary
from dchlab.testbed import TestbedError
from dchlab.testbed import channels as ch
from dchlab.traces.builtin import Fixed, parse_builtin
from dchlab.traces.errors import TraceFormatError
from dchlab.traces.faults import Fault, parse_burst, parse_outage, with_faults
from dchlab.traces.profile_toml import load_profile

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


# ---- fault schedules (`<direction>.faults`, docs/formats.md) -----------------------

FAULTS_GOOD = [
    "{ down = [{ from_ms = 2000, to_ms = 4000 }] }",
    "{ down = [{ from_ms = 0, to_ms = 0.5 }, { from_ms = 0.5, to_ms = 9 }] }",
    "{ loss_bursts = [{ from_ms = 100, to_ms = 200.25, loss = 0.3 }] }",
    "{ loss_bursts = [{ from_ms = 1, to_ms = 2, loss = 1 }, { from_ms = 3, to_ms = 4, loss = 0 }] }",
    "{ repeat_ms = 8000, down = [{ from_ms = 3000, to_ms = 5000 }], loss_bursts = [{ from_ms = 6000, to_ms = 8000, loss = 0.5 }] }",
    "{ down = [], loss_bursts = [] }",
    "{ repeat_ms = 1 }",
]
FAULTS_BAD = [
    "{ down = [{ from_ms = 4000, to_ms = 2000 }] }",
    "{ down = [{ from_ms = 5, to_ms = 5 }] }",
    "{ down = [{ from_ms = 0, to_ms = 10 }, { from_ms = 5, to_ms = 20 }] }",
    "{ down = [{ from_ms = 10, to_ms = 20 }, { from_ms = 0, to_ms = 5 }] }",
    "{ down = [{ from_ms = -1, to_ms = 10 }] }",
    "{ down = [{ from_ms = 0, to_ms = 2e12 }] }",
    "{ down = [{ from_ms = 0 }] }",
    "{ down = [{ from_ms = 0, until_ms = 10 }] }",
    "{ down = [{ from_ms = 0, to_ms = 10, loss = 0.5 }] }",
    '{ down = [{ from_ms = "0", to_ms = 10 }] }',
    "{ down = { from_ms = 0, to_ms = 10 } }",
    "{ loss_bursts = [{ from_ms = 0, to_ms = 10 }] }",
    "{ loss_bursts = [{ from_ms = 0, to_ms = 10, loss = 1.5 }] }",
    "{ loss_bursts = [{ from_ms = 0, to_ms = 10, loss = -0.1 }] }",
    "{ repeat_ms = 5, down = [{ from_ms = 0, to_ms = 10 }] }",
    "{ repeat_ms = 0 }",
    "{ outages = [] }",
    "[1, 2]",
]


def _faulty_profile(tmp_path: Path, faults: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "f"\n[delay]\nkind = "fixed"\nrtt_ms = 5\n'
        "[uplink]\nrate = { mbit = 2 }\n"
        f"[downlink]\nrate = {{ mbit = 2 }}\nfaults = {faults}\n"
    )
    return path


def _python_faults(path: Path) -> dict | None:
    try:
        return load_profile(path)["downlink"]["faults"]
    except TraceFormatError:
        return None


@pytest.mark.parametrize("faults", FAULTS_GOOD + FAULTS_BAD)
def test_fault_tables_accepted_and_read_alike(tmp_path: Path, faults: str) -> None:
    require_binaries("chanemu")
    path = _faulty_profile(tmp_path, faults)
    rust, py = _chanemu(str(path)), _python_faults(path)
    assert (rust is not None) == (py is not None), (faults, rust, py)
    assert (py is not None) == (faults in FAULTS_GOOD)
    if rust is None or py is None:
        return
    got = rust["downlink"]["faults"]
    if not py.get("down") and not py.get("loss_bursts") and "repeat_ms" not in py:
        assert got is None
        return
    assert got["repeat_ms"] == py.get("repeat_ms")
    assert got["down"] == [{k: pytest.approx(v) for k, v in w.items()} for w in py.get("down", [])]
    assert got["loss_bursts"] == [
        {k: pytest.approx(v) for k, v in w.items()} for w in py.get("loss_bursts", [])
    ]
    assert rust["uplink"]["faults"] is None


def test_fault_errors_name_the_entry(tmp_path: Path) -> None:
    path = _faulty_profile(tmp_path, FAULTS_BAD[2])
    with pytest.raises(TraceFormatError, match=r"downlink\.faults\.down\[1\].*overlap"):
        load_profile(path)
    path = _faulty_profile(tmp_path, FAULTS_BAD[12])
    with pytest.raises(TraceFormatError, match=r"downlink\.faults\.loss_bursts\[0\]\.loss"):
        load_profile(path)


def test_outage_and_burst_option_values() -> None:
    assert parse_outage("2s-4s") == Fault(2000.0, 4000.0, ("uplink", "downlink"))
    assert parse_outage("1.5s-2500ms:up") == Fault(1500.0, 2500.0, ("uplink",))
    assert parse_outage(".5s-1s:down") == Fault(500.0, 1000.0, ("downlink",))
    assert parse_burst("2s-4s:0.3") == Fault(2000.0, 4000.0, ("uplink", "downlink"), 0.3)
    assert parse_burst("0ms-10ms:1:both").loss == 1.0
    for parse, bad, msg in [
        (parse_outage, "2-4", "expected a time like 2s"),
        (parse_outage, "2s", "expected FROM-TO"),
        (parse_outage, "4s-2s", "must end after it starts"),
        (parse_outage, "2s-4s:sideways", "up, down or both"),
        (parse_outage, "-1s-2s", "expected a time"),
        (parse_burst, "2s-4s", "FROM-TO:P"),
        (parse_burst, "2s-4s:1.5", "probability"),
        (parse_burst, "2s-4s:x", "probability"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse(bad)


def test_with_faults_profile_is_read_by_chanemu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_binaries("chanemu")
    monkeypatch.setenv("DCH_CACHE", str(tmp_path))
    faults = [parse_outage("2s-4s:down"), parse_burst("5s-6s:0.25"), parse_outage("1s-1.5s")]
    assert with_faults("urllc", 1, []) == "urllc"
    path = with_faults("urllc", 1, faults, repeat_ms=8000.0)
    rust = _chanemu(path)
    assert rust is not None
    assert rust["delay"] == {"kind": "fixed", "rtt_ms": 5.0}
    assert rust["downlink"]["faults"] == {
        "repeat_ms": 8000.0,
        "down": [{"from_ms": 1000.0, "to_ms": 1500.0}, {"from_ms": 2000.0, "to_ms": 4000.0}],
        "loss_bursts": [{"from_ms": 5000.0, "to_ms": 6000.0, "loss": 0.25}],
    }
    assert rust["uplink"]["faults"]["down"] == [{"from_ms": 1000.0, "to_ms": 1500.0}]
    # the same spec and faults give the same file; overlapping outages are refused
    assert with_faults("urllc", 1, faults, repeat_ms=8000.0) == path
    with pytest.raises(TraceFormatError, match=r"uplink\.faults\.down\[1\]"):
        with_faults("urllc", 1, [parse_outage("1s-3s"), parse_outage("2s-4s")])
