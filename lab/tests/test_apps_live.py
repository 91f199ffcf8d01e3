"""App interactions through the testbed in real Chromium (root, netns, chromium).

Budget: about 6 testbeds of a few seconds each (a session per profile runs all three
interactions; two launches for the RTT test)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import needs_testbed

from dchlab.apps.compile import cached_corpus
from dchlab.apps.profile import INTERACTIONS, AppProfile, load_profile
from dchlab.apps.run import check_interaction, critical_think_ms, run_driver
from dchlab.workloads.api import RunSpec

pytestmark = [pytest.mark.netns, pytest.mark.chromium, needs_testbed("dchannel")]


def _session(p: AppProfile, hbc: str) -> dict[str, Any]:
    from dchlab.testbed import Testbed, TestbedConfig, make_nss_db

    corpus = cached_corpus(p)
    cfg = TestbedConfig(scheme="all-hbc", hbc=hbc, llc="urllc", seed=1, corpus=corpus.root)
    with Testbed(cfg) as tb:
        home = tb.run_dir / "chromium-home"
        make_nss_db(home / ".pki" / "nssdb", tb.ca_cert)
        return run_driver(tb, p, list(INTERACTIONS), 40, home)


@pytest.mark.parametrize("name", ["social", "shopping", "news"])
def test_every_interaction_completes_in_dependency_order(name: str) -> None:
    p = load_profile(name)
    out = _session(p, "fixed:20ms/100mbit")
    assert not out.get("error"), out.get("error")
    got = {d["interaction"]: d for d in out["interactions"]}
    assert list(got) == list(INTERACTIONS)
    for inter, d in got.items():
        assert not d["error"], (inter, d["error"])
        chk = check_interaction(p, d)
        n = len(p.interactions[inter].requests)
        assert chk["answered"] == n, (inter, chk["problems"])
        assert chk["violations"] == 0, (inter, chk["problems"])
        # Independently of the checker: no child's fetch starts before every parent's
        # response has fully arrived (Resource Timing, one clock for the whole page).
        t = chk["timing"]
        for r in p.interactions[inter].requests:
            for par in r.after:
                assert t[r.id]["start"] >= t[par]["response_end"] - 0.2, (inter, r.id, par)
        assert {e["protocol"] for e in t.values()} == {"h2"}
        assert all(
            e["body_size"] == r.size
            for r, e in ((r, t[r.id]) for r in p.interactions[inter].requests)
        )
        # The server think times on the critical path and one RTT per level are in it.
        floor = critical_think_ms(p, inter) + 20 * p.interactions[inter].depth()
        assert d["irt_ms"] >= floor, (inter, d["irt_ms"], floor)
        assert d["irt_ms"] < floor + 5000
        assert 0 <= d["t_handler"] - d["t_input"] < 200  # input reached the app at once
        # Warm state: a launch opens one connection per origin it uses; later
        # interactions reuse them and connect only to origins the launch never used.
        used = {p.host(r.origin) for r in p.interactions["launch"].requests}
        want = sorted({p.host(r.origin) for r in p.interactions[inter].requests})
        if inter != "launch":
            want = [h for h in want if h not in used]
        assert chk["opened"] == want, (inter, chk["opened"], want)


def test_irt_grows_with_hbc_rtt_under_all_hbc() -> None:
    from dchlab.apps.run import app

    fast = app(RunSpec("all-hbc", "fixed:20ms/200mbit", "urllc"), "social", "launch", 40)
    slow = app(RunSpec("all-hbc", "fixed:100ms/200mbit", "urllc"), "social", "launch", 40)
    assert fast["valid"] and slow["valid"], (fast["invalid_reason"], slow["invalid_reason"])
    assert fast["requests_answered"] == fast["requests"] == 16
    from dchlab.workloads.rows import APP_KEYS, ROW_KEYS

    assert list(fast) == ROW_KEYS + APP_KEYS  # every workload's keys, then the app's
    assert set(fast["stats"]["app"]) == {"problems", "protocols", "opened", "session"}
    # A cold launch needs DNS, TCP, TLS and three dependent request levels: at least six
    # sequential HBC round trips, each 80 ms longer on the slow channel.
    assert slow["irt_ms"] > fast["irt_ms"] + 4 * 80, (fast["irt_ms"], slow["irt_ms"])
    assert slow["trace_offset_ms"] == fast["trace_offset_ms"]
    # all-hbc: the API and image bytes crossed the HBC, (almost) nothing the LLC.
    assert fast["bytes_hbc"] > 250_000 and fast["bytes_llc"] < 5_000
