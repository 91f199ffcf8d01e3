"""Shared plumbing of `dch pageload`, `dch curl-phases` and `dch bulk`: common options,
a rich progress bar with ETA, JSON-lines output and appending rows to the results store."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dchlab import units
from dchlab.run_options import add_testbed_args

log = logging.getLogger(__name__)


def parse_size(text: str) -> int:
    """argparse type for sizes (dchlab.units.parse_size: `10KB`, `1MiB`, `500`)."""
    try:
        return units.parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_common(p: argparse.ArgumentParser) -> None:
    add_testbed_args(p, several_schemes=True)
    p.add_argument("--trials", type=int, default=1, help="trials per item (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON object per measurement")
    p.add_argument("--no-store", action="store_true", help="do not append to the results store")
    p.add_argument("--store", help="results store path (default: the lab's store)")
    p.add_argument("--campaign", help="campaign name recorded with the rows")


def check_schemes(args: argparse.Namespace) -> str | None:
    """An error message when a scheme or channel of the command line is unknown."""
    from dchlab.testbed import TestbedError, get_scheme, resolve_channel

    try:
        for s in args.scheme.split(","):
            if s.strip():
                get_scheme(s)
        for ch in (args.hbc, args.llc):
            resolve_channel(ch, args.seed)
    except TestbedError as e:
        return str(e)
    return None


def store_rows(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    if args.no_store or not rows:
        return
    from dchlab.experiments.store import append_rows  # duckdb: only when rows are stored

    append_rows(rows, campaign=args.campaign, store=args.store)


def run_jobs(
    jobs: Sequence[tuple[str, Callable[..., list[dict[str, Any]]]]],
    args: argparse.Namespace,
    show: Callable[[dict[str, Any]], str],
) -> int:
    """Run (label, job) pairs with a progress bar; print rows; store them. Exit status 1
    when any measurement was invalid."""
    from rich.console import Console

    from dchlab import progress

    err = Console(stderr=True)
    problem = check_schemes(args)
    if problem:
        err.print(f"[red]error:[/red] {problem}")
        return 2
    bad = 0
    with progress.bar(err) as prog:
        task = prog.add_task("starting", total=len(jobs))
        for label, job in jobs:
            prog.update(task, description=label)
            rows = job()
            for row in rows:
                bad += 0 if row.get("valid") else 1
                if args.json:
                    sys.stdout.write(json.dumps(row, default=str) + "\n")
                    sys.stdout.flush()
                else:
                    prog.console.print(show(row))
            store_rows(rows, args)
            prog.advance(task)
    if bad:
        err.print(f"[yellow]{bad} invalid measurement(s)[/yellow]")
    return 1 if bad else 0


def fmt_ms(v: Any) -> str:
    return "-" if v is None else f"{float(v):.0f}"
