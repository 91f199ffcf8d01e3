"""Shared plumbing of the workload commands (`dch pageload|session|app|curl-phases|bulk`):
common options, the paired order of runs, a rich progress bar with ETA, JSON-lines
output and appending rows to the results store."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dchlab import units
from dchlab.pages.named import TP5N_ENV
from dchlab.run_config import RunConfig
from dchlab.run_options import add_testbed_args, run_configs

log = logging.getLogger(__name__)

T = TypeVar("T")


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


def add_corpus_arg(p: argparse.ArgumentParser, *, synthetic: str, default: str) -> None:
    """--corpus of the commands that load a corpus' pages (pageload, session): a corpus
    directory, tp5n or `synthetic` (its spec, e.g. synthetic[:SEED[:PAGES]]); `default`
    says what the default synthetic corpus holds."""
    p.add_argument(
        "--corpus",
        default="synthetic",
        help=f"corpus directory, tp5n (real saved pages: ${TP5N_ENV} or "
        f"../shared/data/pages/tp5n) or {synthetic} (default: synthetic{default})",
    )


def chosen_pages(
    corpus: Any, choice: str | None, pool: list[str], default: int | None
) -> list[str]:
    """The pages --pages (pageload) or --sites (session) names: the first K of `pool`
    for a number K, else comma-separated page names of `corpus`; without a choice the
    first `default` of `pool` (all of it when None)."""
    if choice is None:
        return pool[:default]
    if units.is_uint(choice):
        return pool[: int(choice)]
    return [corpus.page(n.strip()).name for n in choice.split(",") if n.strip()]


def add_browser_args(
    p: argparse.ArgumentParser, *, timeout_per: str, speed_index_help: str | None = None
) -> None:
    """What the commands that drive Chromium (pageload, session, app) add after their own
    options: --timeout for one `timeout_per` (load, page, interaction), --speed-index
    when `speed_index_help` says what it costs there, then the common options."""
    p.add_argument(
        "--timeout", type=float, default=60.0, help=f"per-{timeout_per} timeout, s (default 60)"
    )
    if speed_index_help:
        p.add_argument("--speed-index", action="store_true", help=speed_index_help)
    add_common(p)


def paired_runs(args: argparse.Namespace, items: Sequence[T]) -> list[tuple[T, int, RunConfig]]:
    """(item, trial, spec) for every item, trial of --trials and scheme of --scheme, in
    that order: the schemes of one (item, trial) run back to back on the same trace
    offset, so a partial run still holds complete paired comparisons."""
    return [(item, trial, spec) for item in items for trial in range(args.trials)
            for spec in run_configs(args, trial)]  # fmt: skip


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


def row_state(row: dict[str, Any]) -> str:
    """How a row's line ends: ok, or why the measurement is invalid (in red)."""
    return "ok" if row["valid"] else f"[red]invalid: {row['invalid_reason']}[/red]"


def load_line(row: dict[str, Any], measured: str) -> str:
    """The line of one paired load of an item (pageload, app): scheme, item, trial, what
    was `measured`, the trace offset all schemes shared, and the row's state."""
    return (
        f"{row['scheme']:<12} {row['page']:<16} #{row['trial']} {measured}, "
        f"offset {row['trace_offset_ms']} ms: {row_state(row)}"
    )


def fmt_ms(v: Any) -> str:
    return "-" if v is None else f"{float(v):.0f}"
