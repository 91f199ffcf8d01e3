"""Background users live (dchlab.workloads.bgusers, issue 41): in a 3-device testbed under
dchannel, the users on ue2 and ue3 (either client: the Rust `bguser`, the Python
replayer) load whole pages through their own client agents,
every response byte-exact (each body's sha256 equals the corpus's content address),
their bytes on their own devices' links and the shared LLC, none on ue1's; closing the
testbed while they run leaves nothing behind (no namespace, run record, /etc/netns
entry or replayer process); and against Chromium on the same page and seed (`dch
bgusers-validate`), the Python replayer's downlink bytes and the Rust client's bytes
per direction on the HBC are within 10 % (docs/bgusers.md has the full comparison).
The Rust client alone loads a page byte-exact and exits cleanly (status 0, READY, its
page count)."""

from __future__ import annotations

import time

import pytest
from conftest import needs_testbed, processes_naming, require_binaries, require_root

from dchlab.pages import open_corpus
from dchlab.testbed import Testbed, TestbedConfig
from dchlab.testbed.runrecord import RUN_DIR, list_netns
from dchlab.workloads.bgusers import background, deps

pytestmark = pytest.mark.netns


def _leftovers(prefix: str) -> list[str]:
    found = [f"netns {n}" for n in list_netns() if n.startswith(prefix)]
    if (RUN_DIR / f"{prefix}.json").exists():
        found.append("run record")
    return found + processes_naming([prefix])


@pytest.mark.parametrize("client", ["rust", "python"])
def test_background_users_load_pages_byte_exact_through_their_agents(client: str) -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel", *(["bguser"] if client == "rust" else []))
    corpus = open_corpus("synthetic:1:2")
    page = corpus.pages[0].name
    plan = deps.page_requests(corpus, page)
    users = background.Users(corpus, (page,), "fixed:0", seed=1, client=client)
    cfg = TestbedConfig(scheme="dchannel", llc="fixed:5ms/10mbit", corpus=corpus.root, devices=3)
    with Testbed(cfg) as tb:
        prefix = tb.prefix
        running = background.start(tb, users)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not all(background.read_log(r.log) for r in running):
            time.sleep(0.2)
        summary = background.stop(running)
        # stopped by PID: the replayers are gone while the testbed still runs
        assert all(r.proc.poll() is not None for r in running)
    assert summary["users"] == 2 and all(summary["per_user"][d] for d in ("ue2", "ue3"))
    pages = summary["pages"]
    assert summary["requests"] == pages * len(plan)
    assert summary["failed"] == summary["mismatched"] == 0  # every body hashed equal
    assert summary["bytes"] == pages * sum(r.size for r in plan)
    ifaces = tb.stats()["interfaces"]
    for dev in ("ue2", "ue3"):  # through the device's own agent: its tunnel carried the page
        page_bytes = sum(r.size for r in plan) * len(summary["per_user"][dev])
        assert ifaces[dev]["dch0"]["rx_bytes"] >= page_bytes
        assert ifaces[dev]["hbc"]["rx_bytes"] + ifaces[dev]["llc"]["rx_bytes"] >= page_bytes
    assert ifaces["ue"]["dch0"]["rx_bytes"] < 10_000  # the measured device stayed idle
    assert _leftovers(prefix) == []


def test_closing_the_testbed_stops_running_background_users() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel", "bguser")
    corpus = open_corpus("synthetic:1:2")
    users = background.Users(corpus, tuple(p.name for p in corpus.pages), "fixed:0", seed=2)
    cfg = TestbedConfig(scheme="dchannel", corpus=corpus.root, devices=3)
    tb = Testbed(cfg)
    with tb:
        running = background.start(tb, users)
        time.sleep(0.5)  # mid-page: close() must stop them (tracked programs, by PID)
        assert all(r.proc.poll() is None for r in running)
    assert all(r.proc.poll() is not None for r in running)
    deadline = time.monotonic() + 10
    while (left := _leftovers(tb.prefix)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []


@pytest.mark.chromium
@needs_testbed("dchannel")
def test_replayed_downlink_bytes_are_within_10_percent_of_chromiums() -> None:
    """all-hbc (every byte on the HBC), one page, the same seed for both clients: the
    HBC's downlink bytes (TLS records, headers, TCP/IP and the agents' framing) agree
    within validate.TOLERANCE; the replayed load itself is valid (every body hashed)."""
    from dchlab.run_config import RunConfig
    from dchlab.workloads.bgusers import validate

    require_binaries("bguser")
    corpus = open_corpus("synthetic:1:2")
    spec = RunConfig("all-hbc", "fixed:40ms/200mbit", "urllc")
    by_client = validate.run_clients(spec, corpus, [corpus.pages[0].name], 1, ("python", "rust"))
    res = by_client["python"]
    assert res["pairs"] == 1, res["invalid"]
    down = next(m for m in res["metrics"] if m["metric"] == "hbc down bytes")
    assert down["chromium"] > 500_000 and down["within"], down
    # the Rust client: the HBC's bytes per direction and in total (its ClientHello,
    # connections, HTTP/2 frames and DNS are Chromium's: docs/bgusers.md)
    rust = by_client["rust"]
    assert rust["pairs"] == 1, rust["invalid"]
    for name in ("hbc down bytes", "hbc up bytes", "hbc both bytes"):
        m = next(m for m in rust["metrics"] if m["metric"] == name)
        assert m["chromium"] > 20_000 and m["within"], m


def test_the_rust_client_loads_a_page_byte_exact_and_exits_cleanly() -> None:
    """One page, max one page: status 0, stdout READY then `pages 1`, every body's
    sha256 the corpus's (failed = mismatched = 0) and the bytes the corpus's sizes."""
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel", "bguser")
    corpus = open_corpus("synthetic:1:2")
    page = corpus.pages[1].name
    plan = deps.page_requests(corpus, page)
    users = background.Users(corpus, (page,), "fixed:0", seed=3, client="rust")
    cfg = TestbedConfig(scheme="dchannel", llc="fixed:5ms/10mbit", corpus=corpus.root)
    with Testbed(cfg) as tb:
        plans = tb.run_dir / "bguser-plans.json"
        plans.write_text(background.plans_text(users))
        log = tb.run_dir / "bguser-ue.jsonl"
        argv = background.argv(users, 1, plans, log, max_pages=1, first_think=False)
        assert argv[0].endswith("/bguser")
        res = tb.run_ue(argv, timeout=90, capture_output=True)
        lines = background.read_log(log)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().split() == ["READY", "pages", "1"]
    assert len(lines) == 1 and lines[0]["page"] == page
    assert lines[0]["requests"] == len(plan)
    assert lines[0]["failed"] == lines[0]["mismatched"] == 0, res.stderr
    assert lines[0]["bytes"] == sum(r.size for r in plan)
