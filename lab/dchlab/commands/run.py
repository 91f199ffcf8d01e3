"""`dch run`: run experiment campaigns (experiments/*.yaml) into the results store.

Run every cell (condition × workload item × trial × scheme) of a campaign file and
append one row per measurement to the results store. Resumable: cells already measured
for this campaign at the current code revision are skipped; failed cells are recorded
and retried on the next run. With --ray the cells are measured on the nodes of a Ray
cluster and the rows stored here. See docs/experiments.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from rich.console import Console

from dchlab.commands import add_command
from dchlab.errors import EXIT_BAD_INPUT, EXIT_STOPPED
from dchlab.experiments import publish, store
from dchlab.experiments.campaign import load_campaign
from dchlab.experiments.offsets import MODES
from dchlab.experiments.ray_backend import RayDispatch  # ray imported lazily
from dchlab.experiments.runner import local_dispatch, run_campaign
from dchlab.experiments.setup_errors import DEFAULT_LIMIT

#: Exit statuses (also in `dch run --help`); 2, 3 and 4 live in dchlab/errors.py.
EXIT_FAILED_CELLS = 1


def cmd_run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    if args.slots is not None and not args.ray:
        print(
            "dch run: --slots only applies with --ray (a local run measures one at a time)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    status = 0
    for i, path in enumerate(args.files):
        c = load_campaign(path)  # a bad file is reported before anything else
        if i == 0:
            _warn_if_busy(console)
        if args.quick:
            c = c.quick()
        if args.trials:
            c = replace(c, trials=args.trials)
        if (
            args.name
            or args.seed is not None
            or args.pages
            or args.schemes
            or args.conditions
            or args.offsets
        ):
            c = c.variant(
                name=args.name,
                seed=args.seed,
                pages=args.pages,
                schemes=args.schemes,
                conditions=args.conditions,
                offsets=args.offsets,
            )
        console.print(
            f"[bold]{c.name}[/]{' (quick)' if c.is_quick else ''}: {len(c.schemes)} schemes × "
            f"{len(c.conditions)} conditions × {c.workload.kind} × {c.trials} trials, seed {c.seed}"
            + (f", on the Ray cluster {args.ray}" if args.ray else "")
        )
        dispatch = local_dispatch
        if args.ray:
            rev = None if args.any_revision else store.code_revision()[0]
            # keep_connection: cli.main ends the driver (ray_backend.end_driver_process)
            dispatch = RayDispatch(args.ray, slots=args.slots, revision=rev, keep_connection=True)
        # A bad file (CampaignError, 2), a missing workload or cluster (WorkloadUnavailable,
        # RayClusterError, 3) go up to cli.main, which prints them with their exit status.
        if isinstance(dispatch, RayDispatch):
            dispatch.connect()  # fail before the progress bar when there is no cluster
        try:
            s = run_campaign(
                c,
                store_path=args.store,
                console=console,
                any_revision=args.any_revision,
                fresh=args.fresh,
                max_setup_errors=args.max_setup_errors,
                dispatch=dispatch,
            )
        finally:
            # also after Ctrl-C/SIGTERM: a partial campaign is published as far as it got
            if args.publish and not c.is_quick:
                _publish(c.name, args.store, console)
        console.print(
            f"{c.name}: {s.measured} measured ({s.invalid} invalid), {s.failed} failed, "
            f"{s.skipped} skipped of {s.total_cells} cells in {s.seconds:.0f} s"
        )
        if s.stopped:
            print(f"dch run: {c.name}: {s.stopped}", file=sys.stderr)
            print(
                "dch run: fix the cause and run the same command again (finished cells are "
                "kept); --max-setup-errors 0 never stops",
                file=sys.stderr,
            )
            return EXIT_STOPPED
        for err in s.errors[:5]:
            console.print(f"  [red]failed[/] {err}")
        if s.failed:
            console.print("  failed cells are retried by running the same command again")
            status = EXIT_FAILED_CELLS
    return status


def _warn_if_busy(console: Console) -> None:
    """Page loads through the agents slow down under CPU contention far more than the
    baseline (docs/results.md): say so before measuring on a busy machine."""
    import os

    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    if load > cpus:
        console.print(
            f"[yellow]warning[/]: the machine is busy (load average {load:.1f} on {cpus} "
            "cores). Agent-based schemes lose their gains under CPU contention; measure on a "
            "quiet machine (every row records host_load1; the report counts busy rows)"
        )


def _publish(campaign: str, store_path: str | None, console: Console) -> None:
    try:
        path, n = publish.export(campaign, store_path)
    except publish.PublishError as e:
        console.print(f"[yellow]not published[/]: {e}")
        return
    console.print(f"{campaign}: {n} rows published to {path} (commit it)")


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {n}")
    return n


def _positive(text: str) -> int:
    n = _non_negative(text)
    if n == 0:
        raise argparse.ArgumentTypeError("expected a number >= 1, got 0")
    return n


def _labels(text: str) -> list[str]:
    """`a,b,c` → [a, b, c] (the campaign checks that each names one of its own)."""
    labels = [x.strip() for x in text.split(",") if x.strip()]
    if not labels:
        raise argparse.ArgumentTypeError("expected a comma-separated list, got nothing")
    return labels


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        __doc__,
        cmd_run,
        epilog="exit status: 0 all cells measured (invalid loads included), 1 some cells failed,\n"
        "2 bad campaign file or options, 3 workload layer or Ray cluster unavailable,\n"
        "4 stopped because the same setup error repeated --max-setup-errors times",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="campaign YAML file(s)")
    p.add_argument("--quick", action="store_true", help="run only the file's `quick:` subset")
    p.add_argument("--store", help="results store (default $DCH_RESULTS or results/dch.duckdb)")
    p.add_argument("--trials", type=_positive, help="override the number of trials")
    p.add_argument("--seed", type=_non_negative, help="override the campaign's seed")
    p.add_argument("--pages", type=_positive, metavar="N", help="only the first N pages")
    p.add_argument(
        "--offsets",
        choices=MODES,
        help="where loads start in the traces: `random` per (seed, page, trial); "
        "`stratified`: each trial spreads the pages evenly over the trace; `latin`: "
        "that, each page rotated through every stratum over n trials (n pages), and "
        "one realization of each synthesized scenario for all loads, so two seeds "
        "sample the same network (docs/experiments.md); default: the file's `offsets:` "
        "(random). Another value than the file's needs --name",
    )
    p.add_argument(
        "--schemes",
        type=_labels,
        metavar="LABEL,...",
        help="only these of the file's schemes (by label), e.g. `--schemes all-hbc,dchannel,ideal`",
    )
    p.add_argument(
        "--conditions",
        type=_labels,
        metavar="NAME,...",
        help="only these of the file's conditions (by name), e.g. `--conditions MM-S,LB-D`",
    )
    p.add_argument(
        "--name",
        metavar="NAME",
        help="store (and publish) the run as campaign NAME, a rerun of the file's campaign: "
        "the report sets its headline gains beside the original's on the same pages, e.g. "
        "`--pages 10 --seed 2 --name fig3-seed2` (the stability check of docs/results.md)",
    )
    p.add_argument(
        "--any-revision",
        action="store_true",
        help="also skip cells measured at other code revisions (with --ray: also use nodes "
        "at another revision)",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="measure every cell again (also those already published)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="when the run ends (finished, failed or interrupted), export the campaign to "
        "results/published/<campaign>.parquet: its published rows plus the new ones, one "
        "per cell. Published cells are always skipped (any revision) unless --fresh",
    )
    p.add_argument(
        "--max-setup-errors",
        type=_non_negative,
        default=DEFAULT_LIMIT,
        metavar="N",
        help="stop the campaign when the same lab failure (testbed not built, corpus "
        "refused, ...; run-specific names ignored) repeats N times in a row "
        f"(default {DEFAULT_LIMIT}; 0: never stop)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="shard the campaign over a running Ray cluster: `auto` (the cluster this "
        "machine is part of) or the head's HOST:PORT. Every (condition, page, trial) "
        "with all its schemes runs on one node; rows are stored here",
    )
    p.add_argument(
        "--slots",
        type=_positive,
        metavar="N",
        help="with --ray: testbeds each node runs at once (default: one per 4 CPUs the "
        "node gave Ray, at least 1)",
    )
