"""The runner's store writes: one per (condition, trial, item) pair of schemes, and
rows already measured are kept when the run is interrupted."""

from __future__ import annotations

import textwrap

import pytest

from dchlab.experiments import runner, store
from dchlab.experiments.campaign import load_campaign
from dchlab.soak_kills import CAMPAIGN


def fake(c, g):
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

    def interrupted(c, g):
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

    def terminated(c, g):
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

    def signalled(c, g):
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
    """Stands for a testbed prepared ahead (dchlab.workloads.ahead): records close()."""

    prefix = "dchX"

    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


def _prepare_fake(monkeypatch):
    import threading

    from dchlab.workloads import ahead

    tb = _Prepared()
    monkeypatch.setitem(ahead._NEXT, threading.get_ident(), (tb, [], {}, ()))
    return tb, ahead


def test_campaign_end_closes_the_testbed_prepared_for_a_load_that_never_comes(
    campaign, tmp_path, monkeypatch
):
    tb, ahead = _prepare_fake(monkeypatch)
    s = runner.run_campaign(campaign, store_path=tmp_path / "s.duckdb", executor=fake)
    assert s.measured == 12
    assert tb.closed == 1
    assert not ahead._NEXT


def test_interrupted_campaign_closes_the_prepared_testbed_too(campaign, tmp_path, monkeypatch):
    tb, ahead = _prepare_fake(monkeypatch)

    def interrupted(c, g):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run_campaign(campaign, store_path=tmp_path / "s.duckdb", executor=interrupted)
    assert tb.closed == 1
    assert not ahead._NEXT
