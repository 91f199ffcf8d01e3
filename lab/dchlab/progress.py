"""The lab's one progress bar: what is running, done/total, elapsed and ETA.

Long runs (`dch run`, `dch pageload`, `dch session`, ...) draw it on stderr, so that
stdout can carry --json rows; `status=True` adds a field for what runs right now.
When stderr is not a terminal (a campaign under nohup, its log in a file) the bar
draws nothing until the end, so `heartbeat` logs the same figures once a minute.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

log = logging.getLogger("dchlab.progress")


def bar(console: Console, status: bool = False) -> Progress:
    """A Progress with the lab's columns (use as a context manager); with `status`,
    tasks carry a `status` field shown after the ETA."""
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    if status:
        columns.append(TextColumn("{task.fields[status]}"))
    return Progress(*columns, console=console, transient=False)


def heartbeat(
    console: Console, name: str, every_s: float = 60.0
) -> Callable[[int, int, str], None]:
    """`beat(done, total, status)`: on a console that is not a terminal, logs
    "NAME: done/total (pct), elapsed, ETA, status" at most every `every_s` seconds
    (and at the last item); on a terminal it does nothing (the bar shows it)."""
    start = time.monotonic()
    last = start

    def beat(done: int, total: int, status: str = "") -> None:
        nonlocal last
        now = time.monotonic()
        if console.is_terminal or (now - last < every_s and done < total):
            return
        last = now
        elapsed = now - start
        eta = elapsed / done * (total - done) if done else float("nan")
        log.info(
            "%s: %d/%d (%.0f%%), elapsed %s, ETA %s%s",
            name, done, total, 100 * done / total if total else 100.0,
            _hms(elapsed), _hms(eta), f" — {status}" if status else "",
        )  # fmt: skip

    return beat


def _hms(seconds: float) -> str:
    if seconds != seconds:  # nan: no estimate yet
        return "?"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
