"""docs/deploy.md runs as written: its own `deploy-gateway` / `deploy-client` blocks,
extracted from the document (never retyped), build a working tunnel.

- everywhere: every variable a block uses is set by an earlier line of its machine's
  blocks, and every block is valid shell (`bash -n`);
- root + built dchannel and chanemu: namespaces stand for the guide's machines —
  a device with `wwan0` (HBC, chanemu 20 ms / 20 Mbit/s) and `eth1` (LLC: Ethernet to
  its next hop, a router that reaches the internet through chanemu 5 ms / 2 Mbit/s),
  a gateway with `eth0` at 203.0.113.10, and "the internet" that joins them and
  serves a file. One root shell per machine runs the guide's blocks in
  document order (only ETC and STATE, set in the guide's first block, are pointed at a
  temporary directory, and the public keys are copied as the guide's `scp` lines say).
  Then: a download is byte-exact and reaches the internet from the gateway's address
  (NAT), both channels carried it, and the firewall refuses what it says it refuses:
  a private range and the metadata address 169.254.169.254 (which "the internet"
  serves here, reachable from the gateway itself), a port it does not open, and from
  the device every service of the gateway host, even ssh's port (open from outside);
  the gateway agent counted its own refusals (`malformed.egress_denied`);
- the same, with the device's LLC interface down 5 s and up again during a 20 MB
  download: it heals by itself (the client restores the route the kernel deleted).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import processes_naming, require_binaries, require_root

from dchlab.paths import repo_root, target_dir
from dchlab.testbed.runrecord import list_netns

GUIDE = repo_root() / "docs" / "deploy.md"
ROLES = ("gateway", "client")
# What the test points elsewhere (set in each machine's first block of the guide).
OVERRIDDEN = ("ETC", "STATE")
BLOCK = re.compile(r"^```sh deploy-(gateway|client)\n(.*?)^```$", re.M | re.S)
ASSIGN = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)=", re.M)
USE = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)")
N = 4_000_000
SERVER = "198.51.100.80"  # "the internet": the file server
PRIVATE = "10.9.9.9"  # a private address the gateway must not forward devices to
METADATA = "169.254.169.254"  # the cloud metadata address: served by "the internet" here
GW_PUBLIC = "203.0.113.10"  # the guide's PUBLIC_IP


@dataclass(frozen=True)
class Block:
    """One fenced block of the guide: the machine it runs on, its text, its line."""

    role: str
    text: str
    line: int


def guide_blocks(text: str) -> list[Block]:
    """The guide's runnable blocks in document order."""
    return [
        Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
        for m in BLOCK.finditer(text)
    ]


def _without_heredoc_bodies(text: str) -> str:
    """Quoted heredoc bodies (<<'X') are data, not shell: no variables expand there."""
    return re.sub(r"<<'(\w+)'\n.*?^\1$", "", text, flags=re.M | re.S)


def test_guide_blocks_define_every_variable_before_use() -> None:
    blocks = guide_blocks(GUIDE.read_text())
    for role in ROLES:
        mine = [b for b in blocks if b.role == role]
        assert len(mine) >= 3, f"deploy-{role}: only {len(mine)} blocks"
        first = set(ASSIGN.findall(mine[0].text))
        assert set(OVERRIDDEN) <= first, f"deploy-{role}: first block sets {first}"
        defined: set[str] = set()
        for b in mine:
            r = subprocess.run(["bash", "-n"], input=b.text, capture_output=True, text=True)
            assert r.returncode == 0, f"docs/deploy.md:{b.line}: {r.stderr}"
            for line in _without_heredoc_bodies(b.text).splitlines():
                code = line.split(" #")[0]
                used = set(USE.findall(code)) - defined
                assert not used, f"docs/deploy.md:{b.line} ({role}): {used} used before set: {line}"
                defined |= set(ASSIGN.findall(code))


# ---------------------------------------------------------------- live


