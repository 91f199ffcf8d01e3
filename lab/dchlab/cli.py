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
from dchlab.errors import UserError

log = logging.getLogger("dch")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser with every command — or, when `argv` names one (`dch pageload ...`),
    with that command's module only: importing all of them (matplotlib, duckdb, ...)
    costs ~1 s of start-up that `dch pageload` does not need."""
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
    names = sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    wanted = next((a for a in argv or [] if not a.startswith("-")), None)
    module = wanted.replace("-", "_") if wanted else None
    if module in names:
        _register(sub, module)
        if wanted in sub.choices:
            return parser
    for name in names:
        if name != module:
            _register(sub, name)
    return parser


def _register(sub: argparse._SubParsersAction, name: str) -> None:
    module = importlib.import_module(f"{commands.__name__}.{name}")
    register = getattr(module, "register", None)
    if register is not None:
        register(sub)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = args.func(args)
    except UserError as e:
        # The one place bad input becomes a message and an exit code (dchlab/errors.py).
        log.debug("%s: %s", type(e).__name__, e, exc_info=True)
        print(f"dch {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        # Ctrl-C: whatever was running has cleaned up on its way out; no traceback.
        print(f"dch {args.command}: interrupted", file=sys.stderr)
        return 130
    status = int(result or 0)
    if argv is None:  # this process is `dch`, not a test calling main(argv)
        _end_ray_driver(status)
    return status


def _end_ray_driver(status: int) -> None:
    """A `dch run --ray` process ends here without Ray's teardown (its reason is in
    ray_backend.end_driver_process); Ray is imported only by runs that use it."""
    if "ray" in sys.modules:
        from dchlab.experiments.ray_backend import end_driver_process

        end_driver_process(status)


if __name__ == "__main__":
    sys.exit(main())
