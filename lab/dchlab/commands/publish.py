"""`dch publish`: export campaigns to results/published/<campaign>.parquet (commit them).

Write each campaign's measurements to results/published/<campaign>.parquet: the latest
finished row of every cell (no failed runs, no quick subsets), with its full provenance,
merged with what the file already holds (rows measured on other machines are kept).
Commit the files: `dch report --published` builds the report from them on a fresh clone,
and `dch run` skips published cells.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from dchlab.commands import add_command
from dchlab.experiments import publish, store


def cmd_publish(args: argparse.Namespace) -> int:
    names = list(args.campaigns)
    if args.all:
        names = store.campaigns(args.store)
    if not names:
        print("dch publish: name a campaign (or --all)", file=sys.stderr)
        return 2
    console = Console(stderr=True)
    if args.as_name and len(names) != 1:
        print("dch publish: --as takes exactly one campaign", file=sys.stderr)
        return 2
    for name in names:
        # PublishError (a UserError) goes up to cli.main: message and exit status 2
        path, n = publish.export(name, args.store, as_name=args.as_name)
        shown = f"{name} as {args.as_name}" if args.as_name else name
        console.print(f"{shown}: {n} rows -> {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_publish)
    p.add_argument("campaigns", nargs="*", metavar="CAMPAIGN", help="campaign names (e.g. fig3)")
    p.add_argument("--all", action="store_true", help="every campaign in the store")
    p.add_argument("--store", help="results store (default $DCH_RESULTS or results/dch.duckdb)")
    p.add_argument(
        "--as",
        dest="as_name",
        metavar="NAME",
        help="publish the rows as campaign NAME, a rerun of CAMPAIGN (rows measured under "
        "conditions that must not count as the campaign, e.g. a busy machine; the report "
        "shows them beside it and `dch run CAMPAIGN` still measures those cells)",
    )
