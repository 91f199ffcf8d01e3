"""`dch report`: write the HTML report (our numbers beside the paper's).

Write one self-contained HTML page that opens on the scorecard (each paper number, ours
with its 95% CI, the share of the ideal, a verdict); then, for each campaign under
experiments/, plots and tables with our numbers and 95% CIs beside the paper's, the
channel profiles, the provenance of the rows and the command that reruns it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from dchlab.commands import add_command
from dchlab.experiments import publish, scorecard, store
from dchlab.experiments.report import build_report, campaign_files, default_output
from dchlab.paths import repo_root


def cmd_report(args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files] if args.files else campaign_files()
    if args.markdown and not args.published:
        print(
            "dch report: --markdown needs --published (docs cite committed data)", file=sys.stderr
        )
        return 2
    if args.published:
        return _report_published(args, files)
    if not store.resolve_path(args.store).exists():
        print(
            f"dch report: note: no results store at {store.resolve_path(args.store)}; "
            "the report lists the campaigns with the commands that run them",
            file=sys.stderr,
        )
    out = build_report(args.store, args.output, files, with_channels=not args.no_channels)
    print(out)
    return 0


def _report_published(args: argparse.Namespace, files: list[Path]) -> int:
    """The report from results/published/*.parquet alone: nothing runs, no store needed."""
    if args.store:
        print("dch report: --published and --store exclude each other", file=sys.stderr)
        return 2
    parquet = publish.published_files()
    if not parquet:
        print(
            f"dch report: note: nothing published in {publish.published_dir()} yet "
            "(`dch publish CAMPAIGN` or `dch run --publish FILE` writes it)",
            file=sys.stderr,
        )
    db = publish.published_store(parquet)
    try:
        names = ", ".join(p.name for p in parquet) or "none"
        d = publish.published_dir()
        shown = d.relative_to(repo_root()) if d.is_relative_to(repo_root()) else d
        source = f"{shown}/ ({names})"
        scores = scorecard.store_scorecard(db)
        out = build_report(
            db,
            args.output,
            files,
            with_channels=not args.no_channels,
            source=source,
            scores=scores,
            scores_source=f"{shown}/",
        )
        if args.markdown:
            from dchlab.experiments.markdown import campaigns_markdown, write_markdown

            text = campaigns_markdown(
                files, db, source, f"dch report --published --markdown {args.markdown}"
            )
            card = scorecard.scorecard_markdown(scores)
            print(write_markdown(Path(args.markdown), text, card))
    finally:
        shutil.rmtree(db.parent, ignore_errors=True)
    print(out)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_report)
    p.add_argument("files", nargs="*", help="campaign files (default: experiments/*.yaml)")
    p.add_argument("--store", help="results store (default $DCH_RESULTS or results/dch.duckdb)")
    p.add_argument("-o", "--output", default=None, help=f"output file (default {default_output()})")
    p.add_argument("--no-channels", action="store_true", help="skip the channel profile summaries")
    p.add_argument(
        "--published",
        action="store_true",
        help="build from the committed results/published/*.parquet instead of the store "
        "(works on a fresh clone; runs nothing)",
    )
    p.add_argument(
        "--markdown",
        metavar="FILE",
        help="with --published: also write the tables as Markdown into FILE, between its "
        "generated-part markers (e.g. docs/results.md; the prose around them is kept)",
    )
