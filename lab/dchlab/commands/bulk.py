"""`dch bulk`: download time of 10 KB ... 100 MB files with curl (Fig. 6).

Download https://server.test/bytes/N with curl on ue, in a fresh testbed per size,
scheme and trial; checks the size and reports total time and throughput.
"""

from __future__ import annotations

import argparse
from typing import Any

from dchlab.commands import add_command
from dchlab.workloads.cli_common import add_common, fmt_ms, paired_runs, parse_size, run_jobs

DEFAULT_SIZES = "10KB,100KB,1MB,10MB,100MB"


def _show(row: dict[str, Any]) -> str:
    if not row["valid"]:
        return f"{row['scheme']:<14} {row['page']}  [red]invalid: {row['invalid_reason']}[/red]"
    mbit = row["size_bytes"] * 8 / (row["total_ms"] / 1000) / 1e6 if row["total_ms"] else 0.0
    return (
        f"{row['scheme']:<14} {row['size_bytes']:>10} B  trial {row['trial']}  "
        f"total {fmt_ms(row['total_ms'])} ms  ({mbit:.1f} Mbit/s)"
    )


def cmd_bulk(args: argparse.Namespace) -> int:
    from dchlab.workloads.api import bulk

    sizes = [parse_size(s) for s in args.size.split(",") if s.strip()]
    jobs = [
        (f"{spec.scheme} {size} B #{trial}", lambda s=spec, n=size: bulk(s, [n]))
        for size, trial, spec in paired_runs(args, sizes)
    ]
    return run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_bulk)
    p.add_argument(
        "--size",
        default=DEFAULT_SIZES,
        help=f"comma-separated sizes with units B/KB/MB/GB (decimal) or KiB/MiB (default {DEFAULT_SIZES})",
    )
    add_common(p)
