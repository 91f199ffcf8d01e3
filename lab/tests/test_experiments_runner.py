"""The runner's store writes: one per (condition, trial, item) pair of schemes, and
rows already measured are kept when the run is interrupted."""

from __future__ import annotations

import itertools
import textwrap

import pytest

from dchlab.experiments import runner, store
from dchlab.experiments.campaign import load_campaign
from dchlab.soak_kills import CAMPAIGN


def fake(c, g, pool=None):
    return [{"valid": True, "total_ms": 1.0, "size_bytes": 1000}]


@pytest.fixture
def campaign(tmp_path):
    """The kill soak's small campaign: 3 schemes x 2 sizes x 2 trials = 12 cells in 4 pairs."""
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    return load_campaign(path)


def test_one_store_write_per_pair_in_plan_order(campaign, tmp_path, monkeypatch):
    writes = []
    real = store.append_rows
    monkeypatch.setattr(
        store, "append_rows", lambda rows, **kw: writes.append(rows) or real(rows, **kw)
    )
    db = tmp_path / "s.duckdb"
    s = runner.run_campaign(campaign, store_path=db, executor=fake)
    assert (s.measured, s.failed) == (12, 0)
    assert [len(w) for w in writes] == [3, 3, 3, 3]
    for w in writes:  # each write holds the schemes of one (condition, trial, item)
        assert len({(r["condition"], r["trial"], r["item"]) for r in w}) == 1
        assert {r["arm"] for r in w} == {"all-hbc", "all-llc", "dchannel"}
    assert len(store.load_rows(campaign.name, store=db)) == 12


def test_interrupted_run_keeps_what_it_measured(campaign, tmp_path):
    calls = []

    def interrupted(c, g, pool=None):
        calls.append(g.cells[0])
        if len(calls) == 5:  # the second scheme of the second pair
            raise KeyboardInterrupt
        return fake(c, g)

    db = tmp_path / "s.duckdb"
    with pytest.raises(KeyboardInterrupt):
        runner.run_campaign(campaign, store_path=db, executor=interrupted)
    stored = {r["cell"] for r in store.load_rows(campaign.name, store=db)}
    assert stored == set(calls[:4])
    s = runner.run_campaign(campaign, store_path=db, executor=fake)  # resume
    assert (s.skipped, s.measured) == (4, 8)


def test_testbed_interrupted_stops_the_campaign_without_error_rows(campaign, tmp_path):
    """SIGTERM during a load (the testbed raises TestbedInterrupted) stops the run; it
    is not recorded as a failed cell and the campaign does not go on to the next one."""
    from dchlab.testbed import TestbedInterrupted

    calls = []

    def terminated(c, g, pool=None):
        calls.append(g.cells[0])
        if len(calls) == 4:  # the first scheme of the second pair
            raise TestbedInterrupted("testbed dtb0 interrupted by SIGTERM")
        return fake(c, g)

    db = tmp_path / "s.duckdb"
    with pytest.raises(TestbedInterrupted) as exc:
        runner.run_campaign(campaign, store_path=db, executor=terminated)
    assert exc.value.exit_code == 143
    assert len(calls) == 4  # nothing ran after the signal
    rows = store.load_rows(campaign.name, store=db)
    assert {r["cell"] for r in rows} == set(calls[:3])
    assert not [r for r in rows if r.get("error")]


def test_sigterm_between_loads_stores_rows_and_resumes(campaign, tmp_path):
    """SIGTERM with no testbed open reaches the runner's own handler: the buffered
    pair is stored (no silent death) and the same command resumes where it stopped."""
    import os
    import signal

    calls = []

    def signalled(c, g, pool=None):
        calls.append(g.cells[0])
        if len(calls) == 5:
            os.kill(os.getpid(), signal.SIGTERM)  # handled before this returns
        return fake(c, g)

    db = tmp_path / "s.duckdb"
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(runner.CampaignStopped) as exc:
        runner.run_campaign(campaign, store_path=db, executor=signalled)
    assert exc.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is before  # handler restored
    stored = {r["cell"] for r in store.load_rows(campaign.name, store=db)}
    assert stored == set(calls[:4])
    s = runner.run_campaign(campaign, store_path=db, executor=fake)
    assert (s.skipped, s.measured) == (4, 8)


class _Prepared:
    """Stands for a testbed prepared ahead (dchlab.workloads.pool): records close()."""

    prefix = "dchX"

    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


def _preparing(calls):
    """An executor that records what its pool expects next and, on its first call,
    leaves a (fake) testbed prepared in the pool, as a page load's tail does."""
    from dchlab.workloads.pool import Lease

    tb = _Prepared()

    def execute(c, g, pool):
        calls.append((g.scheme.scheme, pool.next_run))
        if len(calls) == 1:
            pool._prepared = (Lease(tb, prepared=True), ())
        return fake(c, g)

    return tb, execute


def test_campaign_end_closes_the_testbed_prepared_for_a_load_that_never_comes(campaign, tmp_path):
    calls: list = []
    tb, execute = _preparing(calls)
    s = runner.run_campaign(campaign, store_path=tmp_path / "s.duckdb", executor=execute)
    assert s.measured == 12
    assert tb.closed == 1


def test_the_pool_is_told_the_run_of_the_next_group(campaign, tmp_path):
    calls: list = []
    _, execute = _preparing(calls)
    runner.run_campaign(campaign, store_path=tmp_path / "s.duckdb", executor=execute)
    assert len(calls) == 12
    # each group's pool expects the next group's scheme (and run); the last, nothing
    for (_, expected), (scheme_after, _) in itertools.pairwise(calls):
        assert expected is not None and expected.scheme == scheme_after
    assert calls[-1][1] is None
    assert {e.seed for _, e in calls[:-1]} == {campaign.seed}


def test_interrupted_campaign_closes_the_prepared_testbed_too(campaign, tmp_path):
    calls: list = []
    tb, execute = _preparing(calls)

    def interrupted(c, g, pool):
        execute(c, g, pool)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run_campaign(campaign, store_path=tmp_path / "s.duckdb", executor=interrupted)
    assert tb.closed == 1
