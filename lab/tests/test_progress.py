"""The progress heartbeat: a campaign whose stderr is a file still says how far it is."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from dchlab.progress import heartbeat


def test_heartbeat_logs_when_stderr_is_not_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dchlab.progress")
    beat = heartbeat(Console(file=io.StringIO(), force_terminal=False), "fig3", every_s=0.0)
    beat(0, 4, "MM-S t0 dchannel (1)")
    beat(2, 4, "MM-S t0 ideal (1)")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("fig3: 0/4 (0%), elapsed 0:00:00, ETA ?")
    assert lines[1].startswith("fig3: 2/4 (50%)") and lines[1].endswith("— MM-S t0 ideal (1)")


def test_heartbeat_is_quiet_between_beats_and_on_a_terminal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dchlab.progress")
    beat = heartbeat(Console(file=io.StringIO(), force_terminal=False), "c", every_s=3600)
    beat(1, 3)  # within the first hour: nothing
    beat(3, 3)  # the last item: always
    assert [r.getMessage()[:7] for r in caplog.records] == ["c: 3/3 "]
    caplog.clear()
    tty = heartbeat(Console(file=io.StringIO(), force_terminal=True), "c", every_s=0.0)
    tty(3, 3)
    assert caplog.records == []
