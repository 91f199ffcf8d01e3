"""Testbed: build ue / gw / srv, the emulated channels and a scheme; run programs
on ue; tear everything down (also on SIGINT, SIGTERM and a crashed child).

    with Testbed(TestbedConfig(scheme="all-llc")) as tb:
        r = tb.run_ue(["curl", "-s", "https://server.test/bytes/1000"], capture_output=True)
    print(tb.stats())

Topology (docs/testbed.md):

    ue ──hbc (chanemu)── gw ──veth (or chanemu with server_delay_ms)── srv
       ──llc (chanemu)──              dnsmasq + webreplay on service addresses
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from dchlab.closing import close_on_failure
from dchlab.paths import binary
from dchlab.testbed import addressing as A
from dchlab.testbed import channels as ch
from dchlab.testbed import runrecord, sh
from dchlab.testbed.ca import ensure_ca
from dchlab.testbed.cc import allowing, set_netns_cc
from dchlab.testbed.config import TestbedConfig
from dchlab.testbed.errors import TestbedError
from dchlab.testbed.links import chanemu_argv
from dchlab.testbed.procs import Daemon, Supervisor
from dchlab.testbed.schemes import Scheme, get_scheme
from dchlab.testbed.schemes.agent import wants_oracle
from dchlab.testbed.timing import Timing

log = logging.getLogger(__name__)

ROLES = ("ue", "gw", "srv")
RUNS_TMP = runrecord.RUNS_TMP


class Testbed:
    """One testbed run. Use as a context manager (or call `start()` / `close()`; an
    unclosed testbed is closed at interpreter exit). Build and use it from one thread
    that outlives it (normally the main one): daemons die with the thread that started
    them (parent-death signal), and only the main thread gets the SIGTERM/SIGHUP
    teardown handlers.

    Attributes available inside the `with` block:
      cfg       the TestbedConfig
      prefix    per-run prefix (`dtb` + 6 hex), part of every name the run creates
      netns     {"ue": name, "gw": name, "srv": name}
      run_dir   directory with logs, hosts file, stats files (deleted at exit unless
                cfg.keep_logs)
      hosts     {host name: address} served by the testbed DNS and webreplay
      ca_cert, ca_key  the testbed CA (also $DCH_CA on ue)
      ue_env    environment for programs on ue (DCH_CA, SSL_CERT_FILE, CURL_CA_BUNDLE, ...)
      channels  {"hbc": resolved profile, "llc": resolved profile} (chanemu --profile values)
      offset_ms trace start offset of the HBC (offsets: per link)
      scheme    the Scheme object
    """

    __test__ = False

    def __init__(self, cfg: TestbedConfig | None = None) -> None:
        self.cfg = cfg or TestbedConfig()
        self.scheme: Scheme = get_scheme(self.cfg.scheme)
        self.prefix = ""
        self.netns: dict[str, str] = {}
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
        self._workloads: list[subprocess.Popen[Any]] = []
        self._stats_files: list[tuple[str, str, Path]] = []
        self._stats: dict[str, Any] = {}
        self._closed = False
        self._closing = False
        self._old_handlers: dict[int, Any] = {}
        self._started = time.monotonic()
        #: wall time per setup/teardown phase (ms), in stats()["timing"]
        self.timing = {"setup": Timing(), "teardown": Timing()}
        self._on_ue: list[Callable[[Testbed], None]] = []
        self._prepared = False
        self._cc = ""  # congestion control the namespaces have
        self._servers_key: tuple[object, ...] | None = None  # config of running servers
        self._active = False  # start() began: a dying daemon interrupts the main thread

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
            t = self.timing["setup"]
            with t.phase("run_record"):
                self._create_run()
            with t.phase("namespaces"):
                self._make_namespaces()
            self.ca_cert, self.ca_key = ensure_ca()
            self._set_base_env()
            if self.scheme.apps_before_setup:
                self.ue_env.update(self.scheme.env(self))
                self._run_on_ue()
            with t.phase("servers_ahead"):
                # For the configuration given now (the next load's is usually the same
                # corpus): kept by start() if it matches, else restarted.
                self.hosts = self._host_table()
                self._configure_namespaces()
                self._spawn_servers({"webreplay": self._binary("webreplay")})
        self._prepared = True
        return self

    def use(self, cfg: TestbedConfig) -> Testbed:
        """Give a prepared (not yet started) testbed its configuration."""
        if self._record is None or not self._prepared or self._active:
            raise TestbedError("internal: use() is for a prepared testbed before start()")
        self.cfg = cfg
        self.scheme = get_scheme(cfg.scheme)
        self._record.keep_logs = cfg.keep_logs
        self._record.save()
        return self

    def _set_base_env(self) -> None:
        self.ue_env = {
            "DCH_CA": str(self.ca_cert),
            "SSL_CERT_FILE": str(self.ca_cert),
            "CURL_CA_BUNDLE": str(self.ca_cert),
            "REQUESTS_CA_BUNDLE": str(self.ca_cert),
            "NODE_EXTRA_CA_CERTS": str(self.ca_cert),
            "DCH_PREFIX": self.prefix,
            "DCH_SCHEME": self.cfg.scheme,
            "DCH_RUN_DIR": str(self.run_dir),
            "DCH_NETNS_UE": self.netns["ue"],
        }

    def _build(self) -> None:
        self._active = True
        t = self.timing["setup"]
        with t.phase("inputs"):
            exes = self._check_inputs()
        early = self.scheme.apps_before_setup
        if not self._prepared:
            with t.phase("run_record"):
                self._create_run()
            with t.phase("namespaces"):
                self._make_namespaces()
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
            links = self._start_links_and_servers(exes)
        with t.phase("addresses"):
            self._address(links)
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
        cfg = self.cfg
        if os.geteuid() != 0:
            raise TestbedError("the testbed needs root (network namespaces, TUN devices)")
        names = ["chanemu", "webreplay", *self.scheme.required_binaries()]
        exes = {n: self._binary(n) for n in names}
        if shutil.which("dnsmasq") is None:
            raise TestbedError("dnsmasq not found: apt-get install dnsmasq-base")
        tseed = cfg.seed if cfg.trace_seed is None else cfg.trace_seed
        self.channels = {
            "hbc": ch.resolve_channel(cfg.hbc, tseed),
            "llc": ch.resolve_channel(cfg.llc, tseed),
        }
        # of the resolved profiles: the trace seed chose the traces, the seed the offset
        self.offsets = {
            x: ch.trace_offset_ms(self.channels[x], cfg.seed, cfg.offset_fraction)
            for x in ("hbc", "llc")
        }
        # The ideal link has one offset: the HBC's (its capacity trace), unless only the
        # LLC (its delay trace) is trace-driven.
        self.offsets["ideal"] = self.offsets["hbc"] or self.offsets["llc"]
        self.offset_ms = self.offsets["hbc"]
        self.hosts = self._host_table()
        self.ca_cert, self.ca_key = ensure_ca()
        return exes

    def _create_run(self) -> None:
        """Prefix, run directory, run record, signal handlers, supervisor."""
        self.prefix = runrecord.new_prefix()
        self.netns = {r: f"{self.prefix}-{r}" for r in ROLES}
        RUNS_TMP.mkdir(parents=True, exist_ok=True)
        self.run_dir = RUNS_TMP / self.prefix
        self.run_dir.mkdir()
        self._record = runrecord.RunRecord(
            prefix=self.prefix,
            owner_pid=os.getpid(),
            owner_start=runrecord.proc_start_time(os.getpid()),
            run_dir=str(self.run_dir),
            keep_logs=self.cfg.keep_logs,
            netns=list(self.netns.values()),
            etc_netns=[f"/etc/netns/{self.netns['ue']}"],
        )
        self._record.save()  # before anything exists, so a crash from here on is cleanable
        atexit.register(self.close)  # a Testbed used without `with` and never closed
        self._install_signal_handlers()
        self._sup = Supervisor(self.run_dir, self._on_spawn, self._on_failure)
        cfg = self.cfg
        log.info("testbed %s: scheme %s, hbc %s, llc %s", self.prefix, cfg.scheme, cfg.hbc, cfg.llc)

    def _make_namespaces(self) -> None:
        """ue, gw, srv with lo up, their sysctls (congestion control included) and ue's
        resolv.conf: two processes per namespace."""
        for role, ns in self.netns.items():
            sh.run(["ip", "netns", "add", ns], f"create namespace {role} ({ns})")
        cc = self.cfg.cc
        with allowing(cc):
            for role, ns in self.netns.items():
                settings = {
                    "net.ipv4.conf.all.rp_filter": "0",
                    "net.ipv4.conf.default.rp_filter": "0",
                    # IPv4 only: no router solicitations or DAD chatter on the channels.
                    "net.ipv6.conf.all.disable_ipv6": "1",
                    "net.ipv6.conf.default.disable_ipv6": "1",
                    "net.ipv4.tcp_congestion_control": cc,
                }
                if role == "gw":
                    settings["net.ipv4.ip_forward"] = "1"
                args = [f"{k}={v}" for k, v in settings.items()]
                script = 'ip link set lo up && exec sysctl -q -w "$@"'
                sh.run(["ip", "netns", "exec", ns, "sh", "-c", script, "sh", *args],
                       f"lo and sysctls in {role}")  # fmt: skip
        self._cc = cc
        etc = Path(f"/etc/netns/{self.netns['ue']}")
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text(
            f"nameserver {A.DNS_SERVER}\noptions timeout:2 attempts:2\n"
        )

    def _configure_namespaces(self) -> None:
        """Congestion control everywhere; the service addresses in srv (before the
        servers bind them)."""
        if self.cfg.cc != self._cc:  # prepared with another one
            set_netns_cc(list(self.netns.values()), self.cfg.cc)
            self._cc = self.cfg.cc
        svc = sorted(set(self.hosts.values()) | {A.DNS_SERVER})
        # replace: idempotent when a prepared testbed added them already
        lines = [f"addr replace {a}/32 dev lo" for a in svc]
        sh.ip_batch(self.netns["srv"], lines, "add service addresses in srv")

    def _start_links_and_servers(self, exes: dict[str, Path]) -> dict[str, str]:
        """Start every emulator and both servers at once, then wait for the emulators.
        Returns the scheme's links {name: profile}."""
        cfg = self.cfg
        links = self.scheme.links(self)
        for name, profile in links.items():
            if name not in A.LINKS:
                raise TestbedError(f"scheme {cfg.scheme}: unknown link {name!r}")
            off = self.offsets.get(name, self.offset_ms)
            self._spawn_chanemu(exes["chanemu"], name, profile, "ue", name, "gw", name, off)
        emulators = [f"link-{n}" for n in links]
        if cfg.server_delay_ms > 0:
            path = self.run_dir / "srvpath.toml"
            prof = ch.write_profile(ch.server_path_profile(cfg.server_delay_ms), path)
            self._spawn_chanemu(
                exes["chanemu"], "srvpath", str(prof), "gw", "srv0", "srv", "gw0", 0
            )
            emulators.append("link-srvpath")
        else:
            veth = ["link", "add", "srv0", "type", "veth", "peer", "name", "gw0", "netns", self.netns["srv"]]  # fmt: skip
            self.ip("gw", veth, "create gw-srv veth")
        if self._servers_key != self._server_config(exes):
            self._spawn_servers(exes)
        self.wait_ready(emulators)
        return links

    def _server_config(self, exes: dict[str, Path]) -> tuple[object, ...]:
        """What the servers depend on: a prepared testbed's servers are kept if equal."""
        corpus = str(Path(self.cfg.corpus).resolve()) if self.cfg.corpus else ""
        wr_args = (*self.scheme.webreplay_args(self), *self.cfg.webreplay_args)
        return (str(exes["webreplay"]), corpus, tuple(sorted(self.hosts.items())), wr_args)

    def _spawn_servers(self, exes: dict[str, Path]) -> None:
        """dnsmasq and webreplay in srv (replacing those a prepared testbed started)."""
        assert self._sup is not None
        for name in ("dnsmasq", "webreplay"):
            if name in self._sup.daemons:
                self._sup.stop(name)
                self._sup.forget(name)
        cfg = self.cfg
        hosts_file = self.run_dir / "hosts"
        hosts_file.write_text("".join(f"{ip} {h}\n" for h, ip in self.hosts.items()))
        self.spawn(
            "dnsmasq",
            ["dnsmasq", "-k", "-C", "/dev/null", "--no-resolv", "--no-hosts",
             "--addn-hosts", str(hosts_file), "--listen-address", A.DNS_SERVER,
             "--bind-interfaces", "--user=root", "--pid-file=" + str(self.run_dir / "dnsmasq.pid"),
             "--log-facility=-", "--log-queries", "--local-ttl=60"],
            ns="srv", ready="started, version", ready_exact=False,
        )  # fmt: skip
        wr = [str(exes["webreplay"]), "--hosts", str(hosts_file), "--ca-cert", str(self.ca_cert),
              "--ca-key", str(self.ca_key), "--access-log", str(self.run_dir / "access.log"),
              "--grace-ms", "0"]  # fmt: skip
        if cfg.corpus:
            wr += ["--corpus", str(Path(cfg.corpus).resolve())]
        wr += [*self.scheme.webreplay_args(self), *cfg.webreplay_args]
        self.spawn("webreplay", wr, ns="srv")
        self._servers_key = self._server_config(exes)

    def _address(self, links: dict[str, str]) -> None:
        """Point-to-point addresses on every link and the gw-srv path; srv and gw routes
        (ue's default route is the scheme's)."""
        # One `ip -batch` per namespace (the step names the namespace and the lines).
        sp = A.SRV_PATH
        ue, gw = [], []
        for name in links:
            p = A.LINKS[name]
            ue.append(f"addr add {p.near} peer {p.far} dev {name}")
            gw.append(f"addr add {p.far} peer {p.near} dev {name}")
        gw += [f"addr add {sp.near} peer {sp.far} dev srv0", "link set srv0 up",
               f"route add {A.SERVICE_NET} via {sp.far} dev srv0"]  # fmt: skip
        srv = [f"addr add {sp.far} peer {sp.near} dev gw0", "link set gw0 up",
               f"route add default via {sp.near} dev gw0"]  # fmt: skip
        sh.ip_batch(self.netns["ue"], ue, "address the links in ue: " + "; ".join(ue))
        sh.ip_batch(self.netns["gw"], gw, "address links, gw-srv path, route to the servers in gw")
        sh.ip_batch(self.netns["srv"], srv, "address gw-srv path, default route in srv")

    @property
    def oracle_file(self) -> Path | None:
        """Where the HBC emulator publishes its true delay, when an agent argument asks
        for it (`--hbc-owd-oracle auto`, a lab instrument; docs/chanemu.md)."""
        return self.run_dir / "hbc.oracle" if wants_oracle(self.cfg) else None

    def _spawn_chanemu(self, exe: Path, name: str, profile: str, ns_a: str, dev_a: str,
                       ns_b: str, dev_b: str, offset: int) -> None:  # fmt: skip
        stats = self.expect_stats("links", name, f"chanemu-{name}.json")
        pcap_prefix = None
        if self.cfg.pcap_dir:
            pcap_dir = Path(self.cfg.pcap_dir).resolve()
            pcap_dir.mkdir(parents=True, exist_ok=True)
            pcap_prefix = pcap_dir / name  # <name>-uplink.pcap, <name>-downlink.pcap
        argv = chanemu_argv(
            exe, profile, ns_a=self.netns[ns_a], dev_a=dev_a, ns_b=self.netns[ns_b],
            dev_b=dev_b, seed=self.cfg.seed, offset_ms=offset, stats=stats,
            oracle_file=self.oracle_file if name == "hbc" else None, pcap_prefix=pcap_prefix,
        )  # fmt: skip
        self.spawn(f"link-{name}", argv)

    def close(self) -> None:
        """Stop everything in order, collect stats, remove every trace of the run.
        Idempotent; never raises for a missing piece."""
        if self._closed or self._closing:
            return
        self._closing = True
        atexit.unregister(self.close)
        # A Ctrl-C or SIGTERM must not cut the teardown short (it takes well under a
        # second), nor be lost: it is held (_hold_signal) and acted on once the
        # testbed is gone. A SIGINT ignored on entry (a background job) stays ignored.
        main = threading.current_thread() is threading.main_thread()
        old_int = None
        if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            old_int = signal.signal(signal.SIGINT, _hold_signal)
        try:
            self._teardown()
        finally:
            self._closed = True
            self._restore_signal_handlers()
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
        if main:
            _raise_held_signal()

    def _teardown(self) -> None:
        stats: dict[str, Any] = {
            "prefix": self.prefix,
            **self.cfg.describe(),
            "kind": self.scheme.kind,
            "channels": dict(self.channels),
            "offset_ms": self.offset_ms,
            "offsets": dict(self.offsets),
            "duration_s": round(time.monotonic() - self._started, 3),
        }
        write_error: OSError | None = None
        t = self.timing["teardown"]
        stats["timing"] = {k: v.ms for k, v in self.timing.items()}
        try:
            if self.failure:
                stats["failure"] = self.failure
            with t.phase("workloads"):  # signalled now, waited for while daemons stop
                for p in self._workloads:
                    if p.poll() is None:
                        with contextlib.suppress(ProcessLookupError):
                            p.terminate()
            if self._sup is not None and self.netns:
                self._collect(stats)
            with t.phase("workloads"):
                for p in self._workloads:
                    _terminate(p)
            self._stats = stats
            try:
                if self.cfg.stats_path:
                    Path(self.cfg.stats_path).write_text(json.dumps(stats, indent=2) + "\n")
                if self._record is not None and self.cfg.keep_logs:
                    (self.run_dir / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
            except OSError as exc:
                write_error = exc
        finally:
            # Whatever failed above, the run's namespaces and processes go.
            if self._record is not None:
                with t.phase("remove"):
                    removed = runrecord.teardown_record(self._record)
                log.debug("teardown %s removed: %s", self.prefix, removed)
        if write_error is not None:
            raise TestbedError(f"cannot write stats to {self.cfg.stats_path}: {write_error}")

    def _collect(self, stats: dict[str, Any]) -> None:
        """Live counters, then stop the daemons (they write their stats) and read them."""
        assert self._sup is not None
        t = self.timing["teardown"]
        with t.phase("counters"):
            try:
                stats.update(self.scheme.collect(self))
            except Exception as exc:  # stats are best effort at teardown
                stats["collect_error"] = str(exc)
            stats["interfaces"] = self._interface_counters()
        # All together (agents ~60 ms to flush their stats, emulators ~100 ms, no longer
        # one after the other); SIGTERM to the scheme's stop_first() daemons and the
        # servers first. webreplay runs with --grace-ms 0: the workload is gone, so it
        # need not wait for FINs of its connections that the stopping path may drop.
        waves = [[*self.scheme.stop_first(), "webreplay", "dnsmasq", *self._sup.daemons]]
        with t.phase("stop_daemons"):
            self._sup.stop_all(waves, timing=t.ms)
        for section, key, path in self._stats_files:
            try:
                stats.setdefault(section, {})[key] = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                stats.setdefault(section, {})[key] = {"error": f"no stats from {path.name}: {exc}"}
        try:  # after the daemons stopped (logs flushed), before the run dir goes
            self.scheme.after_stop(self, stats)
        except Exception as exc:
            stats["after_stop_error"] = str(exc)

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

    def wait_ready(self, names: Sequence[str], timeout: float = 15.0) -> None:
        assert self._sup is not None
        self._sup.wait_ready(names, timeout)

    def expect_stats(self, section: str, key: str, filename: str) -> Path:
        """Declare that a daemon writes `run_dir/filename` at exit; it lands in
        stats()[section][key]. Returns the path to pass to the daemon."""
        path = self.run_dir / filename
        self._stats_files.append((section, key, path))
        return path

    # ------------------------------------------------------------------ for users
    def ue_argv(self, cmd: Sequence[str] | str) -> list[str]:
        """The full argv that runs `cmd` on ue (a string runs through `sh -c`)."""
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        return sh.netns_exec(self.netns["ue"], self.scheme.wrap(self, argv))

    def popen_ue(self, cmd: Sequence[str] | str, **kw: Any) -> subprocess.Popen[Any]:
        """Start `cmd` on ue (subprocess.Popen keyword arguments accepted; `env` is
        added to the testbed environment). Killed at teardown if still running."""
        self._check_failure()
        env = {**os.environ, **self.ue_env, **(kw.pop("env", None) or {})}
        p = subprocess.Popen(self.ue_argv(cmd), env=env, **kw)
        self._workloads.append(p)
        return p

    def run_ue(self, cmd: Sequence[str] | str, *, input: Any = None, timeout: float | None = None,
               check: bool = False, capture_output: bool = False, **kw: Any) -> subprocess.CompletedProcess[Any]:  # fmt: skip
        """Run `cmd` on ue to completion, like subprocess.run (same keywords).

        Raises TestbedError if a testbed component died meanwhile (the command is
        then killed), subprocess.TimeoutExpired after `timeout`.
        """
        if capture_output:
            kw["stdout"] = kw["stderr"] = subprocess.PIPE
        if input is not None:
            kw["stdin"] = subprocess.PIPE
        p = self.popen_ue(cmd, **kw)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except BaseException:
            _terminate(p)
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._workloads.remove(p)
        self._check_failure()
        res = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        if check:
            res.check_returncode()
        return res

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

    def _host_table(self) -> dict[str, str]:
        extra: list[str] = []
        explicit: dict[str, str] = {}
        if self.cfg.corpus:
            extra += _corpus_hosts(Path(self.cfg.corpus) / "manifest.json")
        hosts = self.cfg.hosts
        if isinstance(hosts, dict):
            import ipaddress

            net = ipaddress.ip_network(A.SERVICE_NET)
            for h, addr in hosts.items():
                if ipaddress.ip_address(addr) not in net:
                    raise TestbedError(f"hosts: address {addr} of {h} is outside {A.SERVICE_NET}")
                explicit[h.lower()] = addr
        elif hosts:
            extra += list(hosts)
        table = A.service_addresses([h for h in extra if h.lower() not in explicit])
        table.update(explicit)
        return table

    def _interface_counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for role in ("ue", "gw"):
            proc = subprocess.run(
                ["ip", "-n", self.netns[role], "-s", "-j", "link"], capture_output=True, text=True
            )
            try:
                links = json.loads(proc.stdout or "[]")
            except ValueError:
                continue
            out[role] = {
                link["ifname"]: {
                    "rx_bytes": link["stats64"]["rx"]["bytes"],
                    "rx_packets": link["stats64"]["rx"]["packets"],
                    "tx_bytes": link["stats64"]["tx"]["bytes"],
                    "tx_packets": link["stats64"]["tx"]["packets"],
                }
                for link in links
                if link.get("ifname") != "lo" and "stats64" in link
            }
        return out

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
        for p in list(self._workloads):
            _terminate(p, grace=0.5)
        if self._handlers_installed() and self._active:
            # Wake the main thread wherever it is (our SIGTERM handler raises). A testbed
            # only prepared ahead is not in use: start() reports its failure. Counted, so
            # that the handler knows this SIGTERM is a wake-up, not the user's.
            _WAKEUPS.append(signal.SIGTERM)
            _thread.interrupt_main(signal.SIGTERM)

    def _check_failure(self) -> None:
        if self.failure:
            raise TestbedError(self.failure)

    # Signal handlers are shared by every open testbed of the process (one may be
    # prepared ahead while another runs): installed with the first, restored with the last.
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if not _LIVE:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(sig) is signal.SIG_IGN:
                    continue  # ignored on entry (nohup): stays ignored
                _SAVED_HANDLERS[sig] = signal.signal(sig, _on_signal)
        _LIVE.append(self)
        self._old_handlers = dict(_SAVED_HANDLERS)

    def _handlers_installed(self) -> bool:
        return bool(self._old_handlers)

    def _restore_signal_handlers(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
            if not _LIVE:
                for sig, old in _SAVED_HANDLERS.items():
                    with contextlib.suppress(ValueError, TypeError):
                        signal.signal(sig, old)
                _SAVED_HANDLERS.clear()
                _WAKEUPS.clear()
        self._old_handlers.clear()


#: Open testbeds of this process that installed the shared signal handlers.
_LIVE: list[Testbed] = []
_SAVED_HANDLERS: dict[int, Any] = {}


#: Signals that arrived while a testbed was tearing down, raised when it is done.
_HELD: list[int] = []


def _hold_signal(signum: int, frame: FrameType | None) -> None:
    _HELD.append(signum)


def _raise_held_signal() -> None:
    """After a teardown: stop the owner as the held signal would have (SIGINT as
    KeyboardInterrupt, SIGTERM/SIGHUP as TestbedInterrupted). Dropping it instead let
    a `dch run` that got SIGTERM between two loads measure on."""
    if not _HELD:
        return
    signum = _HELD[0]
    _HELD.clear()
    log.info("acting on %s held during teardown", signal.Signals(signum).name)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise TestbedInterrupted(f"interrupted by {signal.Signals(signum).name} during teardown")


#: SIGTERMs a testbed sent its own main thread when a daemon died (_on_failure).
_WAKEUPS: list[int] = []


def _on_signal(signum: int, frame: FrameType | None) -> None:
    wakeup = signum == signal.SIGTERM and bool(_WAKEUPS)
    if wakeup:
        _WAKEUPS.pop()
    if any(tb._closing for tb in _LIVE):
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


_HOSTS_CACHE: dict[tuple[str, int, int], list[str]] = {}


def _corpus_hosts(manifest: Path) -> list[str]:
    """origins[].host of a corpus manifest, parsed once per manifest version (a real
    page set's manifest is megabytes of JSON; a campaign builds a testbed per load)."""
    try:
        st = manifest.stat()
        key = (str(manifest.resolve()), st.st_mtime_ns, st.st_size)
        if key not in _HOSTS_CACHE:
            data = json.loads(manifest.read_text())
            _HOSTS_CACHE[key] = [o["host"] for o in data["origins"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TestbedError(
            f"corpus manifest {manifest}: cannot read origins[].host ({exc})"
        ) from exc
    return list(_HOSTS_CACHE[key])


class TestbedInterrupted(TestbedError):
    """The run was stopped by SIGTERM/SIGHUP (SIGINT raises KeyboardInterrupt).

    Not a failed measurement: whoever owns the run (a workload, the campaign runner)
    lets it through so the process stops, instead of recording it and going on.
    Exit status 143 (128 + SIGTERM), as a process killed by SIGTERM would have.
    """

    exit_code = 143


def _terminate(p: subprocess.Popen[Any], grace: float = 2.0) -> None:
    if p.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        p.terminate()
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(2)
