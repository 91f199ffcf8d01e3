"""`dch run --ray`: a campaign sharded over a local Ray cluster (a head and a worker
node, started and stopped here with ray.cluster_utils.Cluster, both on this machine).

- the real testbed: the same cells and row keys as a local run, pairs on one node,
  worker provenance in every row (needs root, the release binaries and Chromium);
- a cheap fake workload (no root): `--slots` bounds each node's concurrency, and a
  node killed mid-run has its unit measured elsewhere while the campaign finishes.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import why_no_testbed

from dchlab.experiments import store
from dchlab.experiments.campaign import Campaign, load_campaign
from dchlab.experiments.ray_backend import RayClusterError, RayDispatch
from dchlab.experiments.runner import Group, run_campaign

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

# the fake workloads below must reach the Ray workers by value (tests/ is not importable there)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.slow

NODE_ARGS = {"num_cpus": 2, "object_store_memory": 80 * 2**20}
#: notice a dead node within ~3 s instead of Ray's default ~30 s (not faster: a raylet
#: starved for a moment on this busy machine must not be declared dead)
FAST_HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 6,
}


def _session_procs(session_dir: str) -> set[int]:
    """Processes with a file open in the cluster's session directory (Ray's own: gcs,
    raylets, workers — all log there)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd).startswith(session_dir):
                    pids.add(int(entry.name))
                    break
        except OSError:
            continue
    return pids


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    c = Cluster(
        initialize_head=True,
        head_node_args={**NODE_ARGS, "include_dashboard": False, "_system_config": FAST_HEALTH},
    )
    c.add_node(**NODE_ARGS)
    session = c.head_node.get_session_dir_path()
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        assert _session_procs(session), "the process check found no Ray process at all"
        c.shutdown()
        deadline = time.monotonic() + 20
        while _session_procs(session) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _session_procs(session)
        assert not left, f"Ray processes left after the cluster stopped: {sorted(left)}"


def _campaign(tmp_path: Path, text: str) -> Campaign:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text))
    return load_campaign(path)


def test_unreachable_cluster_is_a_clear_error(tmp_path):
    if ray.is_initialized():
        ray.shutdown()
    c = _campaign(tmp_path, FAKE)
    d = RayDispatch("127.0.0.1:1", needs_testbed=False)
    t0 = time.monotonic()
    with pytest.raises(RayClusterError, match=re.escape("cannot connect to the Ray cluster at")):
        run_campaign(
            c, store_path=tmp_path / "s.duckdb", executor=SlowFake(0, tmp_path), dispatch=d
        )
    assert time.monotonic() - t0 < 30  # not ray.init's minutes of retries
    if _live_local_cluster():
        return  # someone runs a cluster here: `auto` would rightly find it
    with pytest.raises(RayClusterError, match="Ray cluster at 'auto'"):
        RayDispatch("auto", needs_testbed=False).connect()


def _live_local_cluster() -> bool:
    try:
        addr = ray._private.services.canonicalize_bootstrap_address_or_die("auto")
        host, _, port = addr.rpartition(":")
        socket.create_connection((host, int(port)), timeout=2).close()
    except (ConnectionError, OSError, ValueError):
        return False
    return True


# ---------------------------------------------------------------- fake workload

FAKE = """
name: ray-fake
schemes: [all-hbc, dchannel]
conditions:
  - {name: embb-urllc, hbc: embb, llc: urllc}
workload: {kind: bulk, sizes: [1KB, 2KB, 3KB, 4KB, 5KB, 6KB], timeout_s: 30}
trials: 1
analysis: {kind: bulk, baseline: all-hbc, metric: total_ms}
"""


class Rendezvous:
    """A workload that waits (up to `patience` s) until `n` groups run on its node."""

    def __init__(self, n: int, marks: Path, patience: float = 20.0) -> None:
        self.n = n
        self.marks = marks
        self.patience = patience

    def __call__(self, c: Campaign, g: Group, pool: object = None) -> list[dict[str, object]]:
        node = ray.get_runtime_context().get_node_id()
        me = self.marks / f"run-{node}-{os.getpid()}-{time.monotonic_ns()}"
        me.touch()
        deadline = time.monotonic() + self.patience
        while len(list(self.marks.glob(f"run-{node}-*"))) < self.n:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        t0 = time.time()
        time.sleep(0.3)
        me.unlink()
        return [{"valid": True, "total_ms": 1.0, "t_start": t0, "t_end": time.time()}]


class SlowFake:
    """A workload that takes `seconds` and reports where and when it ran."""

    def __init__(self, seconds: float, marks: Path) -> None:
        self.seconds = seconds
        self.marks = marks

    def __call__(self, c: Campaign, g: Group, pool: object = None) -> list[dict[str, object]]:
        node = ray.get_runtime_context().get_node_id()
        (self.marks / f"started-{node}").touch()
        t0 = time.time()
        time.sleep(self.seconds)
        return [{"valid": True, "total_ms": 1.0, "t_start": t0, "t_end": time.time()}]


