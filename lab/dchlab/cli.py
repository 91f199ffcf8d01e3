"""The `dch` command line.

Each subcommand lives in its own module under `dchlab/commands/` and exposes
`register(subparsers)`; this file only discovers them, so adding a command never
edits a shared file.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

from dchlab import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dch",
        description=(
            "dchannel lab: emulate dual-channel (HBC + LLC) networks in namespaces, "
            "steer packets with the dchannel agents and baselines, and measure real "
            "applications (Chromium, curl, bulk transfers)."
        ),
        epilog="Run `dch COMMAND --help` for the options of one command.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
