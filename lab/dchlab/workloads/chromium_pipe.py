"""A fresh Chromium on `ue`, driven from the lab process over --remote-debugging-pipe.

The DevTools *socket* would live on ue's loopback, out of the root namespace's reach,
which is why `dchlab.workloads.browser` used to run as a Python process inside ue. A
pipe crosses namespaces: Chromium reads CDP commands on fd 3 and writes replies and
events on fd 4 (NUL-terminated JSON), so the lab process starts Chromium with
`tb.popen_ue` and drives the load itself (browser._drive, the same code as the
subprocess driver) — no Python start and no websocket per load.

What stays per load: a new Chromium process, a new --user-data-dir (cold HTTP and DNS
caches, no cookies, HSTS or TLS sessions), new TCP/TLS connections. Launching does not
wait for Chromium: `launch()` only starts it, so the testbed can go on building (agents
waiting for their first RTT estimates) while Chromium starts; `load()` waits for its
first CDP reply. When the load is measured the browser is SIGKILLed (its profile is
thrown away, so a graceful shutdown would only cost time).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from dchlab import protocol
from dchlab.workloads import browser as B

log = logging.getLogger(__name__)

#: FLAGS without the DevTools socket, plus the pipe.
PIPE_FLAGS = [f for f in B.FLAGS if not f.startswith("--remote-debugging-")] + [
    "--remote-debugging-pipe"
]
READY_TIMEOUT_S = 20.0
#: Least time between Chromium attaching and the navigation. After the first CDP reply
#: Chromium is still starting (network service, renderer, GPU process); a navigation
#: right then pays that start-up inside the PLT. Measured on MM-S (fig3, 40 pages):
#: loads that navigated at once were ~100 ms slower than loads whose browser had been
#: prepared ahead (attached for ~1 s). $DCH_BROWSER_SETTLE_S overrides.
SETTLE_S = float(os.environ.get("DCH_BROWSER_SETTLE_S", "0.5"))


class PipeSocket:
    """The CDP transport over the two pipes, with the interface browser.CDP uses
    (`await send(text)`, `async for message in ...`)."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd

    async def send(self, text: str) -> None:
        data = memoryview(text.encode() + b"\0")
        while data:  # commands are small; the pipe buffer takes them at once
            n = os.write(self.wfd, data)
            data = data[n:]

    def __aiter__(self) -> AsyncIterator[str]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        buf = bytearray()

        def readable() -> None:
            try:
                chunk = os.read(self.rfd, 1 << 20)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                loop.remove_reader(self.rfd)
                queue.put_nowait(None)
                return
            buf.extend(chunk)
            while (i := buf.find(b"\0")) >= 0:
                queue.put_nowait(buf[:i].decode(errors="replace"))
                del buf[: i + 1]

        os.set_blocking(self.rfd, False)
        loop.add_reader(self.rfd, readable)
        try:
            while (msg := await queue.get()) is not None:
                yield msg
        finally:
            loop.remove_reader(self.rfd)


