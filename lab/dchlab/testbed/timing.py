"""Wall time per phase of a run (ms), for stats["timing"]: where a load's seconds go.

    t = Timing()
    with t.phase("namespaces"):
        ...
    t.ms  # {"namespaces": 41.3}

A phase entered twice adds up. Times come from time.monotonic() (CLOCK_MONOTONIC, the
same clock in every namespace), so a child process can report phases against a start
instant its parent passed it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timing:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, (time.monotonic() - t0) * 1000)

    def add(self, name: str, ms: float) -> None:
        self.ms[name] = round(self.ms.get(name, 0.0) + ms, 1)
