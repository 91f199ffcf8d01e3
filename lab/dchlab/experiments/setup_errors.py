"""Stop a campaign when the lab fails the same way again and again.

A broken corpus (webreplay refuses its hosts file), a missing binary or a machine
without root fails *every* testbed with the same message. Recording hundreds of
such rows helps nobody, so the runner feeds every row to a `SetupErrorGuard`,
which raises `RepeatedSetupError` once the same error (a row with `error` set: the
testbed could not be built, the corpus was refused, the workload raised) arrives
`limit` times in a row. "The same" means equal after `normalise`, which blanks
what differs from run to run although the cause does not: the testbed's per-run
prefix (`dtb` + 6 hex), run directories, other hex ids and numbers (pids, ports,
timings). Any row without `error` (a load, valid or not) ends the streak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from dchlab.errors import EXIT_STOPPED, UserError

#: Default of `dch run --max-setup-errors`.
DEFAULT_LIMIT = 3

_PATTERNS = (
    (re.compile(r"\bdtb[0-9a-f]{6}\b"), "dtb*"),  # the testbed's per-run prefix
    (re.compile(r"\b[0-9a-f]{8,}\b"), "<hex>"),  # uuids, node ids, hashes
    (re.compile(r"\d+(\.\d+)?"), "<n>"),  # pids, ports, durations, line numbers
)


class RepeatedSetupError(UserError, RuntimeError):
    """The same lab failure `count` times in a row: every further cell would fail alike."""

    exit_code = EXIT_STOPPED

    def __init__(self, error: str, count: int, cells: list[str]) -> None:
        self.error = error
        self.count = count
        self.cells = cells
        shown = cells if len(cells) <= 3 else [cells[0], "…", cells[-1]]
        super().__init__(
            f"the same setup error {count} times in a row (cells {', '.join(shown)}), "
            f"stopping the campaign: {error}"
        )


def normalise(error: str) -> str:
    """The error with its run-specific parts blanked, for comparing two failures."""
    out = error.strip()
    for pattern, repl in _PATTERNS:
        out = pattern.sub(repl, out)
    return out


class SetupErrorGuard:
    """Counts identical consecutive error rows; `limit` 0 never stops."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 0:
            raise ValueError(f"max setup errors must be >= 0, got {limit}")
        self.limit = limit
        self._key: str | None = None
        self._cells: list[str] = []

    def feed(self, rows: Iterable[dict[str, Any]]) -> None:
        """Account rows in the order they were recorded; raises RepeatedSetupError."""
        for row in rows:
            error = row.get("error")
            if not error:
                self._key, self._cells = None, []
                continue
            key = normalise(str(error))
            if key != self._key:
                self._key, self._cells = key, []
            self._cells.append(str(row.get("cell", "?")))
            if self.limit and len(self._cells) >= self.limit:
                raise RepeatedSetupError(str(error), len(self._cells), list(self._cells))