class PipeChromium:
    """One fresh Chromium. `launch(popen)` starts it (popen: e.g. `tb.popen_ue`, taking
    argv and subprocess.Popen keywords) and, in a thread, waits for it, attaches to its
    page and enables the CDP domains — Chromium's own start-up (~0.4-0.7 s here) — while
    the caller goes on; `load(url)` navigates once that is done and the caller is
    ready; `close()` kills the browser (idempotent)."""

    def __init__(
        self,
        home: Path,
        profile: Path,
        log_path: Path,
        chromium: str | None = None,
        flags: Sequence[str] = (),
    ):
        self.home, self.profile, self.log_path = home, profile, log_path
        self.chromium = chromium or B.CHROMIUM
        self.flags = list(flags)  # the load's own (dchlab.protocol.chromium_flags)
        self.proc: subprocess.Popen[bytes] | None = None
        self.res = B.LoadResult("")
        self._fds: list[int] = []  # ours: [read events, write commands]
        self._t_launch = self._t_ready = self._t_go = self._t_start = 0.0
        self._deadline = 0.0
        self._go = threading.Event()
        self._loaded = threading.Event()  # the load event fired: the PLT is measured
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._url = ""
        self._timeout_s = 60.0
        self._error: BaseException | None = None
        #: Speed Index / atf_ms for this load (None: $DCH_SPEED_INDEX decides)
        self.speed_index: bool | None = None

    def argv(self, cmd_fd: int, ev_fd: int) -> list[str]:
        # fds >= 10 in the child are moved to 3 (commands) and 4 (events) by the shell
        # that then execs Chromium (the scheme may wrap it: mptcpize, a proxy wrapper);
        # bash, since dash takes single-digit fds only.
        move = f'exec "$@" 3<&{cmd_fd} 4>&{ev_fd} {cmd_fd}<&- {ev_fd}>&-'
        return ["bash", "-c", move, "chromium", self.chromium, *PIPE_FLAGS, *self.flags,
                f"--user-data-dir={self.profile}", "about:blank"]  # fmt: skip

    def launch(self, popen: Callable[..., subprocess.Popen[bytes]]) -> None:
        B.prepare_profile(self.profile)
        self.home.mkdir(parents=True, exist_ok=True)
        cmd_r, cmd_w = os.pipe()
        ev_r, ev_w = os.pipe()
        child = [fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10),
                 fcntl.fcntl(ev_w, fcntl.F_DUPFD_CLOEXEC, 10)]  # fmt: skip
        for fd in (cmd_r, ev_w):
            os.close(fd)
        self._fds = [ev_r, cmd_w]
        self._t_launch = time.monotonic()
        try:
            with open(self.log_path, "ab") as log:
                self.proc = popen(
                    self.argv(child[0], child[1]),
                    pass_fds=tuple(child),
                    env=B.chromium_env(self.home, self.profile),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,  # its own process group: killed as a whole
                )
        finally:
            for fd in child:
                os.close(fd)
        self._thread = threading.Thread(target=self._run, name="dch-chromium", daemon=True)
        self._thread.start()

    def navigate(self, url: str, timeout_s: float) -> None:
        """Load `url` once the browser is attached (and has settled); returns at once.
        Then `wait_loaded()` (optional) and `finish()`."""
        self._t_start = time.monotonic()
        self.res.url = url
        self._url, self._timeout_s = url, timeout_s
        self._deadline = time.monotonic() + READY_TIMEOUT_S + timeout_s + 30
        self._t_go = time.monotonic()
        self._go.set()

    def wait_loaded(self) -> bool:
        """Wait until the page's load event fired (its PLT is measured; only the quiet
        tail is left): True; False if the load ended or failed first."""
        while not self._done.wait(0.005) and time.monotonic() < self._deadline:
            if self._loaded.is_set():
                return True
        return False

    def finish(self) -> B.LoadResult:
        """Wait for the load to end, kill the browser; the driver's verdict. timing:
        launch (start until attached), ready_wait (what navigate waited for that),
        settle_wait (then until SETTLE_S after attaching), attached_for (attached until
        navigating), load, tail, timing, stop."""
        res = self.res
        if self._thread is None:
            res.invalid_reason = "driver error: chromium was not launched"
        elif not self._done.wait(max(0.0, self._deadline - time.monotonic())):
            res.invalid_reason = f"driver error: no result after {self._timeout_s:.0f} s"
        elif isinstance(self._error, TimeoutError):
            res.invalid_reason = res.invalid_reason or f"timeout after {self._timeout_s:.0f} s"
        elif self._error is not None:
            res.invalid_reason = res.invalid_reason or (
                f"driver error: {self._error}{self._log_tail()}"
            )
        t0 = time.monotonic()
        self.close()
        res.timing["stop"] = round((time.monotonic() - t0) * 1000, 1)
        B.finish(res)
        res.driver_ms = (time.monotonic() - self._t_start) * 1000
        return res

    def load(self, url: str, timeout_s: float) -> B.LoadResult:
        """navigate() and finish(): one load, nothing done during its tail."""
        self.navigate(url, timeout_s)
        return self.finish()

    def _run(self) -> None:
        try:
            asyncio.run(self._session())
        except BaseException as e:  # reported by load()
            self._error = e
        finally:
            self._done.set()

    async def _session(self) -> None:
        res = self.res
        cdp = B.CDP(PipeSocket(self._fds[0], self._fds[1]))
        try:
            await asyncio.wait_for(cdp.send("Browser.getVersion"), READY_TIMEOUT_S)
            sid = await asyncio.wait_for(B.attach(cdp), READY_TIMEOUT_S)
        except TimeoutError as e:
            raise RuntimeError(f"chromium not attached within {READY_TIMEOUT_S:.0f} s") from e
        self._t_ready = time.monotonic()
        res.timing["launch"] = round((self._t_ready - self._t_launch) * 1000, 1)
        while not self._go.is_set():  # no executor thread: it would block interpreter exit
            await asyncio.sleep(0.005)
        if self.proc is None:  # closed without a load
            return
        res.timing["ready_wait"] = round(max(0.0, self._t_ready - self._t_go) * 1000, 1)
        settle = self._t_ready + SETTLE_S - time.monotonic()
        res.timing["settle_wait"] = round(max(0.0, settle) * 1000, 1)
        if settle > 0:
            await asyncio.sleep(settle)
        # how long the browser had been up when it navigated (prepared ahead: longer)
        res.timing["attached_for"] = round((time.monotonic() - self._t_ready) * 1000, 1)
        while not cdp.events.empty():  # start-up chatter (about:blank), not the page's
            cdp.events.get_nowait()
        await self.drive(cdp, sid)

    async def drive(self, cdp: B.CDP, sid: str) -> None:
        """What the browser does once attached and told to go: load the one URL into
        `self.res`. A subclass may drive it otherwise (dchlab.workloads.session: several
        pages in one browser)."""
        await asyncio.wait_for(
            B.navigate(
                cdp,
                sid,
                self._url,
                self.res,
                self._timeout_s,
                self._loaded.set,
                speed_index=self.speed_index,
            ),
            self._timeout_s + 15,
        )

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return ("\n" + "\n".join(text[-8:])) if text else ""

    def close(self) -> None:
        """Kill the browser's process group at once (its profile is thrown away, so a
        graceful shutdown would only cost time); reap it in the background."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            threading.Thread(target=proc.wait, name="dch-chromium-reap", daemon=True).start()
        self._go.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []


_Browser = TypeVar("_Browser", bound=PipeChromium)


def launch_browser(tb: Any, timing: dict[str, float], kind: type[_Browser], **kw: Any) -> _Browser:
    """Start a fresh Chromium of class `kind` (PipeChromium or a subclass, which takes
    its own arguments `kw`) on tb's ue (NSS db trusting the testbed CA, new profile in
    the run directory) without waiting for it; `timing["nss_db"]`: the db's copy (ms)."""
    from dchlab.testbed import copy_nss_db

    home = tb.run_dir / "chromium-home"
    t0 = time.monotonic()
    copy_nss_db(home / ".pki" / "nssdb", tb.ca_cert)
    timing["nss_db"] = round((time.monotonic() - t0) * 1000, 1)
    b = kind(
        home,
        tb.run_dir / "chromium-profile",
        tb.run_dir / "chromium.log",
        chromium_for(tb.ue_env),
        browser_flags(tb.cfg),
        **kw,
    )
    b.launch(tb.popen_ue)
    return b


def browser_flags(cfg: Any) -> list[str]:
    """Chromium flags a load of testbed configuration `cfg` needs beyond FLAGS: its
    protocol's (QUIC forced for the testbed's hosts under h3; dchlab.protocol). From the
    configuration, not the testbed, so a browser prepared ahead can be checked against
    the configuration of the load that takes it (dchlab.workloads.pool)."""
    if not protocol.quic_hosts(cfg.protocol, ["?"]):
        return []  # no host goes over QUIC: no need to read the corpus' hosts
    from dchlab.testbed.hosts import host_table

    return protocol.chromium_flags(cfg.protocol, host_table(cfg.corpus, cfg.hosts))


def chromium_for(env: dict[str, Any]) -> str:
    """The Chromium binary a scheme asks for (objproxy: a proxy wrapper) or the default."""
    return str(env.get("DCH_CHROMIUM") or B.CHROMIUM)
