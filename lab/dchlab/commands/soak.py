"""`dch soak faults|kills`: the long reliability runs behind docs/reliability.md."""

from __future__ import annotations

import argparse

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
    p = sub.add_parser(
        "soak",
        help="long reliability runs (channel faults, kills); figures for docs/reliability.md",
        description=(
            "Run one of the long reliability experiments (root, release binaries). "
            "Everything after the name goes to it: `dch soak kills --help`."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(f"  {k:7} {h}" for k, (_, h) in SOAKS.items()),
    )
    p.add_argument("soak", choices=sorted(SOAKS), help="which soak")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="its options")
    p.set_defaults(func=cmd_soak)
