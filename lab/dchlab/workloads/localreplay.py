"""A corpus served by `webreplay` in a private network namespace, without channels.

Used to probe imported pages (which requests does a real Chromium make that the corpus
cannot answer? → the page's `missing`), for the replay/driver tests that must not
depend on the full testbed, and for the driver-overhead benchmark. No DNS server: the
browser gets `--host-resolver-rules` mapping each origin to its address (unknown names
fail as NXDOMAIN would). The namespace has only loopback and a veth pair inside itself
(Chromium treats a machine with nothing but loopback as offline); nothing leaves it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from dchlab import REPO_ROOT
from dchlab.closing import close_on_failure
from dchlab.errors import UserError
from dchlab.pages.corpus import Corpus
from dchlab.paths import binary

BASE = ipaddress.ip_address("198.19.192.1")  # inside the lab's 198.18.0.0/15


class LocalReplayError(UserError, RuntimeError):
    """The private replay namespace could not be set up (the message names the step)."""


def _run(argv: list[str], step: str) -> None:
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise LocalReplayError(f"{step} failed: {' '.join(argv)}: {p.stderr.strip()}")


def localreplay_netns(owner_pid: int, tag: str) -> str:
    """The namespace name of a LocalReplay owned by `owner_pid`: `dchlr`, the pid in 6
    hex digits (Linux pids < 2^22), a 4-hex tag — 15 characters, what `ip netns` takes.
    The full pid is in the name so that `dch cleanup` can tell a dead owner's namespace
    (left by a SIGKILL, when `close` never ran) from a live one
    (runrecord.cleanup_dead_runs)."""
    return f"dchlr{owner_pid:06x}{tag}"


class LocalReplay:
    """`with LocalReplay(corpus) as lr: lr.load(url)` — webreplay + Chromium in one netns."""

    def __init__(
        self, corpus: Corpus, ca: tuple[Path, Path] | None = None, trust: Path | None = None
    ) -> None:
        """`ca`: (cert, key) webreplay signs with (default: the testbed CA); `trust`: the
        CA certificate Chromium trusts (default: the same — pass another to break TLS)."""
        self.corpus = corpus
        self.trust = trust
        self.ns = localreplay_netns(os.getpid(), secrets.token_hex(2))
        self.dir = Path(tempfile.mkdtemp(prefix="dch-localreplay-"))
        self.ca = ca
        self.hosts: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.home = self.dir / "home"

    def __enter__(self) -> LocalReplay:
        with close_on_failure(self.close):
            self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        from dchlab.testbed.ca import ensure_ca, make_nss_db

        cert, key = self.ca or ensure_ca()
        make_nss_db(self.home / ".pki" / "nssdb", self.trust or cert)
        self.ca = (cert, key)
        hosts = [o.host for o in self.corpus.origins]
        if len(hosts) > 4000:
            raise LocalReplayError(f"{len(hosts)} origins: more than this harness addresses")
        self.hosts = {h: str(BASE + i) for i, h in enumerate(hosts)}
        (self.dir / "hosts").write_text("".join(f"{a} {h}\n" for h, a in self.hosts.items()))
        _run(["ip", "netns", "add", self.ns], "create namespace")
        ex = ["ip", "-n", self.ns]
        # No IPv6: its addresses appear a moment after link-up (DAD) and Chromium would
        # abort requests in flight with ERR_NETWORK_CHANGED.
        for scope in ("all", "default"):
            _run(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.ns,
                    "sysctl",
                    "-qw",
                    f"net.ipv6.conf.{scope}.disable_ipv6=1",
                ],
                "disable IPv6",
            )
        _run([*ex, "link", "set", "lo", "up"], "loopback up")
        _run([*ex, "link", "add", "lr0", "type", "veth", "peer", "name", "lr1"], "veth pair")
        _run([*ex, "addr", "add", "198.19.191.1/30", "dev", "lr0"], "veth address")
        _run([*ex, "link", "set", "lr0", "up"], "veth up")
        _run([*ex, "link", "set", "lr1", "up"], "veth peer up")
        batch = "".join(f"address add {a}/32 dev lo\n" for a in self.hosts.values())
        p = subprocess.run([*ex, "-batch", "-"], input=batch, capture_output=True, text=True)
        if p.returncode != 0:
            raise LocalReplayError(f"origin addresses failed: {p.stderr.strip()}")
        argv = [
            "ip", "netns", "exec", self.ns, str(binary("webreplay")),
            "--hosts", str(self.dir / "hosts"), "--ca-cert", str(cert), "--ca-key", str(key),
            "--corpus", str(self.corpus.root), "--access-log", str(self.dir / "access.log"),
        ]  # fmt: skip
        with open(self.dir / "webreplay.err", "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if not ready:
                continue
            line = self.proc.stdout.readline()
            if b"READY" in line:
                return
            if not line and self.proc.poll() is not None:
                break
        tail = (self.dir / "webreplay.err").read_text()[-1000:]
        raise LocalReplayError(f"webreplay did not print READY within 30 s: {tail}")

    def curl_argv(self, urls: list[str], out_dir: Path) -> list[str]:
        """curl fetching `urls` into out_dir/0, 1, ... over the replay (CA trusted)."""
        assert self.ca is not None
        argv = ["curl", "-sS", "--cacert", str(self.ca[0]), "--parallel", "--parallel-max", "8"]
        for h, a in self.hosts.items():
            argv += ["--resolve", f"{h}:443:{a}", "--resolve", f"{h}:80:{a}"]
        for i, u in enumerate(urls):
            argv += ["-o", str(out_dir / str(i)), u]
        return self.exec_argv(argv)

    def resolver_rules(self) -> str:
        rules = [f"MAP {h} {a}" for h, a in self.hosts.items()]
        return ",".join([*rules, "MAP * ~NOTFOUND"])

    def exec_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def load(self, url: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """One Chromium load of `url` (the driver's JSON result)."""
        argv = [
            sys.executable, "-m", "dchlab.workloads.browser", url,
            "--timeout", str(timeout_s), "--home", str(self.home),
            "--host-rules", self.resolver_rules(),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(REPO_ROOT) / "lab")}
        p = subprocess.run(
            self.exec_argv(argv), capture_output=True, text=True, env=env, timeout=timeout_s + 60
        )
        lines = p.stdout.strip().splitlines()
        if p.returncode != 0 or not lines:
            raise LocalReplayError(f"driver exited {p.returncode}: {p.stderr[-800:]}")
        return dict(json.loads(lines[-1]))

    def access_log(self) -> list[dict[str, Any]]:
        path = self.dir / "access.log"
        if not path.exists():
            return []
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        with contextlib.suppress(OSError):
            import shutil

            shutil.rmtree(self.dir)


def probe(
    corpus: Corpus, pages: list[str] | None = None, timeout_s: float = 60.0
) -> dict[str, Any]:
    """Load each page once locally; return {page: driver result}. A page's failed resources
    here are requests the corpus cannot answer — its `missing` as the browser sees it."""
    out: dict[str, Any] = {}
    with LocalReplay(corpus) as lr:
        for name in pages or [p.name for p in corpus.pages]:
            out[name] = lr.load(corpus.page(name).entry_url, timeout_s)
    return out
