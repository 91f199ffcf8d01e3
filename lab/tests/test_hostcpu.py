"""Per-load CPU accounting (dchlab.hostcpu) with /proc/stat lines by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from dchlab.hostcpu import CpuTimes, parse_cpu_line, read_cpu_times, shares

# proc(5): cpu user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  1000 50 300 5000 20 5 25 100 40 0"
AFTER = "cpu  1300 50 400 5150 30 5 45 120 90 0"


def test_the_aggregate_line_splits_into_busy_idle_and_steal() -> None:
    t = parse_cpu_line(BEFORE)
    # busy = user + nice + system + irq + softirq; guest is inside user already
    assert t == CpuTimes(busy=1000 + 50 + 300 + 5 + 25, idle=5000 + 20, steal=100)
    assert t.total == 1380 + 5020 + 100


def test_shares_over_one_load_by_hand() -> None:
    # deltas: busy 300 + 100 + 20 = 420, idle 150 + 10 = 160, steal 20; total 600
    s = shares(parse_cpu_line(BEFORE), parse_cpu_line(AFTER))
    assert s["host_cpu_busy"] == pytest.approx(420 / 600)
    assert s["host_cpu_steal"] == pytest.approx(20 / 600)


def test_unknown_or_no_tick_gives_none() -> None:
    t = parse_cpu_line(BEFORE)
    none = {"host_cpu_busy": None, "host_cpu_steal": None}
    assert shares(None, t) == none and shares(t, None) == none
    assert shares(t, t) == none  # no tick passed: no share to give


@pytest.mark.parametrize("line", ["cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "", "intr 5"])
def test_other_lines_are_refused(line: str) -> None:
    with pytest.raises(ValueError, match="aggregate cpu line"):
        parse_cpu_line(line)


def test_reading_this_machine_and_a_missing_file(tmp_path: Path) -> None:
    assert read_cpu_times(tmp_path / "nothing") is None
    bad = tmp_path / "stat"
    bad.write_text("garbage\n")
    assert read_cpu_times(bad) is None
    if Path("/proc/stat").exists():
        t = read_cpu_times()
        assert t is not None and t.busy > 0 and t.idle >= 0 and t.steal >= 0
