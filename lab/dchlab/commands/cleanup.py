"""`dch cleanup`: remove namespaces, processes and files of dead testbed runs.

Tear down every testbed run recorded in /run/dch whose owning process is gone (killed,
crashed): its processes, namespaces (with their interfaces), /etc/netns entries and run
directory. Also removes testbed-named namespaces (dtb<hex>-ue|gw|srv|ue<i>|llc|hbc) that have no live
record, and LocalReplay namespaces (dchlr<owner pid>...) whose owner is dead. Live runs
are left alone.
"""

from __future__ import annotations

import argparse

from dchlab.commands import add_command
from dchlab.testbed import cleanup_dead_runs


def cmd_cleanup(args: argparse.Namespace) -> int:
    removed = cleanup_dead_runs(include_orphans=not args.records_only)
    for item in removed:
        print(f"removed {item}")
    print(f"{len(removed)} item(s) removed" if removed else "nothing to clean up")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_cleanup)
    p.add_argument(
        "--records-only",
        action="store_true",
        help="only runs with a record; keep unrecorded namespaces",
    )
