"""The testbed pool's decisions, without namespaces: what it prepares for, which prepared
testbed it hands out, and what it closes (the live loads: test_pageload_fast.py)."""

from __future__ import annotations

import pytest

from dchlab.run_config import RunConfig, testbed_config
from dchlab.testbed import Testbed
from dchlab.workloads.pool import BrowserStart, Lease, TestbedPool, _signature


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, BrowserStart(pipe=True, early=True, ahead=True)),
        ({"DCH_PREPARE_AHEAD": "0"}, BrowserStart(pipe=True, early=True, ahead=False)),
        ({"DCH_BROWSER_EARLY": "0"}, BrowserStart(pipe=True, early=False, ahead=False)),
        # the old per-load driver: no early launch, nothing prepared (bench_overhead's OLD_MODE)
        ({"DCH_BROWSER_DRIVER": "subprocess"}, BrowserStart(pipe=False, early=False, ahead=False)),
    ],
)
def test_browser_start_reads_the_benchmark_switches_once(monkeypatch, env, want) -> None:
    for k in ("DCH_PREPARE_AHEAD", "DCH_BROWSER_EARLY", "DCH_BROWSER_DRIVER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert BrowserStart.from_env() == want
    assert TestbedPool().start == want


RUN = RunConfig("all-hbc", "fixed:20ms/50mbit", "urllc")


def test_nothing_is_prepared_when_nothing_is_expected_or_ahead_is_off() -> None:
    pool = TestbedPool(BrowserStart())
    pool.take(testbed_config(RUN, "p"))
    assert pool.next_run is None and pool.prepare_next() is None
    off = TestbedPool(BrowserStart(ahead=False))
    off.take(testbed_config(RUN, "p"))
    off.expect(RUN)
    assert off.prepare_next() is None and off.prepared_testbed() is None


class _Proc:
    def __init__(self, alive: bool) -> None:
        self.alive = alive

    def poll(self) -> int | None:
        return None if self.alive else -9


class _Browser:
    def __init__(self, alive: bool) -> None:
        self.proc = _Proc(alive)
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class _Prepared(Testbed):
    """A testbed as prepare() leaves it, without namespaces: records use() and close()."""

    def __init__(self, scheme: str) -> None:
        super().__init__(testbed_config(RunConfig(scheme, "embb", "urllc"), None))
        self.prefix, self.used, self.closes = "dchT", None, 0

    def use(self, cfg):  # type: ignore[no-untyped-def]
        self.used = cfg
        return self

    def close(self) -> None:
        self.closes += 1


def _pool_with(scheme: str, alive: bool = True) -> tuple[TestbedPool, _Prepared, _Browser]:
    pool = TestbedPool(BrowserStart())
    tb, browser = _Prepared(scheme), _Browser(alive)
    lease = Lease(tb, [browser], {"nss_db": 1.5}, prepared=True)  # type: ignore[list-item]
    pool._prepared = (lease, _signature(tb, tb.scheme, tb.cfg))
    return pool, tb, browser


def test_a_prepared_testbed_serves_a_scheme_that_starts_its_browser_the_same_way() -> None:
    pool, tb, browser = _pool_with("all-hbc")
    cfg = testbed_config(RunConfig("dchannel", "MM-S", "urllc", trial=2), "p")
    lease = pool.take(cfg)
    assert lease.testbed is tb and tb.used is cfg  # given the load's own configuration
    assert lease.browsers == [browser] and browser.closed == 0
    assert lease.timing == {"nss_db": 1.5, "prepared_ahead": 1.0}
    assert pool.prepared_testbed() is None  # handed out once


@pytest.mark.parametrize(("scheme", "alive"), [("mptcp", True), ("all-hbc", False)])
def test_a_prepared_testbed_is_closed_for_another_launch_or_a_dead_browser(scheme, alive) -> None:
    pool, tb, browser = _pool_with("all-hbc", alive)
    lease = pool.take(testbed_config(RunConfig(scheme, "embb", "urllc"), "p"))
    assert lease.testbed is not tb and not lease.prepared and lease.browsers == []
    assert (tb.closes, browser.closed) == (1, 1)
    # a fresh testbed whose browser starts while it builds (early): one on_ue hook
    assert lease.testbed._on_ue == [lease.launch]


def test_a_browser_prepared_for_h2_does_not_serve_an_h3_load() -> None:
    """Same scheme, but an h3 load's Chromium is forced onto QUIC (its own flags): the
    browser prepared without them would measure TCP."""
    pool, tb, browser = _pool_with("all-hbc")
    lease = pool.take(testbed_config(RunConfig("all-hbc", "embb", "urllc", protocol="h3"), "p"))
    assert lease.testbed is not tb and (tb.closes, browser.closed) == (1, 1)


def test_closing_the_pool_closes_what_it_prepared() -> None:
    pool, tb, browser = _pool_with("all-hbc")
    with pool:
        assert pool.prepared_testbed() is tb
    assert (tb.closes, browser.closed) == (1, 1) and pool.prepared_testbed() is None
