"""TCP congestion control per run, without leaving a global setting changed.

Each namespace has its own `net.ipv4.tcp_congestion_control`, but a non-initial
namespace may only pick an algorithm in the global
`net.ipv4.tcp_allowed_congestion_control` (here `reno bbr`: cubic is not in it).
So, under a lock shared by concurrent runs, we widen the allowed list, set the
default in each of the run's namespaces, and restore the allowed list at once. A
namespace keeps its default after the list is narrowed again; sockets inherit it.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator, Sequence
from pathlib import Path

from dchlab.testbed import runrecord
from dchlab.testbed.errors import TestbedError
from dchlab.testbed.sh import sysctl

ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
CHOICES = ("cubic", "bbr", "reno")


def set_netns_cc(namespaces: Sequence[str], cc: str) -> None:
    """Make `cc` the default congestion control of every namespace in `namespaces`."""
    with allowing(cc):
        for ns in namespaces:
            sysctl(ns, {"net.ipv4.tcp_congestion_control": cc}, f"set {cc} in {ns}")


@contextlib.contextmanager
def allowing(cc: str) -> Iterator[None]:
    """Inside: namespaces may choose `cc` (the global allowed list is widened under the
    lock if needed, and restored on exit)."""
    if cc not in CHOICES:
        raise TestbedError(f"unknown congestion control {cc!r}; choose one of {', '.join(CHOICES)}")
    if cc not in AVAILABLE.read_text().split():
        # Loading the module makes it available (tcp_cubic is usually built in).
        import subprocess

        subprocess.run(["modprobe", f"tcp_{cc}"], capture_output=True)
        if cc not in AVAILABLE.read_text().split():
            raise TestbedError(
                f"congestion control {cc!r} is not available in this kernel "
                f"(available: {AVAILABLE.read_text().strip()}); try `modprobe tcp_{cc}`"
            )
    runrecord.RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(runrecord.RUN_DIR / "cc.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = ALLOWED.read_text().strip()
        widened = cc not in before.split()
        if widened:
            ALLOWED.write_text(f"{before} {cc}\n")
        try:
            yield
        finally:
            if widened:
                ALLOWED.write_text(before + "\n")


def allowed_list() -> str:
    """The global allowed list, read under the lock (concurrent runs widen it briefly)."""
    runrecord.RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(runrecord.RUN_DIR / "cc.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return ALLOWED.read_text().strip()
