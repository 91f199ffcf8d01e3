"""`dch pageload`: page-load time of real Chromium over the testbed (paired across schemes).

Load pages of a corpus in a fresh headless Chromium on ue, once per page, trial and
scheme, each in a fresh testbed. PLT = loadEventEnd - navigationStart. For a page and
trial every scheme sees the same trace offset. With --devices N the page loads on ue1
while ue2..ueN run background users (dchlab.workloads.bgusers). A load is invalid when a request fails
that the page's record (missing_urls) does not list, or on a certificate error or
timeout.
"""

from __future__ import annotations

import argparse
from typing import Any

from dchlab import run_options
from dchlab.commands import add_command
from dchlab.workloads import cli_common


def _show(row: dict[str, Any]) -> str:
    return cli_common.load_line(
        row,
        f"PLT {cli_common.fmt_ms(row['plt_ms'])} ms, {row['resources_loaded']} loaded, "
        f"{row['resources_failed']} failed",
    )


def cmd_pageload(args: argparse.Namespace) -> int:
    from dchlab.pages import open_corpus
    from dchlab.workloads.api import load_one
    from dchlab.workloads.pool import TestbedPool

    corpus = open_corpus(args.corpus)
    names = cli_common.chosen_pages(corpus, args.pages, [p.name for p in corpus.pages], None)
    todo = cli_common.paired_runs(args, names)
    with TestbedPool() as pool:

        def job(i: int) -> list[dict[str, Any]]:
            name, _, run = todo[i]
            # the testbed prepared during this load's tail is the next load's
            pool.expect(todo[i + 1][2] if i + 1 < len(todo) else None)
            return [load_one(run, corpus, name, args.timeout, pool)]

        jobs = [
            (f"{run.scheme} {name} #{trial}", lambda i=i: job(i))
            for i, (name, trial, run) in enumerate(todo)
        ]
        return cli_common.run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_pageload)
    cli_common.add_corpus_arg(
        p, synthetic="synthetic[:SEED[:PAGES]]", default=" = seed 1, 20 pages"
    )
    p.add_argument("--pages", help="first K pages, or comma-separated page names (default: all)")
    run_options.add_device_args(p)
    cli_common.add_browser_args(
        p,
        timeout_per="load",
        speed_index_help="also Speed Index and atf_ms (records a screencast during the load, "
        "which costs the PLT ~6%%; FCP and LCP are always measured)",
    )
