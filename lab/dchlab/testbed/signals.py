"""Signals while testbeds are open: SIGTERM/SIGHUP stop the owner (TestbedInterrupted)
and the `with` block tears the testbed down; a signal that arrives during a teardown is
held and acted on once it is done; a daemon that dies wakes the main thread.

The handlers are shared by every open testbed of the process (one may be prepared ahead
while another runs): installed with the first, restored with the last. Only the main
thread installs them (Python delivers signals there).
"""

from __future__ import annotations

import _thread
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Protocol

from dchlab.testbed.errors import TestbedError, TestbedInterrupted

log = logging.getLogger(__name__)


class Open(Protocol):
    """What the handlers read of an open testbed."""

    prefix: str
    failure: str | None

    @property
    def closing(self) -> bool: ...


#: Open testbeds of this process that installed the shared signal handlers.
_LIVE: list[Open] = []
_SAVED_HANDLERS: dict[int, Any] = {}
#: Signals that arrived while a testbed was tearing down, raised when it is done.
_HELD: list[int] = []
#: SIGTERMs a testbed sent its own main thread when a daemon died (wake_main).
_WAKEUPS: list[int] = []


def install(tb: Open) -> bool:
    """Count `tb` among the open testbeds, installing the handlers with the first.
    Returns whether handlers are in place for it (False off the main thread, or
    when SIGTERM and SIGHUP were both ignored on entry)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not _LIVE:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # ignored on entry (nohup): stays ignored
            _SAVED_HANDLERS[sig] = signal.signal(sig, _on_signal)
    _LIVE.append(tb)
    return bool(_SAVED_HANDLERS)


def uninstall(tb: Open) -> None:
    """`tb` is closed; the last one restores the handlers found on entry."""
    if tb in _LIVE:
        _LIVE.remove(tb)
        if not _LIVE:
            for sig, old in _SAVED_HANDLERS.items():
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(sig, old)
            _SAVED_HANDLERS.clear()
            _WAKEUPS.clear()


def wake_main() -> None:
    """Interrupt the main thread wherever it is (the SIGTERM handler raises the dead
    daemon's failure). Counted, so that the handler knows this SIGTERM is a wake-up,
    not the user's."""
    _WAKEUPS.append(signal.SIGTERM)
    _thread.interrupt_main(signal.SIGTERM)


@contextlib.contextmanager
def holding() -> Iterator[None]:
    """Around a teardown: a Ctrl-C must not cut it short (it takes well under a
    second), nor be lost: it is held and acted on (raise_held) once the testbed is
    gone. A SIGINT ignored on entry (a background job) stays ignored. SIGTERM/SIGHUP
    are held by the shared handler while a testbed is closing."""
    main = threading.current_thread() is threading.main_thread()
    old_int = None
    if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        old_int = signal.signal(signal.SIGINT, _hold_signal)
    try:
        yield
    finally:
        if old_int is not None:
            signal.signal(signal.SIGINT, old_int)


def raise_held() -> None:
    """After a teardown (main thread): stop the owner as the held signal would have
    (SIGINT as KeyboardInterrupt, SIGTERM/SIGHUP as TestbedInterrupted). Dropping it
    instead let a `dch run` that got SIGTERM between two loads measure on."""
    if threading.current_thread() is not threading.main_thread() or not _HELD:
        return
    signum = _HELD[0]
    _HELD.clear()
    log.info("acting on %s held during teardown", signal.Signals(signum).name)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise TestbedInterrupted(f"interrupted by {signal.Signals(signum).name} during teardown")


def _hold_signal(signum: int, frame: FrameType | None) -> None:
    _HELD.append(signum)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    wakeup = signum == signal.SIGTERM and bool(_WAKEUPS)
    if wakeup:
        _WAKEUPS.pop()
    if any(tb.closing for tb in _LIVE):
        # Tearing down: finish that, then stop. A wake-up is not held: its failure is
        # what the owner reports (`dch shell` exits 125, not 143).
        if not wakeup:
            _hold_signal(signum, frame)
        return
    for tb in _LIVE:
        if tb.failure:
            raise TestbedError(tb.failure)
    prefixes = ", ".join(tb.prefix for tb in _LIVE)
    raise TestbedInterrupted(f"testbed {prefixes} interrupted by {signal.Signals(signum).name}")
