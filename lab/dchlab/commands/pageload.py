"""`dch pageload`: page-load time of real Chromium over the testbed (paired across schemes).

Load pages of a corpus in a fresh headless Chromium on ue, once per page, trial and
scheme, each in a fresh testbed. PLT = loadEventEnd - navigationStart. For a page and
trial every scheme sees the same trace offset. A load is invalid when a request fails
that the page's record (missing_urls) does not list, or on a certificate error or
timeout.
"""

from __future__ import annotations

import argparse
from typing import Any

from dchlab.commands import add_command
from dchlab.run_options import run_specs
from dchlab.units import is_uint
from dchlab.workloads.cli_common import add_common, fmt_ms, run_jobs


def _show(row: dict[str, Any]) -> str:
    state = "ok" if row["valid"] else f"[red]invalid: {row['invalid_reason']}[/red]"
    return (
        f"{row['scheme']:<12} {row['page']:<16} #{row['trial']} "
        f"PLT {fmt_ms(row['plt_ms'])} ms, {row['resources_loaded']} loaded, "
        f"{row['resources_failed']} failed, offset {row['trace_offset_ms']} ms: {state}"
    )


def cmd_pageload(args: argparse.Namespace) -> int:
    from dchlab.pages import open_corpus
    from dchlab.workloads.api import load_one

    corpus = open_corpus(args.corpus)
    if args.pages is None:
        names = [p.name for p in corpus.pages]
    elif is_uint(args.pages):
        names = [p.name for p in corpus.pages[: int(args.pages)]]
    else:
        names = [corpus.page(n.strip()).name for n in args.pages.split(",") if n.strip()]
    jobs = []
    # Order: page, trial, scheme — schemes of one (page, trial) run back to back, so a
    # partial run still holds complete paired comparisons.
    todo = [(name, trial, spec) for name in names for trial in range(args.trials)
            for spec in run_specs(args, trial)]  # fmt: skip
    for i, (name, trial, spec) in enumerate(todo):
        label = f"{spec.scheme} {name} #{trial}"
        more = i + 1 < len(todo)  # the last load prepares no testbed for a next one
        # the browser prepared during this load's tail is started the next scheme's way
        nxt = todo[i + 1][2].scheme if more else None
        jobs.append(
            (
                label,
                lambda s=spec, n=name, m=more, x=nxt: [load_one(s, corpus, n, args.timeout, m, x)],
            )
        )
    return run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_pageload)
    p.add_argument(
        "--corpus",
        default="synthetic",
        help="corpus directory, tp5n (real saved pages: $DCH_CORPUS_TP5N or "
        "../shared/data/pages/tp5n) or synthetic[:SEED[:PAGES]] (default: synthetic = seed 1, "
        "20 pages)",
    )
    p.add_argument("--pages", help="first K pages, or comma-separated page names (default: all)")
    p.add_argument("--timeout", type=float, default=60.0, help="per-load timeout, s (default 60)")
    p.add_argument(
        "--speed-index",
        action="store_true",
        help="also Speed Index and atf_ms (records a screencast during the load, which costs "
        "the PLT ~6%%; FCP and LCP are always measured)",
    )
    add_common(p)
