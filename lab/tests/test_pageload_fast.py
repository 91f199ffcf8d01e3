"""A page load costs little more than its PLT, and stays as fresh and cold as before.

- daemons of one stop wave stop together (not one after the other);
- a testbed prepared ahead (Testbed.prepare + use) builds with the configuration it is
  given last (its trace offset, its scheme) and works like a fresh one;
- a never-used prepared testbed and the one in use are both removed after SIGTERM;
- consecutive Chromium loads in one process (the second one on a testbed prepared
  during the first one's quiet tail): each has its own namespaces, agents and trace
  offset, resolves DNS and opens TCP + TLS over the channel, and nothing of any of them
  (namespaces, processes, run directories) remains once the process ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import processes_naming, require_binaries, require_root

from dchlab.testbed.procs import Supervisor
from dchlab.testbed.runrecord import RUNS_TMP, list_netns

LAB = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(LAB)}


def _leftovers(prefixes: list[str]) -> list[str]:
    found = [ns for ns in list_netns() if any(ns.startswith(p) for p in prefixes)]
    found += [str(d) for p in prefixes for d in RUNS_TMP.glob(f"{p}*")]
    found += [f"/etc/netns/{p}-ue" for p in prefixes if Path(f"/etc/netns/{p}-ue").exists()]
    return found + processes_naming(prefixes)


def _wait_gone(prefixes: list[str], timeout: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := _leftovers(prefixes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_a_stop_wave_stops_its_daemons_together(tmp_path: Path) -> None:
    # Each daemon takes 1 s to exit after SIGTERM: one after the other would take 3 s.
    slow = "trap 'sleep 1; exit 0' TERM; echo READY; while :; do sleep 0.05; done"
    sup = Supervisor(tmp_path, lambda *a: None, lambda *a: None)
    for name in ("a", "b", "c"):
        sup.spawn(name, ["sh", "-c", slow])
    sup.wait_ready(["a", "b", "c"])
    timing: dict[str, float] = {}
    t0 = time.monotonic()
    sup.stop_all([["a", "b", "c"]], timing=timing)
    took = time.monotonic() - t0
    assert all(d.proc.returncode is not None for d in sup.daemons.values())
    assert 0.9 < took < 2.5, took  # together: ~1 s even on a busy machine
    assert set(timing) == {"stop.a", "stop.b", "stop.c"}


@pytest.mark.netns
def test_prepared_testbed_takes_the_configuration_given_last() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    from dchlab.testbed import Testbed, TestbedConfig
    from dchlab.testbed.channels import trace_offset_ms

    started: list[str] = []
    tb = Testbed(TestbedConfig(scheme="hbc-only", hbc="MM-S", seed=1))
    tb.on_ue(lambda t: started.append(t.netns["ue"]))
    tb.prepare()
    assert started == [tb.netns["ue"]]  # programs may start on ue before the links exist
    assert tb.netns["ue"] in list_netns()
    cfg = TestbedConfig(scheme="all-hbc", hbc="MM-S", seed=2, llc="fixed:5ms/40mbit")
    with tb.use(cfg):
        assert tb.offset_ms == trace_offset_ms("MM-S", 2) != trace_offset_ms("MM-S", 1)
        r = tb.run_ue(
            ["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}", "https://server.test/bytes/100000"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.stdout == "100000", r.stderr
    stats = tb.stats()
    assert stats["scheme"] == "all-hbc"
    assert "error" not in stats["agents"]["client"]  # the agents ran and wrote their stats
    assert "configure" in stats["timing"]["setup"]
    assert _wait_gone([tb.prefix]) == []


@pytest.mark.netns
def test_sigterm_removes_the_running_and_the_prepared_testbed() -> None:
    require_root()
    require_binaries("chanemu", "webreplay")
    script = textwrap.dedent(
        """
        import time
        from dchlab.testbed import Testbed, TestbedConfig
        spare = Testbed(TestbedConfig(scheme="hbc-only")).prepare()
        spare.popen_ue(["sleep", "60"])  # something running in the prepared ue
        with Testbed(TestbedConfig(scheme="hbc-only")) as tb:
            print(spare.prefix, tb.prefix, flush=True)
            time.sleep(60)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    assert p.stdout is not None
    line = p.stdout.readline().split()
    assert len(line) == 2, p.stderr.read() if p.stderr else ""
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    assert p.returncode != 0  # interrupted, not finished
    assert _wait_gone(line) == []


