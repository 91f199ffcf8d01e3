"""`--max-setup-errors`: a campaign stops when the same lab failure repeats, instead of
recording an aborted run for every cell."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dchlab.experiments import store
from dchlab.experiments.campaign import load_campaign
from dchlab.experiments.runner import run_campaign
from dchlab.experiments.setup_errors import RepeatedSetupError, SetupErrorGuard, normalise
from dchlab.testbed import TestbedError

LAB = Path(__file__).resolve().parents[1]

# 2 schemes x 3 sizes x 2 trials = 12 cells
CAMPAIGN = """
name: mse-test
schemes: [all-hbc, all-llc]
conditions:
  - {name: embb-urllc, hbc: embb, llc: urllc}
workload: {kind: bulk, sizes: [10KB, 20KB, 30KB], timeout_s: 30}
trials: 2
analysis: {kind: bulk, baseline: all-hbc, metric: total_ms}
"""

REFUSED = (
    "webreplay exited 1 before it listened (log /tmp/dch-runs/{p}/webreplay.log): "
    'hosts file /tmp/dch-runs/{p}/hosts line 3: host name ".ds_store": empty or over-long label'
)


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    return load_campaign(path)


def _prefixes():
    for i in itertools.count():
        yield f"dtb{(0xA1B2C3 + 7919 * i) & 0xFFFFFF:06x}"


def test_normalise_ignores_the_run_prefix_and_numbers_but_not_the_cause():
    a = normalise(REFUSED.format(p="dtb1a2b3c"))
    assert a == normalise(REFUSED.format(p="dtbffee01"))
    assert "dtb1a2b3c" not in a and ".ds_store" in a
    assert normalise("driver exited -9 after 1204 ms") == normalise("driver exited -9 after 77 ms")
    assert a != normalise(REFUSED.format(p="dtb1a2b3c").replace(".ds_store", "thumbs.db"))


def test_guard_counts_only_identical_errors_in_a_row():
    g = SetupErrorGuard(3)
    g.feed([{"error": "E 1", "cell": "a"}, {"error": "E 2", "cell": "b"}])
    g.feed([{"error": "other", "cell": "c"}, {"error": "E 3", "cell": "d"}])
    g.feed([{"valid": True, "cell": "e"}, {"error": "E 4", "cell": "f"}, {"error": "E 5"}])
    with pytest.raises(RepeatedSetupError) as e:
        g.feed([{"error": "E 6", "cell": "h"}])
    assert e.value.count == 3 and e.value.cells == ["f", "?", "h"]
    assert "E 6" in str(e.value) and "3 times in a row" in str(e.value)
    never = SetupErrorGuard(0)
    never.feed([{"error": "same"}] * 50)  # 0 disables the guard
    with pytest.raises(ValueError):
        SetupErrorGuard(-1)


def test_campaign_stops_after_three_identical_testbed_errors(campaign, tmp_path):
    prefixes = _prefixes()
    calls = []

    def broken(c, g, pool=None):
        calls.append(g.cells[0])
        raise TestbedError(REFUSED.format(p=next(prefixes)))

    db = tmp_path / "s.duckdb"
    s = run_campaign(campaign, store_path=db, executor=broken)
    assert len(calls) == 3
    assert s.stopped and "3 times in a row" in s.stopped and ".ds_store" in s.stopped
    assert (s.measured, s.failed) == (0, 3)
    rows = store.load_rows("mse-test", store=db)
    assert len(rows) == 3 and all(r["error"].startswith("TestbedError:") for r in rows)
    # the limit is a parameter; a higher one lets more cells through
    s5 = run_campaign(
        campaign, store_path=tmp_path / "s5.duckdb", executor=broken, max_setup_errors=5
    )
    assert s5.failed == 5 and s5.stopped


def test_testbed_rows_count_too_and_a_measurement_resets_the_streak(campaign, tmp_path):
    prefixes = _prefixes()
    n = itertools.count()

    def flaky(c, g, pool=None):
        i = next(n)
        if i % 3 == 2:  # every third group measures fine: never 3 failures in a row
            return [{"valid": True, "total_ms": 100.0, "size_bytes": 10_000}]
        return [{"valid": False, "invalid_reason": "testbed: " + REFUSED.format(p=next(prefixes))}]

    s = run_campaign(campaign, store_path=tmp_path / "s.duckdb", executor=flaky)
    assert s.stopped is None
    assert (s.measured, s.failed) == (4, 8)

    def broken_rows(c, g, pool=None):
        return [{"valid": False, "invalid_reason": "testbed: " + REFUSED.format(p=next(prefixes))}]

    s2 = run_campaign(campaign, store_path=tmp_path / "s2.duckdb", executor=broken_rows)
    assert s2.stopped and s2.failed == 3
    s0 = run_campaign(
        campaign, store_path=tmp_path / "s0.duckdb", executor=broken_rows, max_setup_errors=0
    )
    assert s0.stopped is None and s0.failed == 12


def test_dch_run_stops_with_the_error_and_exit_status_4(tmp_path):
    """A real lab failure: the release binaries are not where the testbed looks."""
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "PYTHONPATH": str(LAB), "CARGO_TARGET_DIR": str(tmp_path / "empty")}
    db = tmp_path / "s.duckdb"
    cmd = [sys.executable, "-m", "dchlab.cli", "run", str(path), "--store", str(db)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 4, p.stderr
    assert "the same setup error 3 times in a row" in p.stderr
    # the cause is printed; without root the testbed refuses earlier, with its own message
    assert ("chanemu" in p.stderr) or ("root" in p.stderr), p.stderr
    assert len(store.load_rows("mse-test", store=db)) == 3
    p = subprocess.run(
        [*cmd, "--max-setup-errors", "-1"], capture_output=True, text=True, env=env, timeout=60
    )
    assert p.returncode == 2 and "--max-setup-errors" in p.stderr
