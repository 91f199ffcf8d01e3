"""`dch session`: browsing sessions: a landing page then N pages of the same site, one browser.

Load a site's landing page and then further pages of the same site in one headless
Chromium in one testbed, one after the other as a user clicking through the site would:
the HTTP cache stays warm and connections are kept. One row per page: PLT, requests sent
(and answered from the cache), bytes of request headers and bodies sent, connections
opened. The synthetic corpus is generated with internal pages for this
(docs/experiments.md, 'Browsing sessions').

in one browser and one testbed (warm cache, kept connections), per-page rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dchlab.commands import add_command
from dchlab.workloads import cli_common

DEFAULT_FURTHER_PAGES = 4  # HotMobile'21 Fig. 4: a landing page and four internal pages


def _show(row: dict[str, Any]) -> str:
    return (
        f"{row['scheme']:<12} {row['session_id']} page {row['page_index']} "
        f"{row['page']:<16} PLT {cli_common.fmt_ms(row['plt_ms'])} ms, {row['requests']} requests "
        f"({row['requests_cached']} cached), {row['request_bytes']} B sent, "
        f"{row['connections_opened']} connections opened: {cli_common.row_state(row)}"
    )


def pages_arg(args: argparse.Namespace) -> str:
    """--pages, or --pages-file's URLs (one a line, # comments) joined by commas."""
    if args.pages_file:
        lines = Path(args.pages_file).read_text().splitlines()
        urls = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        return ",".join(urls)
    return str(args.pages)


def cmd_session(args: argparse.Namespace) -> int:
    from dchlab.workloads.session import (
        landing_pages,
        open_session_corpus,
        session_rows,
        session_urls,
    )

    pages = pages_arg(args)
    # synthetic: generated with the internal pages a URL list may name too
    internal = int(pages) if pages.isdigit() else DEFAULT_FURTHER_PAGES
    corpus = open_session_corpus(args.corpus, internal)
    sites = cli_common.chosen_pages(corpus, args.sites, landing_pages(corpus), 1)
    plans = {site: session_urls(corpus, site, pages) for site in sites}
    jobs = []
    for site, trial, spec in cli_common.paired_runs(args, sites):
        urls, names = plans[site]
        label = f"{spec.scheme} {site} #{trial} ({len(urls)} pages)"
        jobs.append(
            (label, lambda s=spec, u=urls, n=names: session_rows(s, corpus, u, n, args.timeout))
        )
    return cli_common.run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_session)
    cli_common.add_corpus_arg(
        p,
        synthetic="synthetic[:SEED[:SITES]]",
        default=", generated with --pages internal pages per site",
    )
    p.add_argument(
        "--sites",
        help="first K landing pages, or comma-separated page names (default: the first)",
    )
    pages = p.add_mutually_exclusive_group()
    pages.add_argument(
        "--pages",
        default=str(DEFAULT_FURTHER_PAGES),
        help="further pages after the landing page: N (the first N pages the landing page "
        "links to) or comma-separated URLs the corpus serves "
        f"(default {DEFAULT_FURTHER_PAGES})",
    )
    pages.add_argument(
        "--pages-file", help="file with one URL a line (# comments): the further pages"
    )
    cli_common.add_browser_args(
        p,
        timeout_per="page",
        speed_index_help="also Speed Index and atf_ms per page (a screencast during each load, "
        "~6%% PLT)",
    )
