"""Testbed: build ue / gw / srv, the emulated channels and a scheme; run programs
on ue; tear everything down (also on SIGINT, SIGTERM and a crashed child).

    with Testbed(TestbedConfig(scheme="all-llc")) as tb:
        r = tb.run_ue(["curl", "-s", "https://server.test/bytes/1000"], capture_output=True)
    print(tb.stats())

Topology (docs/testbed.md):

    ue ──hbc (chanemu)── gw ──veth (or chanemu with server_delay_ms)── srv
       ──llc (chanemu)──              dnsmasq + webreplay on service addresses

With cfg.devices = N > 1: ue1 ... ueN (ue1 is "ue", the measured one) share one LLC
emulator through an llc cell namespace (dchlab.testbed.devices).

The life cycle (normal and prepared ahead) and the API for schemes and users live here;
each part in its own module: namespaces.py (and addresses), hosts.py, links.py
(chanemu), servers.py (dnsmasq, webreplay), schemes/ (agents, routes), ue.py
(workloads), procs.py (daemons), signals.py, teardown.py, runrecord.py (`dch cleanup`).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dchlab.closing import close_on_failure
from dchlab.paths import binary
from dchlab.testbed import devices, llc_share, runrecord, sh, signals
from dchlab.testbed.ca import ensure_ca
from dchlab.testbed.config import TestbedConfig
from dchlab.testbed.errors import TestbedError, TestbedInterrupted
from dchlab.testbed.hosts import host_table
from dchlab.testbed.links import plan_channels, start_links
from dchlab.testbed.namespaces import Namespaces
from dchlab.testbed.procs import Daemon, Supervisor
from dchlab.testbed.schemes import Scheme, get_scheme
from dchlab.testbed.schemes.agent import wants_oracle
from dchlab.testbed.servers import Servers
from dchlab.testbed.teardown import StatsFile, teardown
from dchlab.testbed.timing import Timing
from dchlab.testbed.ue import UePrograms, base_env

log = logging.getLogger(__name__)

__all__ = ["Testbed", "TestbedInterrupted"]  # TestbedInterrupted: its old home


class Testbed:
    """One testbed run. Use as a context manager (or call `start()` / `close()`; an
    unclosed testbed is closed at interpreter exit). Build and use it from one thread
    that outlives it (normally the main one): daemons die with the thread that started
    them (parent-death signal), and only the main thread gets the SIGTERM/SIGHUP
    teardown handlers.

    Attributes available inside the `with` block:
      cfg       the TestbedConfig
      prefix    per-run prefix (`dtb` + 6 hex), part of every name the run creates
      netns     {"ue": name, "gw": name, "srv": name} (namespaces: the part that made them;
                with cfg.devices > 1 also "ue2" ... "ueN" and the cells, "llc-cell" ...)
      run_dir   directory with logs, hosts file, stats files (deleted at exit unless
                cfg.keep_logs)
      hosts     {host name: address} served by the testbed DNS and webreplay
      ca_cert, ca_key  the testbed CA (also $DCH_CA on ue)
      ue_env    environment for programs on ue (DCH_CA, SSL_CERT_FILE, CURL_CA_BUNDLE, ...)
      channels  {"hbc": resolved profile, "llc": resolved profile} (chanemu --profile values)
      offset_ms trace start offset of the HBC (offsets: per link)
      scheme    the Scheme object; namespaces, servers, ue: the parts (their modules)
    """

    __test__ = False

    def __init__(self, cfg: TestbedConfig | None = None) -> None:
        self.cfg = cfg or TestbedConfig()
        self.scheme: Scheme = get_scheme(self.cfg.scheme)
        self.prefix = ""
        self.namespaces: Namespaces | None = None
        self.servers = Servers()
        self.run_dir = Path()
        self.hosts: dict[str, str] = {}
        self.channels: dict[str, str] = {}
        self.offsets: dict[str, int] = {}
        self.offset_ms = 0
        self.ca_cert = Path()
        self.ca_key = Path()
        self.ue_env: dict[str, str] = {}
        self.failure: str | None = None
        self._record: runrecord.RunRecord | None = None
        self._sup: Supervisor | None = None
        self.ue = UePrograms()  # the workloads on ue
        self._stats_files: list[StatsFile] = []
        self._stats: dict[str, Any] = {}
        self._closed = False
        self._closing = False
        self._signals = False  # the shared signal handlers count this testbed
        self._started = time.monotonic()
        #: wall time per setup/teardown phase (ms), in stats()["timing"]
        self.timing = {"setup": Timing(), "teardown": Timing()}
        self._on_ue: list[Callable[[Testbed], None]] = []
        self._prepared = False
        self._active = False  # start() began: a dying daemon interrupts the main thread

    @property
    def netns(self) -> dict[str, str]:
        """{role: namespace name} ({} before the run exists)."""
        return self.namespaces.names if self.namespaces else {}

    @property
    def closing(self) -> bool:
        """close() is under way (signals that arrive meanwhile are held)."""
        return self._closing

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Testbed:
        """Build everything; on any failure tear down what was built and raise."""
        with close_on_failure(self.close):
            self._build()
        return self

    def prepare(self) -> Testbed:
        """Build ahead what does not depend on the configuration — run record, the
        three namespaces (sysctls, ue's resolv.conf) — and run the on_ue hooks if the
        scheme allows (a fresh Chromium starts), so that the testbed of the *next*
        measurement gets ready while the current one ends. `use(cfg)` then gives it
        its real configuration and start() builds the rest (congestion control,
        service addresses, emulators with the new trace offset, servers, scheme)."""
        with close_on_failure(self.close):
            self._create_namespaces()
            self.ca_cert, self.ca_key = ensure_ca()
            self._set_base_env()
            if self.scheme.apps_before_setup:
                self.ue_env.update(self.scheme.env(self))
                self._run_on_ue()
            with self.timing["setup"].phase("servers_ahead"):
                # For the configuration given now (the next load's is usually the same
                # corpus): kept by start() if it matches, else restarted.
                self.hosts = host_table(self.cfg.corpus, self.cfg.hosts)
                self._configure_namespaces()
                self.servers.start(self, self._binary("webreplay"))
        self._prepared = True
        return self

    def use(self, cfg: TestbedConfig) -> Testbed:
        """Give a prepared (not yet started) testbed its configuration."""
        if self._record is None or not self._prepared or self._active:
            raise TestbedError("internal: use() is for a prepared testbed before start()")
        if (cfg.devices, cfg.shared_hbc) != (self.cfg.devices, self.cfg.shared_hbc):
            raise TestbedError(
                f"internal: testbed prepared for devices={self.cfg.devices}, shared_hbc="
                f"{self.cfg.shared_hbc}, used for devices={cfg.devices}, shared_hbc={cfg.shared_hbc}"
            )
        self.cfg = cfg
        self.scheme = get_scheme(cfg.scheme)
        self._record.keep_logs = cfg.keep_logs
        self._record.save()
        return self

    def _set_base_env(self) -> None:
        self.ue_env = base_env(self.ca_cert, prefix=self.prefix, scheme=self.cfg.scheme,
                               run_dir=self.run_dir, ue_netns=self.netns["ue"])  # fmt: skip

    def _build(self) -> None:
        self._active = True
        t = self.timing["setup"]
        with t.phase("inputs"):
            exes = self._check_inputs()
        early = self.scheme.apps_before_setup
        if not self._prepared:
            self._create_namespaces()
            self._set_base_env()
            if early:
                self.ue_env.update(self.scheme.env(self))
                self._run_on_ue()
        else:
            self._set_base_env()
            self.ue_env.update(self.scheme.env(self))
            log.info("testbed %s (prepared ahead): scheme %s", self.prefix, self.cfg.scheme)
        with t.phase("configure"):
            self._configure_namespaces()
        with t.phase("links_servers"):
            # Every emulator and both servers at once, then wait for the emulators.
            links = self.scheme.links(self)
            if self.cfg.devices == 1:
                emulators = start_links(self, exes["chanemu"], links)
            else:
                emulators = devices.start_links(self, exes["chanemu"], links)
            self.servers.ensure(self, exes["webreplay"])
            self.wait_ready(emulators)
        with t.phase("addresses"):
            assert self.namespaces is not None
            if self.cfg.devices == 1:
                self.namespaces.address(links)
            else:
                devices.address(self)
        with t.phase("scheme"):
            self.scheme.setup(self)
            self.ue_env.update(self.scheme.env(self))
        if not early:
            self._run_on_ue()
        with t.phase("servers_ready"):
            self.wait_ready(["dnsmasq", "webreplay"])
        self._check_failure()
        log.info("testbed %s ready in %.2f s", self.prefix, time.monotonic() - self._started)

    def on_ue(self, hook: Callable[[Testbed], None]) -> None:
        """Call `hook(tb)` during `start()` as soon as programs may start on ue: right
        after the namespaces exist (ue has lo and its resolv.conf, no links yet) when the
        scheme allows it (`Scheme.apps_before_setup`), else after the scheme's setup.
        For slow starters that need no network until start() returns (Chromium: it
        starts while emulators, agents and servers come up). The hook must not block
        or send; what it starts with `popen_ue` is stopped at teardown like any
        workload."""
        self._on_ue.append(hook)

    def _run_on_ue(self) -> None:
        with self.timing["setup"].phase("on_ue"):
            for hook in self._on_ue:
                hook(self)

    def _check_inputs(self) -> dict[str, Path]:
        """Everything that can fail before the system is touched: root, binaries,
        channels, hosts, CA. Returns the binaries' paths."""
        if os.geteuid() != 0:
            raise TestbedError("the testbed needs root (network namespaces, TUN devices)")
        devices.check(self.cfg, self.scheme.kind)
        if why := llc_share.refusal(self.cfg.llc_share, self.scheme.kind):
            raise TestbedError(why)
        names = ["chanemu", "webreplay", *self.scheme.required_binaries()]
        exes = {n: self._binary(n) for n in names}
        if shutil.which("dnsmasq") is None:
            raise TestbedError("dnsmasq not found: apt-get install dnsmasq-base")
        plan = plan_channels(self.cfg)
        self.channels, self.offsets = plan.channels, plan.offsets
        self.offset_ms = self.offsets["hbc"]
        self.hosts = host_table(self.cfg.corpus, self.cfg.hosts)
        self.ca_cert, self.ca_key = ensure_ca()
        return exes

    def _create_namespaces(self) -> None:
        """Prefix, run directory, run record, signal handlers, supervisor; then the
        namespaces."""
        t = self.timing["setup"]
        with t.phase("run_record"):
            self._create_run()
        with t.phase("namespaces"):
            assert self.namespaces is not None
            self.namespaces.create(self.cfg.cc)

    def _create_run(self) -> None:
        self.prefix = runrecord.new_prefix()
        self.namespaces = Namespaces(self.prefix, self.cfg.devices, self.cfg.shared_hbc)
        runrecord.RUNS_TMP.mkdir(parents=True, exist_ok=True)
        self.run_dir = runrecord.RUNS_TMP / self.prefix
        self.run_dir.mkdir()
        self._record = runrecord.RunRecord.for_this_process(
            self.prefix, self.run_dir, self.cfg.keep_logs, list(self.netns.values()),
            etc_netns=[str(d) for d in self.namespaces.etc_dirs],
        )  # fmt: skip
        self._record.save()  # before anything exists, so a crash from here on is cleanable
        atexit.register(self.close)  # a Testbed used without `with` and never closed
        self._signals = signals.install(self)
        self._sup = Supervisor(self.run_dir, self._on_spawn, self._on_failure)
        cfg = self.cfg
        log.info("testbed %s: scheme %s, hbc %s, llc %s", self.prefix, cfg.scheme, cfg.hbc, cfg.llc)

    def _configure_namespaces(self) -> None:
        assert self.namespaces is not None
        self.namespaces.configure(self.cfg.cc, self.hosts.values())

    @property
    def oracle_file(self) -> Path | None:
        """Where the HBC emulator publishes its true delay, when an agent argument asks
        for it (`--hbc-owd-oracle auto`, a lab instrument; docs/chanemu.md)."""
        return self.run_dir / "hbc.oracle" if wants_oracle(self.cfg) else None

    def close(self) -> None:
        """Stop everything in order, collect stats, remove every trace of the run.
        Idempotent; never raises for a missing piece."""
        if self._closed or self._closing:
            return
        self._closing = True
        atexit.unregister(self.close)
        with signals.holding():
            try:
                self._teardown()
            finally:
                self._closed = True
                signals.uninstall(self)
                self._signals = False
        signals.raise_held()

    def _teardown(self) -> None:
        self._stats, write_error = teardown(
            self,
            sup=self._sup,
            record=self._record,
            workloads=self.ue,
            stats_files=self._stats_files,
            started=self._started,
        )
        if write_error is not None:
            raise TestbedError(write_error)

    # ------------------------------------------------------------------ for schemes
    def ip(self, role: str | None, args: Sequence[str], step: str) -> str:
        """`ip -n <ns of role> ARGS` (role None = root namespace); raises naming `step`."""
        return sh.ip(self.netns[role] if role else None, args, step)

    def spawn(self, name: str, argv: Sequence[str], *, ns: str | None = None,
              ready: str | None = "READY", ready_exact: bool = True) -> Daemon:  # fmt: skip
        """Start a supervised daemon (inside namespace role `ns` if given). Its death
        before teardown aborts the run."""
        assert self._sup is not None
        full = sh.netns_exec(self.netns[ns], argv) if ns else list(argv)
        return self._sup.spawn(name, full, ready=ready, ready_exact=ready_exact)

    def stop_daemon(self, name: str) -> None:
        """Stop the daemon `name` if it runs and forget it, so that it may be spawned
        anew (a prepared testbed's servers replaced)."""
        assert self._sup is not None
        if name in self._sup.daemons:
            self._sup.stop(name)
            self._sup.forget(name)

    def wait_ready(self, names: Sequence[str], timeout: float = 15.0) -> None:
        assert self._sup is not None
        self._sup.wait_ready(names, timeout)

    def expect_stats(self, section: str, key: str, filename: str) -> Path:
        """Declare that a daemon writes `run_dir/filename` at exit; it lands in
        stats()[section][key]. Returns the path to pass to the daemon. Declaring the
        same file again (e.g. a daemon restarted with the same arguments) changes nothing."""
        path = self.run_dir / filename
        if (section, key, path) not in self._stats_files:
            self._stats_files.append((section, key, path))
        return path

    # ------------------------------------------------------------------ for users
    def ue_argv(self, cmd: Sequence[str] | str, device: str = "ue") -> list[str]:
        """The full argv that runs `cmd` on ue (a string runs through `sh -c`);
        `device`: another device's role (ue2 ... ueN, cfg.devices > 1)."""
        if device not in (self.namespaces.device_roles if self.namespaces else ["ue"]):
            raise TestbedError(
                f"no device {device!r} in this testbed (devices = {self.cfg.devices})"
            )
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        return sh.netns_exec(self.netns[device], self.scheme.wrap(self, argv))

    def popen_ue(self, cmd: Sequence[str] | str, *, device: str = "ue", **kw: Any) -> subprocess.Popen[Any]:  # fmt: skip
        """Start `cmd` on ue (or on `device`, as ue_argv) (subprocess.Popen keyword
        arguments accepted; `env` is added to the testbed environment). Killed at
        teardown if still running."""
        self._check_failure()
        env = self._ue_env(kw.pop("env", None))
        return self.ue.popen(self.ue_argv(cmd, device), env, **kw)

    def run_ue(self, cmd: Sequence[str] | str, *, input: Any = None, timeout: float | None = None,
               check: bool = False, capture_output: bool = False, device: str = "ue",
               **kw: Any) -> subprocess.CompletedProcess[Any]:  # fmt: skip
        """Run `cmd` on ue (or on `device`, as ue_argv) to completion, like
        subprocess.run (same keywords).

        Raises TestbedError if a testbed component died meanwhile (the command is
        then killed), subprocess.TimeoutExpired after `timeout`.
        """
        self._check_failure()
        env = self._ue_env(kw.pop("env", None))
        res = self.ue.run(self.ue_argv(cmd, device), env, input=input, timeout=timeout,
                          capture_output=capture_output, **kw)  # fmt: skip
        self._check_failure()
        if check:
            res.check_returncode()
        return res

    def _ue_env(self, extra: dict[str, str] | None) -> dict[str, str]:
        return {**os.environ, **self.ue_env, **(extra or {})}

    def stats(self) -> dict[str, Any]:
        """The run's stats: config, per-link chanemu counters, per-agent stats, ue/gw
        interface counters, scheme extras (mptcp subflows). Complete after the run
        has been closed (daemons write their counters when they stop)."""
        if not self._closed:
            return {"prefix": self.prefix, **self.cfg.describe(), "running": True}
        return self._stats

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _binary(name: str) -> Path:
        try:
            return binary(name)
        except FileNotFoundError as exc:
            raise TestbedError(str(exc)) from exc

    def _on_spawn(self, name: str, pid: int, start: int | None) -> None:
        assert self._record is not None
        self._record.procs.append(runrecord.ProcEntry(name, pid, start))
        self._record.save()

    def _on_failure(self, d: Daemon, rc: int) -> None:
        """Called from the supervisor thread when a daemon exits on its own."""
        if self._closing:
            return
        self.failure = f"{d.name} exited unexpectedly with status {rc}; run aborted\n{d.log_tail()}"
        log.error("%s", self.failure)
        self.ue.stop_all(grace=0.5)
        if self._signals and self._active:
            # Wake the main thread wherever it is (our SIGTERM handler raises). A testbed
            # only prepared ahead is not in use: start() reports its failure.
            signals.wake_main()

    def _check_failure(self) -> None:
        if self.failure:
            raise TestbedError(self.failure)
