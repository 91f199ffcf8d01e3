"""`dch run FILE`: run a campaign (experiments/*.yaml), resumably, into the results store."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.experiments.runner import WorkloadUnavailable, run_campaign


def cmd_run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    status = 0
    for path in args.files:
        try:
            c = load_campaign(path)
        except CampaignError as e:
            print(f"dch run: {e}", file=sys.stderr)
            return 2
        if args.quick:
            c = c.quick()
        if args.trials:
            from dataclasses import replace

            c = replace(c, trials=args.trials)
        console.print(
            f"[bold]{c.name}[/]{' (quick)' if c.is_quick else ''}: {len(c.schemes)} schemes × "
            f"{len(c.conditions)} conditions × {c.workload.kind} × {c.trials} trials, seed {c.seed}"
        )
        try:
            s = run_campaign(
                c, store_path=args.store, console=console, any_revision=args.any_revision
            )
        except WorkloadUnavailable as e:
            print(f"dch run: {c.name}: {e}", file=sys.stderr)
            return 3
        console.print(
            f"{c.name}: {s.measured} measured ({s.invalid} invalid), {s.failed} failed, "
            f"{s.skipped} skipped of {s.total_cells} cells in {s.seconds:.0f} s"
        )
        for err in s.errors[:5]:
            console.print(f"  [red]failed[/] {err}")
        if s.failed:
            console.print("  failed cells are retried by running the same command again")
            status = 1
    return status


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run experiment campaigns (experiments/*.yaml) into the results store",
        description=(
            "Run every cell (condition × workload item × trial × scheme) of a campaign file "
            "and append one row per measurement to the results store. Resumable: cells "
            "already measured for this campaign at the current code revision are skipped; "
            "failed cells are recorded and retried on the next run. See docs/experiments.md."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="campaign YAML file(s)")
    p.add_argument("--quick", action="store_true", help="run only the file's `quick:` subset")
    p.add_argument("--store", help="results store (default $DCH_RESULTS or results/dch.duckdb)")
    p.add_argument("--trials", type=int, help="override the number of trials")
    p.add_argument(
        "--any-revision",
        action="store_true",
        help="also skip cells measured at other code revisions",
    )
    p.add_argument("--fresh", action="store_true", help="measure every cell again")
    p.set_defaults(func=cmd_run)
