"""Shard a campaign over an existing Ray cluster (`dch run CAMPAIGN --ray ADDRESS`).

The head (the process running `dch run`) plans the campaign exactly as a local run
does, cuts the pending groups into *units* — every pending scheme of one
(condition, trial, item), `runner.pair_units` — and hands each unit to one node,
which measures its schemes back to back with the same workload functions as a
local run (`runner.run_group`). A paired comparison therefore never mixes two
machines. Each unit's rows come back to the head as soon as the unit is done and
only the head writes the store; every row carries the provenance of the node that
measured it (host name, code revision, Chromium and kernel versions) and
`ray_node_id`.

Slots: a node runs at most `slots` units at once (default: one per 4 CPUs Ray
reports for it, at least 1; `ray start --num-cpus 0` keeps a node out of the
campaign). The head does the accounting itself and pins every task to its node
(NodeAffinitySchedulingStrategy, soft=False); the task asks Ray for no CPU, so a
node's `--num-cpus` only sets its default slot count.

Failures: a unit whose node dies (or whose worker process is killed) fails with a
Ray system error; the head puts it back at the front of the queue and another
node — or the same one, if it is still alive — measures the whole unit again. After
`max_attempts` losses the unit's cells are recorded as errors (retried by the next
run). Nothing of a lost unit reaches the store, so resume works as for a local run.

Nodes are checked before they get work: `dchlab` importable from the Python that
started Ray there, the same code revision as the head (unless --any-revision),
and — for the real workloads — root and the release binaries. Nodes that join
while the campaign runs are checked and used; nodes that fail the check are left
out with a warning naming the reason.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dchlab.errors import EXIT_UNAVAILABLE, UserError
from dchlab.experiments import store
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.runner import (
    Executor,
    Group,
    error_rows,
    next_config,
    pair_units,
    run_group,
)
from dchlab.workloads.pool import TestbedPool

log = logging.getLogger(__name__)

#: Binaries a testbed needs on every node (the agent binary runs for every scheme).
TESTBED_BINARIES = ("chanemu", "dchannel", "webreplay")


class RayClusterError(UserError, RuntimeError):
    """No usable Ray cluster: cannot connect, or no node can run the campaign."""

    exit_code = EXIT_UNAVAILABLE


def default_slots(cpus: float) -> int:
    """One testbed per 4 CPUs, at least one (a testbed's daemons and Chromium need ~4)."""
    return max(1, int(cpus) // 4)


def import_ray() -> Any:
    """The `ray` module, usage stats off (the lab machines have no internet); a clear
    error when it is not installed. Also used by dchlab.sim.grid."""
    # Ray phones home unless told not to; the lab machines have no internet.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is pinned in requirements.txt
        raise RayClusterError(f"ray is not installed ({e}); run ./dch setup") from e
    return ray


# ---------------------------------------------------------------- on the nodes


def node_report(needs_testbed: bool) -> dict[str, Any]:
    """What a node can do (runs on the node): host, revision, root, missing binaries."""
    from dchlab.paths import target_dir

    rev, dirty = store.code_revision()
    missing = [b for b in TESTBED_BINARIES if not (target_dir() / "release" / b).exists()]
    return {
        "host": socket.gethostname(),
        "code_rev": rev,
        "code_dirty": dirty,
        "root": os.geteuid() == 0,
        "missing": missing if needs_testbed else [],
        "target": str(target_dir()),
    }


def run_unit(
    c: Campaign, unit: list[Group], executor: Executor, head_cwd: str, head_rev: str
) -> list[list[dict[str, Any]]]:
    """Measure one unit (runs on a node): the annotated rows of each group, in order.

    Rows get this node's host name, Chromium and kernel versions and Ray node id. The
    code revision stays the head's (the node check made them equal; resume compares
    against it); a node at another revision (--any-revision) adds `node_code_rev`.
    """
    import ray

    # relative paths in the campaign (a corpus directory) mean what they mean on the head
    if os.path.isdir(head_cwd):
        os.chdir(head_cwd)
    host = store.host_provenance()
    prov = {k: host[k] for k in ("hostname", "chromium_version", "kernel_version")}
    prov["ray_node_id"] = ray.get_runtime_context().get_node_id()
    if host["code_rev"] != head_rev:
        prov["node_code_rev"] = host["code_rev"]
    out = []
    with TestbedPool() as pool:  # this node's: the unit's schemes back to back
        for i, g in enumerate(unit):
            pool.expect(next_config(c, unit[i + 1 :]))
            rows = run_group(c, g, pool, executor)
            for r in rows:
                r.update(prov)
            out.append(rows)
    return out


# ---------------------------------------------------------------- on the head


@dataclass
class Node:
    node_id: str
    address: str
    cpus: float
    slots: int = 0
    host: str = ""
    running: int = 0
    ready: bool = False  # passed the check
    excluded: str | None = None  # why it gets no work


@dataclass
class Unit:
    groups: list[Group]
    attempts: int = 0
    lost: list[str] = field(default_factory=list)  # why earlier attempts were lost

    def label(self) -> str:
        g = self.groups[0]
        return f"{g.condition.name}|{'+'.join(g.items)}|t{g.trial}"


def end_driver_process(status: int) -> None:
    """End this process with `status` at once if it is a connected Ray driver; return
    otherwise.

    Why: Ray's core worker can crash with SIGSEGV while `ray.shutdown()` (or the
    atexit hook that calls it) destroys it (ray-project/ray#18857, #18995); a CI run
    saw `dch run --ray` end with signal 11 after all its cells were measured and
    stored. The CLI calls this after its store is closed and its summary printed,
    when nothing is left in flight, so skipping the teardown loses nothing: the
    cluster's GCS notices the driver's exit and ends its job.
    """
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(status)


class RayDispatch:
    """A runner dispatcher (`runner.Dispatcher`) that runs units on a Ray cluster.

    `address`: `auto` (the cluster this machine belongs to) or the head's host:port.
    `slots`: units per node at once (None: `default_slots` of each node's CPUs).
    `revision`: only nodes at this code revision get work (None: any).
    `needs_testbed`: nodes must be root and have the release binaries.
    `keep_connection`: after a run that ends with nothing in flight, leave the
    connection this dispatcher opened for `end_driver_process` (the CLI, whose process
    ends right after) instead of tearing it down with `ray.shutdown()`.
    """

    def __init__(
        self,
        address: str,
        slots: int | None = None,
        revision: str | None = None,
        needs_testbed: bool = True,
        keep_connection: bool = False,
        max_attempts: int = 3,
        wait_for_nodes_s: float = 60.0,
        poll_s: float = 1.0,
    ) -> None:
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.address = address
        self.slots = slots
        self.revision = revision
        self.needs_testbed = needs_testbed
        self.keep_connection = keep_connection
        self.max_attempts = max_attempts
        self.wait_for_nodes_s = wait_for_nodes_s
        self.poll_s = poll_s
        self.nodes: dict[str, Node] = {}
        self.rescheduled = 0  # units put back in the queue after losing their node
        self._ray: Any = None
        self._owns_connection = False  # ray.init was ours: shut it down at the end
        self._probe: Any = None
        self._no_node_since: float | None = None
        self._checks: dict[Any, str] = {}  # probe ref -> node id
        self._inflight: dict[Any, tuple[Unit, str]] = {}  # task ref -> (unit, node id)

    # -------------------------------------------------------------- connection

    def connect(self) -> Any:
        ray = import_ray()
        if not ray.is_initialized():
            address = self._reachable_address(ray)
            self._owns_connection = True
            try:
                ray.init(
                    address=address,
                    log_to_driver=False,  # worker output stays in each node's Ray logs
                    logging_level=logging.WARNING,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise RayClusterError(
                    f"cannot connect to the Ray cluster at {self.address!r}: {e} "
                    "(start it with `ray start --head`, see docs/experiments.md)"
                ) from e
        self._ray = ray
        return ray

    def _reachable_address(self, ray: Any) -> str:
        """host:port of the head, checked with a TCP connect: ray.init itself retries an
        unreachable address for minutes before it gives up."""
        hint = "start it with `ray start --head`, see docs/experiments.md"
        try:
            # `auto` -> the address `ray start` recorded on this machine
            addr = str(ray._private.services.canonicalize_bootstrap_address_or_die(self.address))
        except (ConnectionError, ValueError) as e:
            raise RayClusterError(f"no Ray cluster at {self.address!r}: {e} ({hint})") from e
        host, _, port = addr.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except (OSError, ValueError) as e:
            raise RayClusterError(
                f"cannot connect to the Ray cluster at {self.address!r} ({addr}): {e} ({hint})"
            ) from e
        return addr

    def __call__(
        self,
        c: Campaign,
        groups: list[Group],
        executor: Executor,
        status: Callable[[str], None],
    ) -> Iterator[tuple[Group, list[dict[str, Any]]]]:
        ray = self.connect()
        self.nodes, self._checks, self._no_node_since = {}, {}, None  # fresh for each run
        try:
            yield from self._run(ray, c, groups, executor, status)
        finally:
            cancelled = self._cancel_all()
            # With tasks cancelled, shut down properly so the cancellations go out; a
            # clean end may leave the connection to end_driver_process (see there).
            if self._owns_connection and (cancelled or not self.keep_connection):
                ray.shutdown()

    def _cancel_all(self) -> int:
        """Cancel the units and node checks still running; how many were cancelled."""
        # cancel, not kill: the task gets KeyboardInterrupt and the testbed tears down
        refs = list(self._inflight) + list(self._checks)
        for ref in refs:
            try:
                self._ray.cancel(ref)
            except Exception as e:  # the node may be gone already
                log.debug("cancel: %s", e)
        self._inflight.clear()
        self._checks.clear()
        return len(refs)

    # -------------------------------------------------------------- nodes

    def _refresh_nodes(self) -> None:
        """Track alive nodes with CPUs; start the check of new ones; forget dead ones."""
        ray = self._ray
        alive = set()
        for n in ray.nodes():
            if not n.get("Alive"):
                continue
            nid = n["NodeID"]
            cpus = float((n.get("Resources") or {}).get("CPU", 0))
            if cpus <= 0:
                continue  # `ray start --num-cpus 0`: not for campaign work
            alive.add(nid)
            if nid in self.nodes:
                continue
            node = Node(
                nid,
                n.get("NodeManagerAddress", "?"),
                cpus,
                slots=self.slots or default_slots(cpus),
            )
            node.host = str(n.get("NodeManagerHostname") or node.address)
            self.nodes[nid] = node
            ref = self._probe.options(scheduling_strategy=self._pin(nid)).remote(self.needs_testbed)
            self._checks[ref] = nid
        for nid in list(self.nodes):
            if nid not in alive:
                node = self.nodes.pop(nid)
                if node.ready:
                    log.warning("node %s (%s) left the cluster", node.host, node.address)

    def _pin(self, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)

    def _check_done(self, ref: Any) -> None:
        nid = self._checks.pop(ref)
        node = self.nodes.get(nid)
        if node is None:
            return
        try:
            rep = self._ray.get(ref)
        except Exception as e:
            node.excluded = (
                f"its check failed ({type(e).__name__}: {str(e).splitlines()[0][:300]}); start "
                "Ray there with the repo's venv (`.venv/bin/ray start ...`) after `./dch setup`"
            )
        else:
            node.host = rep["host"]
            if self.revision is not None and rep["code_rev"] != self.revision:
                node.excluded = (
                    f"it runs code revision {rep['code_rev'][:12]}, the head "
                    f"{self.revision[:12]} (update the repo there, or pass --any-revision)"
                )
            elif self.needs_testbed and not rep["root"]:
                node.excluded = "Ray runs there without root (testbeds need root)"
            elif rep["missing"]:
                node.excluded = (
                    f"release binaries {', '.join(rep['missing'])} missing in {rep['target']} "
                    "(run ./dch setup there)"
                )
        if node.excluded:
            log.warning("node %s (%s) gets no work: %s", node.host, node.address, node.excluded)
        else:
            node.ready = True
            log.info(
                "node %s (%s): %d slot(s), %g CPUs", node.host, node.address, node.slots, node.cpus
            )

    def _check_initial_nodes(self, timeout_s: float = 30.0) -> None:
        """Check the nodes present at the start before any work goes out, so the first
        units spread over all of them (a node whose check hangs joins later)."""
        self._refresh_nodes()
        deadline = time.monotonic() + timeout_s
        while self._checks and time.monotonic() < deadline:
            done, _ = self._ray.wait(list(self._checks), num_returns=1, timeout=self.poll_s)
            for ref in done:
                self._check_done(ref)

    def _wait_for_a_node(self) -> None:
        """Raise when no node has been able to take work for `wait_for_nodes_s`."""
        now = time.monotonic()
        if any(n.ready for n in self.nodes.values()):
            self._no_node_since = None
            return
        if self._no_node_since is None:
            self._no_node_since = now
        # every node refused (wrong revision, no binaries, ...): say so now; no node at
        # all (they died): wait a while for one to (re)join
        refused = bool(self.nodes) and all(n.excluded for n in self.nodes.values())
        if not self._checks and (refused or now - self._no_node_since > self.wait_for_nodes_s):
            why = "; ".join(
                f"{n.host} ({n.address}): {n.excluded}" for n in self.nodes.values() if n.excluded
            )
            raise RayClusterError(
                f"no node of the Ray cluster at {self.address!r} can run this campaign"
                + (f": {why}" if why else " (no alive node with CPUs)")
            )

    # -------------------------------------------------------------- the loop

    def _run(
        self,
        ray: Any,
        c: Campaign,
        groups: list[Group],
        executor: Executor,
        status: Callable[[str], None],
    ) -> Iterator[tuple[Group, list[dict[str, Any]]]]:
        # num_cpus=0: the head's slot accounting, not Ray's CPU count, limits testbeds;
        # max_retries=0: a lost unit is rescheduled here, on a node that is still alive
        task = ray.remote(num_cpus=0, max_retries=0)(run_unit)
        self._probe = ray.remote(num_cpus=0, max_retries=0)(node_report)
        c_ref = ray.put(c)
        x_ref = ray.put(executor)
        head_cwd = os.getcwd()
        head_rev = store.code_revision()[0]
        queue = collections.deque(Unit(u) for u in pair_units(groups))
        if queue:
            status("checking the cluster's nodes")
            self._check_initial_nodes()
        next_refresh = time.monotonic() + self.poll_s
        while queue or self._inflight:
            if time.monotonic() >= next_refresh:
                self._refresh_nodes()
                next_refresh = time.monotonic() + self.poll_s
            self._wait_for_a_node()
            self._fill(task, c_ref, x_ref, head_cwd, head_rev, queue)
            ready = [n for n in self.nodes.values() if n.ready]
            status(f"{len(self._inflight)} unit(s) running on {len(ready)} node(s)")
            refs = list(self._inflight) + list(self._checks)
            if not refs:
                time.sleep(self.poll_s)
                continue
            done, _ = ray.wait(refs, num_returns=1, timeout=self.poll_s)
            for ref in done:
                if ref in self._checks:
                    self._check_done(ref)
                    continue
                unit, nid = self._inflight.pop(ref)
                node = self.nodes.get(nid)
                if node is not None:
                    node.running -= 1
                yield from self._finished(ray, c, ref, unit, node, queue)

    def _fill(
        self,
        task: Any,
        c_ref: Any,
        x_ref: Any,
        head_cwd: str,
        head_rev: str,
        queue: collections.deque[Unit],
    ) -> None:
        """Give queued units to nodes with free slots, one per node in turn (spread)."""
        while queue:
            free = [n for n in self.nodes.values() if n.ready and n.running < n.slots]
            if not free:
                return
            for node in free:
                if not queue:
                    return
                unit = queue.popleft()
                unit.attempts += 1
                ref = task.options(scheduling_strategy=self._pin(node.node_id)).remote(
                    c_ref, unit.groups, x_ref, head_cwd, head_rev
                )
                self._inflight[ref] = (unit, node.node_id)
                node.running += 1
                log.debug("unit %s -> %s (attempt %d)", unit.label(), node.host, unit.attempts)

    def _finished(
        self,
        ray: Any,
        c: Campaign,
        ref: Any,
        unit: Unit,
        node: Node | None,
        queue: collections.deque[Unit],
    ) -> Iterator[tuple[Group, list[dict[str, Any]]]]:
        where = node.host if node else "a node that left"
        try:
            results = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            # the task itself raised outside run_group (e.g. dchlab failed to import there)
            cause = e.cause if isinstance(e.cause, BaseException) else e
            for g in unit.groups:
                yield g, error_rows(c, g, RuntimeError(f"on {where}: {cause}"))
            return
        except ray.exceptions.RayError as e:
            # the node died or the worker process was killed: measure the unit again
            why = f"{type(e).__name__} on {where}: {str(e).splitlines()[0][:200]}"
            unit.lost.append(why)
            if node is not None and isinstance(
                e, ray.exceptions.NodeDiedError | ray.exceptions.TaskUnschedulableError
            ):
                # Ray may list the node as alive a little longer: no more work for it
                node.ready, node.excluded = False, "it died"
            self._refresh_nodes()
            if unit.attempts >= self.max_attempts:
                log.warning(
                    "unit %s lost %d times, giving up: %s", unit.label(), unit.attempts, why
                )
                for g in unit.groups:
                    msg = f"lost {unit.attempts} times on the cluster; last: {why}"
                    yield g, error_rows(c, g, RuntimeError(msg))
                return
            log.warning("unit %s lost (%s); rescheduling it", unit.label(), why)
            self.rescheduled += 1
            queue.appendleft(unit)
            return
        for g, rows in zip(unit.groups, results, strict=True):
            yield g, rows