class Shell:
    """A root bash inside one namespace, fed the guide's blocks as a terminal would be
    (variables persist between blocks; `set -e`: a failing command ends it)."""

    def __init__(self, ns: str, env: dict[str, str], work: Path, name: str) -> None:
        self.name, self.work = name, work
        self.p = subprocess.Popen(
            ["ip", "netns", "exec", ns, "bash", "--norc", "--noprofile"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.n = 0
        self.run("set -e", "set -e")

    def run(self, text: str, what: str, timeout: float = 30.0) -> str:
        """Runs `text` (stdin /dev/null); returns its output, fails the test if it fails."""
        assert self.p.stdin is not None and self.p.stdout is not None
        self.n += 1
        script = self.work / f"{self.name}-{self.n}.sh"
        script.write_text(text)
        marker = f"__deploy_block_{self.n}_done__"
        self.p.stdin.write(f". {script} </dev/null\necho {marker}\n".encode())
        self.p.stdin.flush()
        out = b""
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while marker.encode() not in out:
            left = deadline - time.monotonic()
            assert left > 0, f"{what}: no end after {timeout} s; output so far:\n{out.decode()}"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"{what} failed (exit {self.p.wait()}):\n{out.decode()}"
                out += chunk
        return out.decode().replace(marker, "").strip()


def _ip(ns: str, *args: str) -> None:
    subprocess.run(["ip", "-n", ns, *args], check=True, capture_output=True)


def _in(ns: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, timeout=timeout
    )


def _ready(p: subprocess.Popen[str], what: str, line: str, timeout: float = 10) -> None:
    assert p.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = p.stdout.readline()
        if line in got:
            return
        if not got and p.poll() is not None:
            break
    raise AssertionError(f"{what}: no {line!r} (exit {p.poll()})")


class Topology:
    """The guide's machines as namespaces: dev (wwan0, eth1), gw (eth0), net, and lr:
    the LLC's next hop (a router between eth1 and the LLC's chanemu)."""

    def __init__(self, work: Path) -> None:
        self.prefix = f"dpl{os.urandom(3).hex()}"
        self.ns = {r: f"{self.prefix}-{r}" for r in ("dev", "gw", "net", "lr")}
        self.work = work
        self.procs: list[subprocess.Popen[str]] = []

    def build(self) -> None:
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "add", ns], check=True)
            _ip(ns, "link", "set", "lo", "up")
        dev, gw, net = self.ns["dev"], self.ns["gw"], self.ns["net"]
        _ip(gw, "link", "add", "eth0", "type", "veth", "peer", "name", "gw0", "netns", net)
        for ns, cmds in (
            (gw, ["addr add 203.0.113.10/24 dev eth0", "link set eth0 up",
                  "route add default via 203.0.113.1"]),
            (net, ["addr add 203.0.113.1/24 dev gw0", "link set gw0 up",
                   f"addr add {SERVER}/32 dev lo", f"addr add {PRIVATE}/32 dev lo",
                   f"addr add {METADATA}/32 dev lo"]),
        ):  # fmt: skip
            for c in cmds:
                _ip(ns, *c.split())
        _in(net, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        chanemu = str(target_dir() / "release" / "chanemu")
        lr = self.ns["lr"]
        for a_ns, a_if, net_if, profile, near, far in (
            (dev, "wwan0", "hbc0", "fixed:20ms/20mbit", "100.64.0.2/30", "100.64.0.1/30"),
            (lr, "wan0", "llc0", "fixed:5ms/2mbit", "100.65.0.2/30", "100.65.0.1/30"),
        ):
            p = self.spawn(
                [chanemu, "--profile", profile, "--ns-a", a_ns, "--dev-a", a_if,
                 "--ns-b", net, "--dev-b", net_if, "--rt-priority", "0"],
            )  # fmt: skip
            _ready(p, f"chanemu {a_if}", "READY")
            _ip(a_ns, "addr", "add", near, "dev", a_if)
            _ip(net, "addr", "add", far, "dev", net_if)
        # The LLC is Ethernet (eth1, a veth) to its next hop, the router `lr`, which
        # reaches the internet through chanemu: the device's datagrams need the
        # route via LLC_NEXT_HOP (on-link they would ARP for the gateway in vain).
        _ip(dev, "link", "add", "eth1", "type", "veth", "peer", "name", "lan0", "netns", lr)
        for ns, cmds in (
            (dev, ["addr add 192.168.50.2/24 dev eth1", "link set eth1 up"]),
            (lr, ["addr add 192.168.50.1/24 dev lan0", "link set lan0 up",
                  "route add default dev wan0"]),
            (net, ["route add 192.168.50.0/24 via 100.65.0.2 dev llc0"]),
        ):  # fmt: skip
            for c in cmds:
                _ip(ns, *c.split())
        _in(lr, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def spawn(self, cmd: list[str], ns: str | None = None) -> subprocess.Popen[str]:
        full = ["ip", "netns", "exec", ns, *cmd] if ns else cmd
        p = subprocess.Popen(
            full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.work
        )
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _leftovers(topo: Topology) -> list[str]:
    names = [f"netns {n}" for n in list_netns() if n.startswith(topo.prefix)]
    return names + processes_naming([str(topo.work)])


def _stop_jobs(shell: Shell) -> str:
    """SIGTERM to the agents the guide started in this shell; waits for them (stats)."""
    return shell.run(
        'pids="$(jobs -p)"; kill -TERM $pids; for p in $pids; do wait "$p" || echo "job $p: exit $?"; done',
        f"stop {shell.name} agents",
    )


def _exchange_keys(etc: dict[str, Path]) -> None:
    """What the guide's `scp` lines do, once both public keys exist."""
    for src, dst in ((etc["gateway"] / "gateway.pub", etc["client"] / "gateway.pub"),
                     (etc["client"] / "device.pub", etc["gateway"] / "phone-1.pub")):  # fmt: skip
        if src.exists() and dst.parent.is_dir() and not dst.exists():
            shutil.copyfile(src, dst)


def _needs() -> None:
    require_root()
    require_binaries("dchannel", "chanemu")
    for tool in ("nft", "curl", "ping"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed")


@dataclass(frozen=True)
class Running:
    """The guide's machines with its agents started: the shells that ran its blocks
    (one per machine), the namespaces, each machine's STATE and the file server's
    directory."""

    topo: Topology
    shells: dict[str, Shell]
    state: dict[str, Path]
    www: Path


@contextmanager
def guide_running(tmp_path: Path) -> Iterator[Running]:
    """Builds the topology and runs the guide's blocks in document order; cleans up after."""
    _needs()
    blocks = guide_blocks(GUIDE.read_text())
    www = tmp_path / "www"
    www.mkdir()
    env = {**os.environ, "PATH": f"{target_dir() / 'release'}:{os.environ['PATH']}"}
    etc = {r: tmp_path / r / "etc" for r in ROLES}
    state = {r: tmp_path / r / "state" for r in ROLES}
    topo = Topology(tmp_path)
    shells: dict[str, Shell] = {}
    try:
        topo.build()
        shells = {
            "gateway": Shell(topo.ns["gw"], env, tmp_path, "gateway"),
            "client": Shell(topo.ns["dev"], env, tmp_path, "client"),
        }
        seen: set[str] = set()
        for b in blocks:
            _exchange_keys(etc)
            shells[b.role].run(b.text, f"docs/deploy.md:{b.line} ({b.role})")
            if b.role not in seen:  # the guide's names, then the test's directories
                seen.add(b.role)
                shells[b.role].run(f"ETC={etc[b.role]}; STATE={state[b.role]}", "override")
        yield Running(topo, shells, state, www)
    finally:
        for sh in shells.values():
            if sh.p.poll() is None:
                assert sh.p.stdin is not None
                sh.p.stdin.close()
                sh.p.wait(10)
        for line in processes_naming([str(tmp_path)]):  # an agent a failed block left
            os.kill(int(line.split()[1].rstrip(":")), signal.SIGTERM)
        topo.close()


def _serve(run: Running) -> subprocess.Popen[str]:
    server = run.topo.spawn(
        [sys.executable, "-u", "-m", "http.server", "8080", "--bind", SERVER,
         "--directory", str(run.www)], ns=run.topo.ns["net"],
    )  # fmt: skip
    _ready(server, "file server", "Serving HTTP")
    return server


def _blob(run: Running, n: int) -> str:
    """A random file of `n` bytes on the server; its SHA-256."""
    data = os.urandom(n)
    (run.www / "blob").write_bytes(data)
    return hashlib.sha256(data).hexdigest()


@pytest.mark.netns
def test_guide_runs_as_written_in_namespaces(tmp_path: Path) -> None:
    with guide_running(tmp_path) as run:
        topo = run.topo
        want = _blob(run, N)
        server = _serve(run)
        r = _in(topo.ns["dev"], "sh", "-c",
                f"curl -sS --max-time 60 http://{SERVER}:8080/blob | sha256sum")  # fmt: skip
        assert r.stdout.split()[:1] == [want], f"download differs or failed: {r.stderr}"
        # Firewall, forward chain: the internet yes, a private range no.
        assert _in(topo.ns["dev"], "ping", "-c1", "-W2", SERVER).returncode == 0
        assert _in(topo.ns["dev"], "ping", "-c1", "-W2", PRIVATE).returncode != 0
        # The metadata address: the gateway itself reaches it, a device does not.
        assert _in(topo.ns["gw"], "ping", "-c1", "-W2", METADATA).returncode == 0
        assert _in(topo.ns["dev"], "ping", "-c1", "-W2", METADATA).returncode != 0
        # Input chain: a port the guide does not open is closed from outside, while
        # the listener answers on the gateway itself (lo); ssh's port is open from
        # outside; from the device neither is (nor the gateway's tunnel address).
        for port in (8081, 22):
            listener = topo.spawn(
                [sys.executable, "-u", "-m", "http.server", str(port), "--bind", GW_PUBLIC,
                 "--directory", str(run.www)], ns=topo.ns["gw"],
            )  # fmt: skip
            _ready(listener, f"listener on the gateway's port {port}", "Serving HTTP")

        def curl(ns: str, url: str) -> subprocess.CompletedProcess[str]:
            return _in(topo.ns[ns], "curl", "-sS", "-o", "/dev/null", "--max-time", "2", url)

        local = _in(topo.ns["gw"], "curl", "-sS", "-o", "/dev/null", "--max-time", "5",
                    f"http://{GW_PUBLIC}:8081/")  # fmt: skip
        assert local.returncode == 0, local.stderr
        outside = curl("net", f"http://{GW_PUBLIC}:8081/")
        assert outside.returncode == 28, f"input chain let port 8081 through: {outside}"
        ssh_port = curl("net", f"http://{GW_PUBLIC}:22/")
        assert ssh_port.returncode == 0, f"port 22 closed from outside: {ssh_port}"
        for url in (f"http://{GW_PUBLIC}:8081/", f"http://{GW_PUBLIC}:22/",
                    "http://198.19.0.1:22/"):  # fmt: skip
            r = curl("dev", url)
            assert r.returncode == 28, f"a device reached the gateway host at {url}: {r}"
        for role in ("client", "gateway"):
            assert "exit" not in _stop_jobs(run.shells[role]), role
        stats = {r: json.loads((run.state[r] / f"{r}.json").read_text()) for r in ROLES}
    assert "203.0.113.10 - - " in (server.stderr.read() if server.stderr else ""), "no NAT"
    ch = stats["client"]["channels"]
    print(json.dumps({k: {f: v[f] for f in ("tx_bytes", "rx_bytes")} for k, v in ch.items()}))
    assert ch["hbc"]["rx_bytes"] >= N // 2, ch  # the bulk came down the HBC
    assert ch["llc"]["tx_bytes"] >= 20_000, ch  # the uplink (ACKs) went up the LLC
    assert stats["gateway"]["channels"]["llc"]["rx_bytes"] >= 20_000
    # the agent refused the device's packets to the metadata address and the gateway
    # host before the firewall saw them (ping, and at least one SYN per curl)
    assert stats["gateway"]["malformed"]["egress_denied"] >= 1 + 3, stats["gateway"]["malformed"]
    deadline = time.monotonic() + 10
    while (left := _leftovers(topo)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []


FLAP_BYTES = 20_000_000
PROBE_INTERVAL_S = 0.5  # the agents' default --probe-interval-ms
METRIC = re.compile(
    r'^dchannel_(\w+)\{role="client"(?:,peer="gateway")?,channel="llc"\} (\S+)$', re.M
)


def _llc_metrics(run: Running) -> dict[str, float]:
    """The client's LLC metrics (its metrics port, as the guide sets it)."""
    r = _in(run.topo.ns["dev"], "curl", "-sS", "--max-time", "2", "http://127.0.0.1:9100/metrics")
    return {name: float(v) for name, v in METRIC.findall(r.stdout)}


@pytest.mark.netns
def test_an_llc_link_flap_heals_by_itself(tmp_path: Path) -> None:
    """The device's LLC interface down 5 s and up during a 20 MB download: the download
    stays byte-exact, the client logs "LLC down" and "LLC up", the metrics show the LLC
    down (RTT NaN) and up again, and uplink data is back on the LLC within two probe
    intervals of link up (the agent restores the route the kernel deleted)."""
    with guide_running(tmp_path) as run:
        dev = run.topo.ns["dev"]
        want = _blob(run, FLAP_BYTES)
        _serve(run)
        out = tmp_path / "got"
        # 1.5 MB/s: the download outlasts the outage and the recovery (about 13 s)
        curl = run.topo.spawn(
            ["curl", "-sS", "--max-time", "120", "--limit-rate", "1500K", "-o", str(out),
             f"http://{SERVER}:8080/blob"], ns=dev,
        )  # fmt: skip
        time.sleep(1.5)
        assert _llc_metrics(run)["channel_up"] == 1
        _ip(dev, "link", "set", "eth1", "down")
        time.sleep(5)
        during = _llc_metrics(run)
        _ip(dev, "link", "set", "eth1", "up")
        up_at = time.monotonic()
        base = _llc_metrics(run)["tx_packets_total"]
        back = None
        while time.monotonic() - up_at < 10:
            if _llc_metrics(run)["tx_packets_total"] > base:
                back = time.monotonic() - up_at
                break
            time.sleep(0.05)
        after = _llc_metrics(run)
        while after["channel_up"] != 1 and time.monotonic() - up_at < 10:
            time.sleep(0.05)
            after = _llc_metrics(run)
        assert curl.wait(120) == 0, curl.stderr.read() if curl.stderr else ""
        got = hashlib.sha256(out.read_bytes()).hexdigest()
        for role in ("client", "gateway"):
            assert "exit" not in _stop_jobs(run.shells[role]), role
        log = (run.state["client"] / "client.log").read_text()
        gw_log = (run.state["gateway"] / "gateway.log").read_text()
    print(f"uplink data back on the LLC {back} s after link up; during: {during}")
    assert got == want, "download not byte-exact"
    assert during["channel_up"] == 0 and math.isnan(during["rtt_ms"]), during
    assert during["channel_silence_seconds"] >= 3 * PROBE_INTERVAL_S, during
    assert "LLC down" in log and "LLC up" in log, log
    assert "route restored: ip route replace default via 192.168.50.1 dev eth1" in log, log
    assert "LLC down (peer phone-1)" in gw_log and "LLC up (peer phone-1)" in gw_log, gw_log
    assert back is not None, "no uplink data on the LLC within 10 s of link up"
    # two probe intervals, plus what a loaded 2-core machine adds to polling the metrics
    assert back <= 2 * PROBE_INTERVAL_S + 0.5, back
    assert after["channel_up"] == 1 and after["channel_downs_total"] == 1, after