def _max_overlap(rows: list[dict[str, object]]) -> int:
    events = sorted([(r["t_start"], 1) for r in rows] + [(r["t_end"], -1) for r in rows])
    most = now = 0
    for _, d in events:
        now += d  # type: ignore[operator]
        most = max(most, now)
    return most


def test_slots_bound_each_node_and_rows_carry_the_node(cluster, tmp_path):
    nodes = {n["NodeID"] for n in _alive(cluster)}
    # slots 1: 6 units over 2 nodes, never two at once on a node; slots 2: 4 units, two
    # per node at once (each group waits for a partner on its node; Ray starts a second
    # worker process slowly on a busy machine)
    runs = [
        (1, FAKE, SlowFake(0.3, tmp_path)),
        (2, FAKE.replace("3KB, 4KB, 5KB, 6KB", "3KB, 4KB"), Rendezvous(2, tmp_path)),
    ]
    for slots, text, executor in runs:
        c = _campaign(tmp_path, text)
        cells = 2 * len(c.workload.sizes)
        db = tmp_path / f"s{slots}.duckdb"
        d = RayDispatch(cluster.address, slots=slots, needs_testbed=False)
        s = run_campaign(c, store_path=db, executor=executor, dispatch=d)
        assert (s.measured, s.failed, s.stopped) == (cells, 0, None), s.errors
        rows = store.load_rows("ray-fake", store=db)
        by_node = defaultdict(list)
        for r in rows:
            by_node[r["ray_node_id"]].append(r)
        assert set(by_node) == nodes  # both nodes took units
        assert max(_max_overlap(rs) for rs in by_node.values()) == slots
        assert all(r["hostname"] == socket.gethostname() for r in rows)
        _assert_pairs_on_one_node(rows)


def test_killed_worker_node_has_its_unit_rescheduled(cluster, tmp_path):
    victim = cluster.add_node(**NODE_ARGS)
    c = _campaign(tmp_path, FAKE)
    d = RayDispatch(cluster.address, slots=1, needs_testbed=False)
    killed = threading.Event()

    def kill_when_busy() -> None:
        mark = tmp_path / f"started-{victim.node_id}"
        deadline = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if mark.exists():
            cluster.remove_node(victim, allow_graceful=False)
            killed.set()

    killer = threading.Thread(target=kill_when_busy, daemon=True)
    killer.start()
    db = tmp_path / "s.duckdb"
    s = run_campaign(c, store_path=db, executor=SlowFake(1.0, tmp_path), dispatch=d)
    killer.join(timeout=5)
    assert killed.is_set(), "the victim node never got a unit"
    assert (s.measured, s.failed, s.stopped) == (12, 0, None), s.errors
    assert d.rescheduled >= 1
    rows = store.load_rows("ray-fake", store=db)
    assert len(rows) == 12 and len({r["cell"] for r in rows}) == 12
    assert victim.node_id not in {r["ray_node_id"] for r in rows}  # its unit was lost whole
    _assert_pairs_on_one_node(rows)
    # resume: everything is done, nothing is dispatched again
    s2 = run_campaign(c, store_path=db, executor=SlowFake(1.0, tmp_path), dispatch=d)
    assert (s2.skipped, s2.measured) == (12, 0)


class CrashOn:
    """A workload whose worker process dies on one item (as an OOM kill would)."""

    def __init__(self, item: str) -> None:
        self.item = item

    def __call__(self, c: Campaign, g: Group, pool: object = None) -> list[dict[str, object]]:
        if g.items == [self.item]:
            os._exit(3)
        return [{"valid": True, "total_ms": 1.0, "t_start": 0.0, "t_end": 0.0}]


def test_a_unit_lost_three_times_is_recorded_as_failed(cluster, tmp_path):
    c = _campaign(tmp_path, FAKE.replace("1KB, 2KB, 3KB, 4KB, 5KB, 6KB", "1KB, 2KB"))
    d = RayDispatch(cluster.address, slots=1, needs_testbed=False)
    db = tmp_path / "s.duckdb"
    s = run_campaign(c, store_path=db, executor=CrashOn("1KB"), dispatch=d)
    assert (s.measured, s.failed, s.stopped) == (2, 2, None), s.errors
    assert d.rescheduled == 2  # attempts 1 and 2 rescheduled, the 3rd gives up
    failed = [r for r in store.load_rows("ray-fake", store=db) if r["error"]]
    assert {r["item"] for r in failed} == {"1KB"}
    assert all("lost 3 times" in r["error"] and "WorkerCrashedError" in r["error"] for r in failed)


def test_nodes_at_another_revision_get_no_work(cluster, tmp_path):
    c = _campaign(tmp_path, FAKE)
    d = RayDispatch(cluster.address, revision="0" * 40, needs_testbed=False)
    t0 = time.monotonic()
    with pytest.raises(RayClusterError, match=r"runs code revision .* the head 000000000000"):
        run_campaign(
            c, store_path=tmp_path / "s.duckdb", executor=SlowFake(0, tmp_path), dispatch=d
        )
    assert time.monotonic() - t0 < 30  # said at once, not after the wait for new nodes
    assert not store.load_rows("ray-fake", store=tmp_path / "s.duckdb")


