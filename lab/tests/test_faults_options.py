"""`dch shell`'s fault options (--hbc-outage, --llc-outage, --*-loss-burst,
--fault-repeat) turn into profile files with the `faults` table chanemu reads."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dchlab.commands import shell
from dchlab.traces.profile_toml import load_profile


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    shell.add_testbed_args(p)
    return p.parse_args(argv)


def test_no_fault_options_leave_the_channels_alone() -> None:
    cfg = shell.config_from_args(_parse([]))
    assert (cfg.hbc, cfg.llc) == ("fixed:40ms/200mbit", "urllc")


def test_outages_and_bursts_reach_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DCH_CACHE", str(tmp_path))
    args = _parse(
        ["--llc-outage", "2s-4s", "--llc-outage", "6s-6500ms:up", "--hbc-loss-burst",
         "1s-2s:0.25:down", "--fault-repeat", "10s"]
    )  # fmt: skip
    cfg = shell.config_from_args(args)
    llc, hbc = load_profile(cfg.llc), load_profile(cfg.hbc)
    assert Path(cfg.llc).is_relative_to(tmp_path)
    assert llc["uplink"]["faults"] == {
        "repeat_ms": 10000.0,
        "down": [{"from_ms": 2000.0, "to_ms": 4000.0}, {"from_ms": 6000.0, "to_ms": 6500.0}],
    }
    assert llc["downlink"]["faults"]["down"] == [{"from_ms": 2000.0, "to_ms": 4000.0}]
    assert llc["delay"] == {"kind": "fixed", "rtt_ms": 5.0}  # urllc underneath
    assert "faults" not in hbc["uplink"]
    assert hbc["downlink"]["faults"] == {
        "repeat_ms": 10000.0,
        "loss_bursts": [{"from_ms": 1000.0, "to_ms": 2000.0, "loss": 0.25}],
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--llc-outage", "4s-2s"], "must end after it starts"),
        (["--llc-outage", "2s-4s:left"], "up, down or both"),
        (["--hbc-loss-burst", "2s-4s"], "FROM-TO:P"),
        (["--fault-repeat", "ten"], "period like 10s"),
    ],
)
def test_bad_values_are_refused_by_argparse(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _parse(argv)
    assert message in capsys.readouterr().err
