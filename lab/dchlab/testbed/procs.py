"""Supervised child processes: start, wait for READY, watch, stop by pid.

Daemons (emulators, agents, dnsmasq, webreplay) run in the foreground as our
children, each in its own session (a Ctrl-C at the terminal reaches only the
workload; the testbed then stops the daemons in order) and with a parent-death
signal (if the Python owner is killed with SIGKILL they get SIGTERM). Their stdout
and stderr go to `<run_dir>/<name>.log`. A watcher thread notices a daemon that
exits on its own and reports it through `on_failure`, which the testbed uses to
abort the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dchlab.testbed.errors import TestbedError
from dchlab.testbed.runrecord import proc_start_time

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _child_setup() -> None:
    # Runs in the child between fork and exec: die with the parent (SIGTERM).
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class Daemon:
    name: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    log_path: Path
    ready: threading.Event = field(default_factory=threading.Event)
    stopping: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join("    " + t for t in text[-lines:])


class Supervisor:
    """Owns the run's daemons. Spawn from the main thread only (PDEATHSIG follows the
    thread that forked)."""

    def __init__(
        self,
        log_dir: Path,
        on_spawn: Callable[[str, int, int | None], None],
        on_failure: Callable[[Daemon, int], None],
    ) -> None:
        self.log_dir = log_dir
        self.daemons: dict[str, Daemon] = {}
        self._on_spawn = on_spawn
        self._on_failure = on_failure
        self._stop_watch = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="dch-supervisor", daemon=True)
        self._watcher.start()

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        ready: str | None = "READY",
        ready_exact: bool = True,
        env: dict[str, str] | None = None,
    ) -> Daemon:
        """Start `argv` as daemon `name`; its output goes to `<log_dir>/<name>.log`.

        `ready`: a line (exact, or a substring if not ready_exact) that means the
        daemon is up; None = up as soon as it runs.
        """
        if name in self.daemons:
            raise TestbedError(f"internal: daemon {name!r} started twice")
        log_path = self.log_dir / f"{name}.log"
        logf = open(log_path, "ab")  # noqa: SIM115 - closed by the reader thread
        log.debug("start %s: %s", name, shlex.join(argv))
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_child_setup,  # spawned from the main thread only
                env=env,
            )
        except FileNotFoundError as exc:
            logf.close()
            raise TestbedError(f"cannot start {name}: {argv[0]} not found") from exc
        d = Daemon(name, list(argv), proc, log_path)
        self.daemons[name] = d
        self._on_spawn(name, proc.pid, proc_start_time(proc.pid))
        if ready is None:
            d.ready.set()
        threading.Thread(
            target=self._pump,
            args=(d, logf, ready, ready_exact),
            name=f"dch-log-{name}",
            daemon=True,
        ).start()
        return d

    @staticmethod
    def _pump(d: Daemon, logf, ready: str | None, exact: bool) -> None:  # type: ignore[no-untyped-def]
        assert d.proc.stdout is not None
        with logf:
            for raw in d.proc.stdout:
                logf.write(raw)
                logf.flush()
                if ready is not None and not d.ready.is_set():
                    line = raw.decode(errors="replace").strip()
                    if (line == ready) if exact else (ready in line):
                        d.ready.set()

    def wait_ready(self, names: Sequence[str], timeout: float = 15.0) -> None:
        """Block until every named daemon said it is ready; raise naming the one that
        died or hung, with the end of its log."""
        deadline = time.monotonic() + timeout
        for name in names:
            d = self.daemons[name]
            while not d.ready.wait(0.02):
                rc = d.proc.poll()
                if rc is not None:
                    time.sleep(0.05)  # let the pump thread write the last lines
                    raise TestbedError(
                        f"{name} exited with status {rc} before it was ready: "
                        f"`{shlex.join(d.argv)}`\n{d.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise TestbedError(
                        f"{name} did not report ready within {timeout:.0f} s: "
                        f"`{shlex.join(d.argv)}`\n{d.log_tail()}"
                    )

    def stop(self, name: str, timeout: float = 5.0, sig: int = signal.SIGTERM) -> int | None:
        """Stop one daemon (SIGTERM, then SIGKILL after `timeout`); returns its status."""
        d = self.daemons.get(name)
        if d is None:
            return None
        d.stopping = True
        if d.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(d.pid, sig)
            try:
                d.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s ignored SIGTERM for %.0f s; killing it", name, timeout)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGKILL)
                d.proc.wait()
        return d.proc.returncode

    def forget(self, name: str) -> None:
        """Drop a stopped daemon, so that its name can be spawned again."""
        d = self.daemons.get(name)
        if d is not None and d.proc.poll() is not None:
            del self.daemons[name]

    def stop_all(
        self,
        waves: Sequence[Sequence[str]] = (),
        timing: dict[str, float] | None = None,
        timeout: float = 5.0,
    ) -> None:
        """Stop every daemon: the names of each wave together (SIGTERM to all of them,
        then wait; SIGKILL after `timeout`), one wave after the other, then all the
        others together. `timing` gets each daemon's exit latency as `stop.<name>` (ms)."""
        self._stop_watch.set()
        seen: set[str] = set()
        groups: list[list[str]] = []
        for wave in waves:
            group = [n for n in wave if n in self.daemons and n not in seen]
            seen.update(group)
            groups.append(group)
        groups.append([n for n in reversed(self.daemons) if n not in seen])
        for group in groups:
            self._stop_together(group, timing, timeout)

    def _stop_together(
        self, names: Sequence[str], timing: dict[str, float] | None, timeout: float
    ) -> None:
        t0 = time.monotonic()
        live = []
        for name in names:
            d = self.daemons[name]
            d.stopping = True
            if d.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGTERM)
                live.append(d)
        deadline = t0 + timeout
        _wait_exits([d.proc for d in live], deadline)
        for d in live:
            try:
                d.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s ignored SIGTERM for %.0f s; killing it", d.name, timeout)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGKILL)
                d.proc.wait()
            if timing is not None:
                timing[f"stop.{d.name}"] = round((time.monotonic() - t0) * 1000, 1)

    def _watch(self) -> None:
        while not self._stop_watch.wait(0.1):
            for d in list(self.daemons.values()):
                if d.stopping:
                    continue
                rc = d.proc.poll()
                if rc is not None:
                    d.stopping = True
                    self._on_failure(d, rc)


def _wait_exits(procs: Sequence[subprocess.Popen[bytes]], deadline: float) -> None:
    """Return as soon as every process in `procs` has exited, or at `deadline`.

    `Popen.wait(timeout)` polls with sleeps that grow to 50 ms, which added up to
    50 ms to every testbed teardown; a pidfd becomes readable the moment its process
    exits. Reaping is left to the caller (`Popen.wait`, immediate after this)."""
    poller = select.poll()
    fds: dict[int, subprocess.Popen[bytes]] = {}
    try:
        for p in procs:
            if p.poll() is not None:
                continue
            try:
                fd = os.pidfd_open(p.pid)
            except OSError:  # no pidfd support, or already reaped: Popen.wait copes
                continue
            fds[fd] = p
            poller.register(fd, select.POLLIN)
        while fds:
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                return
            for fd, _ in poller.poll(left_ms):
                poller.unregister(fd)
                os.close(fd)
                del fds[fd]
    finally:
        for fd in fds:
            os.close(fd)
