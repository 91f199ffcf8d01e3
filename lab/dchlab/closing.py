"""Tear down what was built when building fails part-way, written once.

A testbed, a local replay or a Mahimahi host builds several pieces in turn; when one
fails (Ctrl-C included, hence BaseException) the pieces already built must not be
left behind, so the owner's close() runs before the failure goes on up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def close_on_failure(close: Callable[[], object]) -> Iterator[None]:
    """Run the block; if it raises anything (KeyboardInterrupt too), call `close()`
    and re-raise. On success nothing is closed: the caller owns what was built."""
    try:
        yield
    except BaseException:
        close()
        raise
