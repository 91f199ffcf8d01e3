"""One UserError base, handled once in `dch` (cli.main): message on stderr, exit code."""

from __future__ import annotations

import argparse

import pytest

from dchlab import cli
from dchlab.apps.profile import ProfileError
from dchlab.errors import UserError
from dchlab.experiments.campaign import CampaignError
from dchlab.experiments.ray_backend import RayClusterError
from dchlab.experiments.runner import WorkloadUnavailable
from dchlab.experiments.setup_errors import RepeatedSetupError
from dchlab.experiments.store import StoreError
from dchlab.pages.corpus import CorpusError
from dchlab.testbed import TestbedError
from dchlab.traces.errors import TraceFormatError
from dchlab.workloads.localreplay import LocalReplayError

# Each class, the builtin it always derived from (old `except` clauses still catch it)
# and the exit status `dch` gives it.
CLASSES = [
    (CorpusError, ValueError, 2),
    (CampaignError, ValueError, 2),
    (ProfileError, ValueError, 2),
    (TraceFormatError, ValueError, 2),
    (StoreError, RuntimeError, 2),
    (LocalReplayError, RuntimeError, 2),
    (WorkloadUnavailable, RuntimeError, 3),
    (RayClusterError, RuntimeError, 3),
    (RepeatedSetupError, RuntimeError, 4),
    (TestbedError, RuntimeError, 125),
]


@pytest.mark.parametrize(("cls", "builtin", "code"), CLASSES)
def test_every_error_class_is_a_user_error(cls: type, builtin: type, code: int) -> None:
    assert issubclass(cls, UserError) and issubclass(cls, builtin)
    assert cls.exit_code == code


@pytest.mark.parametrize(("cls", "code"), [(c, code) for c, _, code in CLASSES])
def test_main_prints_the_message_and_exits_with_its_code(
    cls: type, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dchlab.commands import cleanup

    def fail(args: argparse.Namespace) -> int:
        if cls is TraceFormatError:
            raise TraceFormatError("t.csv", "expected a number", line=3, field="rtt_ms")
        if cls is RepeatedSetupError:
            raise RepeatedSetupError("chanemu died", 3, ["a", "b", "c"])
        raise cls("the thing is wrong: fix it")

    monkeypatch.setattr(cleanup, "cmd_cleanup", fail)
    assert cli.main(["cleanup"]) == code
    err = capsys.readouterr().err
    assert err.startswith("dch cleanup: error: ") and "Traceback" not in err
    assert (
        ("t.csv" in err) if cls is TraceFormatError else ("chanemu died" in err or "fix it" in err)
    )


def test_other_exceptions_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    from dchlab.commands import cleanup

    def bug(args: argparse.Namespace) -> int:
        raise KeyError("a bug, not bad input")

    monkeypatch.setattr(cleanup, "cmd_cleanup", bug)
    with pytest.raises(KeyError):
        cli.main(["cleanup"])


def test_bad_input_through_real_commands(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["app", "--profile", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err
    bad = tmp_path / "c.yaml"
    bad.write_text("name: x\nschemes: [all-hbc]\nconditions: [{name: a, hbc: embb, llc: urllc}]\n"
                   "workload: {kind: bulk, sizes: [1TB]}\n")  # fmt: skip
    assert cli.main(["run", str(bad), "--store", str(tmp_path / "s.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dch run: error: ") and "workload.sizes[0]" in err and "'TB'" in err
    (tmp_path / "x.rtt.csv").write_text("t_ms,rtt_ms\n0,abc\n")
    assert cli.main(["traces", "stats", str(tmp_path / "x.rtt.csv")]) == 2
    assert "x.rtt.csv" in capsys.readouterr().err
    assert cli.main(["traces", "stats", str(tmp_path / "missing.rtt.csv")]) == 2
    assert "missing.rtt.csv" in capsys.readouterr().err
