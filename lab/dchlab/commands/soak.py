"""`dch soak`: long reliability runs (channel faults, kills); figures for docs/reliability.md.

Run one of the long reliability experiments (root, release binaries). Everything after
the name goes to it: `dch soak kills --help`.
"""

from __future__ import annotations

import argparse

from dchlab.commands import add_command

#: subcommand -> (module with main(argv), one-line help)
SOAKS = {
    "faults": (
        "dchlab.soak_faults",
        "HBC/LLC outages during HTTPS downloads under dchannel: per-flow stalls, failover "
        "and return times",
    ),
    "kills": (
        "dchlab.soak_kills",
        "SIGKILL dch run at random moments; SIGINT/SIGKILL testbed owners and children: "
        "store integrity, resume, leftovers",
    ),
}


def cmd_soak(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(SOAKS[args.soak][0])
    return int(module.main(list(args.rest)) or 0)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, __doc__, cmd_soak, epilog="\n".join(f"  {k:7} {h}" for k, (_, h) in SOAKS.items())
    )
    p.add_argument("soak", choices=sorted(SOAKS), help="which soak")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="its options")
