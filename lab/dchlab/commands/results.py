"""`dch results`: query the results store.

Without options: one summary line per campaign, condition and scheme (loads, invalid,
failed, mean PLT). --rows lists every row; --sql runs any read-only query against the
table `results`.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from dchlab.commands import add_command
from dchlab.experiments import store

_SUMMARY = """
SELECT campaign, condition, {arm} AS scheme, workload,
       count(*) FILTER (WHERE error IS NULL) AS loads,
       count(*) FILTER (WHERE error IS NULL AND valid = false) AS invalid,
       count(*) FILTER (WHERE error IS NOT NULL) AS failed,
       round(avg(plt_ms) FILTER (WHERE valid AND error IS NULL), 1) AS mean_plt_ms
FROM results {where}
GROUP BY ALL ORDER BY campaign, condition, scheme
"""


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, str | int | float | bool) or v is None else str(v)


def cmd_results(args: argparse.Namespace) -> int:
    try:
        if not store.has_table(args.store):
            print(
                f"dch results: no results in {store.resolve_path(args.store)} yet", file=sys.stderr
            )
            return 1
        if args.sql:
            names, rows = store.query(args.sql, (), args.store)
        else:
            where, params = "", []
            if args.campaign:
                where, params = "WHERE campaign = ?", [args.campaign]
            if args.rows:
                sql = f"SELECT * FROM results {where} ORDER BY ts"
            else:
                with store.connect(args.store, read_only=True) as con:
                    cols = store.existing_columns(con)
                arm = "coalesce(arm, scheme)" if "arm" in cols else "scheme"
                sql = _SUMMARY.format(where=where, arm=arm)
            names, rows = store.query(sql, params, args.store)
    except Exception as e:  # duckdb errors carry the SQL problem
        print(f"dch results: {e}", file=sys.stderr)
        return 2
    if args.json:
        for r in rows:
            print(json.dumps({k: _jsonable(v) for k, v in zip(names, r, strict=True)}))
    elif args.csv:
        w = csv.writer(sys.stdout)
        w.writerow(names)
        w.writerows(rows)
    else:
        t = Table(*names, title=str(store.resolve_path(args.store)))
        for r in rows:
            t.add_row(*("" if v is None else str(v) for v in r))
        Console().print(t)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_results)
    p.add_argument("--store", help="results store (default $DCH_RESULTS or results/dch.duckdb)")
    p.add_argument("--campaign", help="only this campaign")
    p.add_argument("--rows", action="store_true", help="every row instead of the summary")
    p.add_argument("--sql", help='SQL, e.g. "SELECT scheme, avg(plt_ms) FROM results GROUP BY 1"')
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV on stdout")
    fmt.add_argument("--json", action="store_true", help="one JSON object per row")