def _browser_testbed_page(tmp: Path, *binaries: str) -> tuple[Any, str]:
    """Skips unless root, BINARIES and Chromium are here; a generated one-page corpus
    and its page's name."""
    require_root()
    require_binaries(*binaries)
    if not Path("/usr/lib/chromium/chromium").exists():
        pytest.skip("chromium not installed")
    from dchlab.pages.generator import generate

    corpus = generate(tmp / "syn", seed=5, pages=1)
    return corpus, corpus.pages[0].name


@pytest.mark.netns
@pytest.mark.chromium
def test_consecutive_loads_are_fresh_cold_and_leave_nothing(tmp_path: Path) -> None:
    corpus, page = _browser_testbed_page(tmp_path, "chanemu", "webreplay", "dchannel")
    script = textwrap.dedent(
        f"""
        import json
        from dchlab.pages import open_corpus
        from dchlab.workloads.api import RunSpec, load_one, paired_seed
        from dchlab.workloads.pool import TestbedPool
        c = open_corpus({str(corpus.root)!r})
        pool = TestbedPool()  # never closed: the process ends with one prepared
        plan = [RunSpec(scheme, "MM-S", "urllc", seed=1, trial=trial)
                for trial, scheme in ((0, "all-hbc"), (1, "all-hbc"), (0, "dchannel"))]
        for k, spec in enumerate(plan):
            pool.expect(plan[k + 1] if k + 1 < len(plan) else spec)  # another load follows
            r = load_one(spec, c, {page!r}, 60, pool)
            s = r["stats"]
            print(json.dumps({{
                "valid": r["valid"], "why": r["invalid_reason"], "plt": r["plt_ms"],
                "dns": r["dns_ms"], "connect": r["connect_ms"], "tls": r["tls_ms"],
                "offset": r["trace_offset_ms"], "prefix": s["prefix"],
                "seed": s["seed"], "want_seed": paired_seed(1, {page!r}, spec.trial),
                "timing": s["timing"]["load"],
            }}), flush=True)
        print("spare", pool.prepared_testbed().prefix, flush=True)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=_env(), timeout=600)  # fmt: skip
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3, r.stderr[-3000:]
    for row in rows:
        assert row["valid"], row["why"]
        assert row["seed"] == row["want_seed"]  # the paired seed, whatever was reused
        # Cold: the main document's DNS lookup, TCP and TLS handshakes each crossed the
        # MM-S channel (tens of ms), nothing came from a cache or a kept connection.
        assert row["dns"] > 5 and row["connect"] > 5 and row["tls"] > 5, row
    assert len({row["prefix"] for row in rows}) == 3  # own namespaces, agents, servers
    assert rows[0]["offset"] != rows[1]["offset"]  # trial 0 and 1: other trace offsets
    assert rows[0]["offset"] == rows[2]["offset"]  # same (page, trial): same offset
    assert rows[1]["timing"].get("prepared_ahead") == 1.0
    assert rows[2]["timing"].get("prepared_ahead") == 1.0
    # The process ended: its testbeds, the one prepared after the last load included,
    # and their run directories are gone.
    spare = next(line.split()[1:] for line in r.stdout.splitlines() if line.startswith("spare"))
    assert len(spare) == 1
    assert _wait_gone([row["prefix"] for row in rows] + spare) == []


@pytest.mark.netns
def test_prepared_servers_are_kept_only_for_the_same_configuration() -> None:
    require_root()
    require_binaries("chanemu", "webreplay")
    from dchlab.testbed import Testbed, TestbedConfig

    def fetch(tb: Testbed, host: str) -> str:
        r = tb.run_ue(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
                       f"https://{host}/bytes/1000"], capture_output=True, text=True, timeout=60)  # fmt: skip
        return str(r.stdout) + str(r.stderr)

    tb = Testbed(TestbedConfig(scheme="hbc-only")).prepare()
    assert tb._sup is not None
    pid = tb._sup.daemons["webreplay"].pid
    with tb.use(TestbedConfig(scheme="hbc-only", seed=3)):  # same servers' configuration
        assert tb._sup.daemons["webreplay"].pid == pid
        assert fetch(tb, "server.test") == "1000"
    tb = Testbed(TestbedConfig(scheme="hbc-only")).prepare()
    assert tb._sup is not None
    pid = tb._sup.daemons["webreplay"].pid
    with tb.use(TestbedConfig(scheme="hbc-only", hosts=["extra.test"])):  # other hosts
        assert tb._sup.daemons["webreplay"].pid != pid  # restarted with the new hosts
        assert fetch(tb, "extra.test") == "1000"
    assert _wait_gone([tb.prefix]) == []


def test_a_prepared_browser_serves_only_a_scheme_that_starts_it_the_same_way(
    tmp_path: Path,
) -> None:
    """mptcp wraps Chromium in mptcpize and objproxy points it at the proxy: a browser
    prepared for all-hbc must not serve them (fig3's mptcp rows once had 0 MPTCP
    connections). Announced to the pool (as the campaign's dispatcher does), the next
    scheme's browser is prepared its own way; when the pool prepared for another
    scheme, the load launches its own browser and lets it settle before navigating."""
    corpus, page = _browser_testbed_page(tmp_path, "chanemu", "webreplay", "dchannel", "objproxy")
    script = textwrap.dedent(
        f"""
        import json
        from dchlab.pages import open_corpus
        from dchlab.workloads.api import RunSpec, load_one
        from dchlab.workloads.pool import TestbedPool
        c = open_corpus({str(corpus.root)!r})
        # (scheme, the scheme the pool is told comes next)
        plan = [("all-hbc", "all-hbc"), ("mptcp", "obj-oracle"), ("obj-oracle", "mptcp"),
                ("mptcp", "mptcp")]
        pool = TestbedPool()
        for scheme, nxt in plan:
            pool.expect(RunSpec(nxt, "fixed:20ms/50mbit", "urllc"))
            r = load_one(RunSpec(scheme, "fixed:20ms/50mbit", "urllc"), c, {page!r}, 60, pool)
            s = r["stats"]
            print(json.dumps({{
                "scheme": scheme, "valid": r["valid"], "why": r["invalid_reason"],
                "mptcp": (s.get("mptcp") or {{}}).get("connections"),
                "timing": s["timing"]["load"], "browser": s["timing"]["browser"],
            }}), flush=True)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=_env(), timeout=600)  # fmt: skip
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 4, r.stderr[-3000:]
    for row in rows:
        assert row["valid"], row
    first, mptcp_after_hbc, obj, mptcp_after_obj = rows
    from dchlab.workloads.chromium_pipe import SETTLE_S

    # No prepared browser (the first load; mptcp after a browser prepared for all-hbc):
    # each launched its own and let it settle before navigating.
    for row in (first, mptcp_after_hbc):
        assert row["timing"].get("prepared_ahead") is None, row
        assert row["browser"]["attached_for"] >= SETTLE_S * 1000 - 1, row
    assert mptcp_after_hbc["mptcp"] > 0
    # Announced: prepared the next scheme's way (proxy wrapper; mptcpize).
    assert obj["timing"].get("prepared_ahead") == 1.0, obj
    assert mptcp_after_obj["timing"].get("prepared_ahead") == 1.0, mptcp_after_obj
    assert mptcp_after_obj["mptcp"] > 0


def test_mptcp_rows_without_an_mptcp_connection_are_invalid() -> None:
    from dchlab.testbed import get_scheme

    s = get_scheme("mptcp")
    assert "no MPTCP connection" in (s.invalid_reason({"mptcp": {"connections": 0}}) or "")
    assert s.invalid_reason({"mptcp": {"connections": 3}}) is None
    assert get_scheme("all-hbc").invalid_reason({}) is None
