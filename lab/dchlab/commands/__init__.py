"""One module per `dch` subcommand; each defines `register(subparsers)`.

`register` adds its parser with `add_command(sub, __doc__, func)` and its options;
`func` is called with the parsed args and returns the exit code. The module's
docstring is the command's documentation, once: its first line (`` `dch NAME`: what
it does.``) names the command and is the one-line help of `dch --help`; the whole
docstring is the description of `dch NAME --help`.
"""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Callable
from typing import Any

# "`dch NAME ARGS`: summary." or, for a subcommand, "`dch GROUP NAME ARGS`: summary.":
# the command's name is the last lower-case word of the command line.
_FIRST_LINE = re.compile(r"^`dch ((?:[a-z][a-z0-9-]* ?)+)[^`]*`: (.+)$")


def add_command(
    sub: argparse._SubParsersAction,
    doc: str | None,
    func: Callable[[argparse.Namespace], int] | None,
    **kwargs: Any,
) -> argparse.ArgumentParser:
    """Adds the subcommand documented by `doc` (see the module docs: a command's module
    docstring, or a subcommand's function docstring, e.g. `` `dch traces synth NAME`: ``)
    calling `func` (None: a group whose subcommands set their own); `kwargs` go to
    `add_parser` (e.g. `epilog`)."""
    if not doc:
        raise ValueError("a dch command module needs a docstring (its --help text)")
    first, _, rest = inspect.cleandoc(doc).partition("\n")
    m = _FIRST_LINE.match(first.strip())
    if m is None:
        raise ValueError(f"command docstring must start with '`dch NAME`: summary', not {first!r}")
    name, summary = m.group(1).split()[-1], m.group(2).rstrip(".")
    p = sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}.\n{rest}".rstrip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
    if func is not None:
        p.set_defaults(func=func)
    return p