def _alive(cluster):
    ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        return [n for n in ray.nodes() if n["Alive"]]
    finally:
        ray.shutdown()


def _assert_pairs_on_one_node(rows):
    where = defaultdict(set)
    for r in rows:
        where[(r["condition"], r["item"], r["trial"])].add(r["ray_node_id"])
    assert all(len(v) == 1 for v in where.values()), where


# ---------------------------------------------------------------- the real testbed

REAL = """
name: ray-live
schemes: [all-hbc, dchannel]
conditions:
  - {name: embb-urllc, hbc: embb, llc: urllc}
workload: {kind: pageload, corpus: "synthetic:1", pages: 2, timeout_s: 60}
trials: 1
seed: 3
analysis: {kind: gain, baseline: all-hbc}
"""


def _testbed_missing() -> str | None:
    return why_no_testbed("dchannel")


def _dch_run_on_cluster(cluster, yaml_path: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """`dch run YAML --ray ADDRESS --slots 1` as a user types it, in a child process, so
    the Ray driver of the heavy runs lives there and not in pytest: a CI run's pytest
    once ended silently (no traceback, no junit) inside the real-testbed test while it
    was itself the driver, and Ray's core worker can end its process without a Python
    exception (its logs go to the session directory, not stderr). In a child, such an
    end fails one test with the child's exit status instead of the whole session."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "dchlab.cli", "run", str(yaml_path), "--store", str(db)]
    return subprocess.run(
        [*cmd, "--ray", cluster.address, "--slots", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _ok(p: subprocess.CompletedProcess[str]) -> str:
    """The run's summary line; the whole stderr (and a signal's name) if it failed."""
    how = f"signal {-p.returncode}" if p.returncode < 0 else f"exit status {p.returncode}"
    assert p.returncode == 0, f"dch run --ray ended with {how}:\n{p.stderr}"
    return p.stderr


@pytest.mark.netns
@pytest.mark.chromium
@pytest.mark.skipif(_testbed_missing() is not None, reason=str(_testbed_missing()))
def test_real_campaign_on_the_cluster_matches_a_local_run(cluster, tmp_path):
    c = _campaign(tmp_path, REAL)
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    s_local = run_campaign(c, store_path=local_db)
    assert s_local.failed == 0, s_local.errors
    out = _ok(_dch_run_on_cluster(cluster, tmp_path / "c.yaml", ray_db))
    assert "4 measured" in out and ", 0 failed" in out, out
    local = store.load_rows("ray-live", store=local_db)
    remote = store.load_rows("ray-live", store=ray_db)
    assert len(local) == len(remote) == 4
    assert sorted(r["cell"] for r in local) == sorted(r["cell"] for r in remote)
    keys = lambda r: {k for k, v in r.items() if v is not None}  # noqa: E731
    extra = {"ray_node_id", "node_code_rev"}  # what a cluster row adds (the latter: if HEAD moved)
    assert {k for r in remote for k in keys(r)} - extra == {k for r in local for k in keys(r)}
    assert all(r["plt_ms"] and r["plt_ms"] > 0 for r in remote if r["valid"])
    # both pages' pairs, each on one node, the two pages on the two nodes (1 slot each)
    _assert_pairs_on_one_node(remote)
    assert len({r["ray_node_id"] for r in remote}) == 2
    # the same trace sub-sequence for every scheme of a page, as locally
    off = {(r["page"], r["arm"]): r["trace_offset_ms"] for r in local}
    for r in remote:
        assert r["trace_offset_ms"] == off[(r["page"], r["arm"])]
    assert all(r["hostname"] == socket.gethostname() and r["code_rev"] for r in remote)
    # resume as today: a second run finds every cell done
    out = _ok(_dch_run_on_cluster(cluster, tmp_path / "c.yaml", ray_db))
    assert "0 measured (0 invalid), 0 failed, 4 skipped of 4 cells" in out, out


CLI = """
name: ray-cli
schemes: [all-hbc, all-llc]
conditions:
  - {name: embb-urllc, hbc: embb, llc: urllc}
workload: {kind: bulk, sizes: [10KB], timeout_s: 30}
trials: 1
analysis: {kind: bulk, baseline: all-hbc, metric: total_ms}
"""


@pytest.mark.netns
@pytest.mark.skipif(_testbed_missing() is not None, reason=str(_testbed_missing()))
def test_dch_run_with_ray_address_and_slots(cluster, tmp_path):
    """The command as a user types it: node checks at the head's revision, rows stored."""
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CLI))
    db = tmp_path / "s.duckdb"
    out = _ok(_dch_run_on_cluster(cluster, path, db))
    assert "2 measured (0 invalid), 0 failed" in out, out
    rows = store.load_rows("ray-cli", store=db)
    assert len(rows) == 2 and all(r["ray_node_id"] and r["size_bytes"] == 10_000 for r in rows)
    _assert_pairs_on_one_node(rows)
