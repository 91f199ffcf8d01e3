"""Run a campaign: every cell (condition, workload item, trial, scheme) once.

Order: condition → trial → item → scheme: the schemes of one (page, trial) run back
to back — the paired design of the paper (the workload layer derives the trace offset
from seed, page and trial, identical for every scheme) — and an interrupted run still
holds complete pairs. Every measurement builds its own testbed (dchlab.workloads.api).

Resumable: cells that already have a finished row in the store for this campaign
and code revision are skipped. A failure (exception in the testbed or workload) is
recorded as a row with `error` set and the run goes on; such cells are retried on
the next run — unless the same failure repeats `max_setup_errors` times in a row
(dchlab.experiments.setup_errors), which stops the campaign.

Who measures is a *dispatcher*: `local_dispatch` runs the groups one after another
in this process; dchlab.experiments.ray_backend shards them over a Ray cluster.
Either way the rows come back here and only this process writes the store.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from dchlab import progress as progress_bar
from dchlab.errors import UserError
from dchlab.experiments import publish, store
from dchlab.experiments.analyses import get_analysis
from dchlab.experiments.campaign import Campaign, Condition, Scheme, cell_key
from dchlab.experiments.offsets import trace_seed, trial_fraction
from dchlab.experiments.setup_errors import DEFAULT_LIMIT, RepeatedSetupError, SetupErrorGuard

# WorkloadUnavailable, corpus_page_names: re-exported (callers of the runner use them)
from dchlab.experiments.workload_kinds import WorkloadUnavailable, corpus_page_names  # noqa: F401
from dchlab.run_config import RunConfig
from dchlab.workloads.pool import TestbedPool
from dchlab.workloads.rows import CELL_RUN_COLUMNS, CellProvenance, config_columns, make_row

log = logging.getLogger(__name__)


class CampaignStopped(UserError):
    """`dch run` got SIGTERM or SIGHUP between two loads (during a load the testbed's
    own handler raises TestbedInterrupted): rows measured so far are stored, and the
    same command resumes. Exit status 143, as after a SIGTERM."""

    exit_code = 143


def _raise_stopped(signum: int, frame: Any) -> None:
    raise CampaignStopped(
        f"stopped by {signal.Signals(signum).name}; run the same command to resume"
    )


@contextlib.contextmanager
def _stop_on_term() -> Iterator[None]:
    """SIGTERM/SIGHUP stop the campaign like Ctrl-C does: an exception that unwinds
    through the runner's `finally` (which stores the buffered rows), not a silent
    death that loses them. Testbeds open during a load install their own handlers on
    top and restore these afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A signal ignored on entry stays ignored (`nohup dch run` must survive a hangup).
    sigs = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]
    old = {s: signal.signal(s, _raise_stopped) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@dataclass
class Group:
    """One call into the workload layer: a (condition, trial, scheme) and its items."""

    condition: Condition
    trial: int
    scheme: Scheme
    items: list[str]  # item keys (page name, url label, size)
    cells: list[str]
    #: The trace start as a fraction of its period (a stratified or latin campaign);
    #: None: the workload layer derives it from (seed, item, trial).
    offset_fraction: float | None = None


@dataclass
class RunSummary:
    campaign: str
    total_cells: int
    skipped: int
    measured: int = 0
    invalid: int = 0
    failed: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the campaign stopped early (repeated setup error)


# ---------------------------------------------------------------- items


def workload_items(c: Campaign) -> list[str]:
    """The item keys of the campaign's workload (what a cell measures besides scheme/trial)."""
    return c.workload.kind_of().items(c.workload)


def plan(c: Campaign, done: set[str]) -> tuple[list[Group], int]:
    """Groups of pending cells (one per condition, trial, item and scheme), and the cell total.

    Order: condition → trial → item → scheme, so the schemes of one (page, trial) run
    back to back and an interrupted run still holds complete paired comparisons; the
    scheme order rotates so that no scheme always goes first.
    """
    kind = c.workload.kind_of()
    items = workload_items(c)
    groups: list[Group] = []
    total = 0
    for cond in c.conditions:
        for trial in range(c.trials):
            for i, it in enumerate(items):
                frac = trial_fraction(c.offsets, c.seed, len(items), i, trial)
                k = (trial + i) % len(c.schemes)
                for sch in c.schemes[k:] + c.schemes[:k]:
                    its = kind.group_items(c.workload, it)
                    if its is not None:  # one group: e.g. every page of a session
                        keys = [cell_key(cond.name, x, trial, sch.label) for x in its]
                        total += len(keys)
                        todo = [j for j, key in enumerate(keys) if key not in done]
                        if todo:
                            pend = ([its[j] for j in todo], [keys[j] for j in todo])
                            groups.append(Group(cond, trial, sch, *pend, frac))
                        continue
                    total += 1
                    key = cell_key(cond.name, it, trial, sch.label)
                    if key not in done:
                        groups.append(Group(cond, trial, sch, [it], [key], frac))
    return groups, total


def pair_units(groups: Sequence[Group]) -> list[list[Group]]:
    """The pending groups of each (condition, trial, item), in plan order.

    The unit of work a cluster node gets: all schemes of one (page, trial) are measured
    back to back on the same machine, as in a local run, so a paired comparison never
    mixes two machines.
    """
    units: dict[tuple[str, int, tuple[str, ...]], list[Group]] = {}
    for g in groups:
        units.setdefault((g.condition.name, g.trial, tuple(g.items)), []).append(g)
    return list(units.values())


# ---------------------------------------------------------------- executing


def cell_config(c: Campaign, g: Group) -> RunConfig:
    """The RunConfig of a group's cells: its condition, scheme, trial and offset, and the
    campaign's seed, offsets, CDN model, protocol (the arm's own, if it has one) and
    analysis needs."""
    return RunConfig(
        scheme=g.scheme.scheme,
        hbc=g.condition.hbc,
        llc=g.condition.llc,
        seed=c.seed,
        trial=g.trial,
        offset_fraction=g.offset_fraction,
        trace_seed=trace_seed(c.offsets),
        cc=g.condition.cc,
        server_delay_ms=g.condition.server_delay_ms,
        devices=g.condition.devices,
        shared_hbc=g.condition.shared_hbc,
        llc_share=g.condition.llc_share,
        bg_think=g.condition.bg_think,
        bg_client=g.condition.bg_client,
        agent_args=tuple(g.scheme.agent_args) + tuple(g.condition.agent_args),
        client_args=tuple(g.scheme.client_args) + tuple(g.condition.client_args),
        gateway_args=tuple(g.scheme.gateway_args) + tuple(g.condition.gateway_args),
        # an analysis such as reward-error (Fig. 11) reads the agents' per-packet logs
        decision_logs=get_analysis(c.analysis.get("kind", "gain")).needs_decision_logs,
        # the campaign's CDN tier model (`cdn:` block), as webreplay flags
        webreplay_args=c.cdn.webreplay_args() if c.cdn else (),
        # the file decides (reproducible), not the environment
        speed_index=c.workload.speed_index,
        protocol=c.protocol_of(g.scheme),
    )


def execute_group(c: Campaign, g: Group, pool: TestbedPool) -> list[dict[str, Any]]:
    """Measure one group by its workload kind; one row per item, in item order. `pool`:
    the dispatcher's, told which run follows this group."""
    return c.workload.kind_of().measure(cell_config(c, g), c.workload, list(g.items), pool)


#: Measures a group with the dispatcher's testbed pool: its rows, one per item.
Executor = Callable[[Campaign, Group, TestbedPool], list[dict[str, Any]]]


#: `invalid_reason` prefixes of the workload layer that mean the *lab* failed (testbed
#: set-up, the browser driver crashing), not that the scheme produced a bad load: such
#: rows get `error` set, so they are retried and never counted as invalid loads.
INFRA_FAILURES = ("testbed:", "driver exited")


def annotate(c: Campaign, g: Group, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of a group's cells: each the workload's row (or an error row, which says
    nothing else) joined by make_row with the cell's configuration and provenance."""
    run = cell_config(c, g)
    kind = c.workload.kind_of()
    out = []
    for it, cell, r in zip(g.items, g.cells, rows, strict=True):
        reason = str(r.get("invalid_reason") or "")
        infra = not r.get("error") and r.get("valid") is False and reason.startswith(INFRA_FAILURES)
        where = CellProvenance(
            cell=cell,
            condition=g.condition.name,
            arm=g.scheme.label,
            item=it,
            quick=c.is_quick,
            x=g.condition.x or None,
            offsets=c.offsets,
            rerun_of=c.rerun_of,
            corpus=r.get("corpus") or (c.workload.corpus if kind.corpus_column else None),
            error=reason if infra else r.get("error"),
        )
        provenance = {k: v for k, v in asdict(where).items() if v is not None}
        provenance.update(config_columns(run, CELL_RUN_COLUMNS))
        page = it if kind.item_is_page else None
        out.append(make_row(run, c.workload.kind, page, {"page": page, **r}, provenance))
    return out


def error_rows(c: Campaign, g: Group, exc: BaseException) -> list[dict[str, Any]]:
    msg = f"{type(exc).__name__}: {exc}"
    base = {"valid": False, "error": msg, "invalid_reason": "runner error"}
    return annotate(c, g, [dict(base) for _ in g.items])


def run_group(
    c: Campaign, g: Group, pool: TestbedPool, executor: Executor = execute_group
) -> list[dict[str, Any]]:
    """The annotated rows of one group; an exception becomes error rows (the run goes on)."""
    from dchlab.testbed import TestbedInterrupted

    try:
        return annotate(c, g, executor(c, g, pool))
    except (KeyboardInterrupt, TestbedInterrupted, CampaignStopped):
        raise  # the user stopped the campaign (Ctrl-C, SIGTERM, SIGHUP): not a failed cell
    except Exception as e:
        log.debug("group failed:\n%s", traceback.format_exc())
        return error_rows(c, g, e)


#: Runs groups somewhere and yields (group, annotated rows) as they finish; the third
#: argument reports what is running (shown beside the progress bar).
Dispatcher = Callable[
    [Campaign, list[Group], Executor, Callable[[str], None]],
    Iterator[tuple[Group, list[dict[str, Any]]]],
]


def local_dispatch(
    c: Campaign, groups: list[Group], executor: Executor, status: Callable[[str], None]
) -> Iterator[tuple[Group, list[dict[str, Any]]]]:
    """Every group in this process, one after another, in plan order. The testbed pool
    is this dispatcher's: told which group comes next, it prepares that group's testbed
    during the current load's tail; what it prepared for a load that will not come
    (namespaces, a Chromium) is closed when the groups end, not at process exit."""
    with TestbedPool() as pool:
        for i, g in enumerate(groups):
            status(f"{g.condition.name} t{g.trial} {g.scheme.label} ({len(g.items)})")
            pool.expect(next_config(c, groups[i + 1 :]))
            yield g, run_group(c, g, pool, executor)


def next_config(c: Campaign, following: Sequence[Group]) -> RunConfig | None:
    """The RunConfig of the first of `following` (None: nothing follows), for the pool."""
    return cell_config(c, following[0]) if following else None


def run_campaign(
    c: Campaign,
    store_path: str | Path | None = None,
    executor: Executor = execute_group,
    console: Console | None = None,
    any_revision: bool = False,
    fresh: bool = False,
    max_setup_errors: int = DEFAULT_LIMIT,
    dispatch: Dispatcher = local_dispatch,
    published: Path | None = None,
) -> RunSummary:
    """Run every pending cell of `c`, appending rows to the store; returns a summary.

    Stops early (`summary.stopped` says why) when the same setup error repeats
    `max_setup_errors` times in a row (0: never). Cells in the campaign's published
    file (`published`: a directory, default results/published/) count as done.
    """
    console = console or Console(stderr=True)
    guard = SetupErrorGuard(max_setup_errors)
    rev = None if any_revision else store.code_revision()[0]
    done = set() if fresh else store.done_cells(c.name, rev, store_path)
    if not fresh and not c.is_quick:
        # Published cells (results/published/, committed) are done at any revision: a
        # long campaign resumes from the repository on any machine.
        done |= publish.published_cells(c.name, published)
    groups, total = plan(c, done)
    if c.offsets == "latin" and groups:
        n = len(workload_items(c))
        if c.trials % n:
            # a partial cycle leaves some (page, stretch) pairs unmeasured, so two seeds
            # no longer sample the same grid (dchlab.experiments.offsets)
            console.print(
                f"[yellow]{c.name}: latin offsets pair every page with every stretch "
                f"only after a multiple of {n} trials ({n} pages); {c.trials} trials "
                "leave the grid partial[/]"
            )
    pending = sum(len(g.items) for g in groups)
    summary = RunSummary(campaign=c.name, total_cells=total, skipped=total - pending)
    if summary.skipped:
        console.print(
            f"[dim]{c.name}: {summary.skipped}/{total} cells already in the store or "
            "published, skipped[/]"
        )
    start = time.monotonic()
    with _stop_on_term(), progress_bar.bar(console, status=True) as progress:
        task = progress.add_task(c.name, total=pending, status="")
        beat = progress_bar.heartbeat(console, c.name)
        running = [""]

        def show(status: str) -> None:
            running[0] = status
            progress.update(task, status=status)

        outcomes = dispatch(c, groups, executor, show)
        # One store write per (condition, trial, item) — all its schemes — instead of one
        # per load: a write opens the DuckDB file and costs ~0.1-0.3 s. Rows are flushed
        # when the next pair starts and on any exit (Ctrl-C, stop, error).
        buffered: list[dict[str, Any]] = []
        unit: tuple[str, int, tuple[str, ...]] | None = None
        try:
            for g, rows in outcomes:
                key = (g.condition.name, g.trial, tuple(g.items))
                if key != unit and buffered:
                    store.append_rows(buffered, campaign=c.name, store=store_path)
                    buffered = []
                unit = key
                buffered.extend(rows)
                _tally(summary, rows)
                progress.advance(task, len(rows))
                beat(summary.measured + summary.failed, pending, running[0])
                guard.feed(rows)
        except RepeatedSetupError as e:
            summary.stopped = str(e)
            progress.update(task, status="[red]stopped[/]")
        else:
            progress.update(task, status="done")
        finally:
            if buffered:
                store.append_rows(buffered, campaign=c.name, store=store_path)
            # a dispatcher with work in flight (Ray) cancels it when closed
            close = getattr(outcomes, "close", None)
            if close is not None:
                close()
    summary.seconds = time.monotonic() - start
    return summary


def _tally(summary: RunSummary, rows: Sequence[dict[str, Any]]) -> None:
    for r in rows:
        if r.get("error"):
            summary.failed += 1
            if len(summary.errors) < 20:
                summary.errors.append(f"{r['cell']}: {r['error']}")
        else:
            summary.measured += 1
            if r.get("valid") is False:
                summary.invalid += 1
