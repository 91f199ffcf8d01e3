"""Benchmark: chanemu beside Mahimahi's mm-delay / mm-link on the same machine
(docs/chanemu.md, "Beside Mahimahi"). Needs root and the release binaries.

    PYTHONPATH=lab .venv/bin/python -m dchlab.bench_mahimahi \\
        [--mahimahi-bin /tmp/mahimahi-src/src/frontend] [--user nobody] \\
        [--only ping,const,trace,ceiling,plt] [--trace TMobile-LTE-short] [--json OUT]

Tests (each tool measured the same way, TCP always downloads: server → device):
- ping: `ping -n -c 200 -i 0.05` over 40 ms RTT (chanemu `fixed:40ms/unlimited`,
  Mahimahi `mm-delay 20`); p50/p99 and the error against 40 ms.
- const: iperf3 goodput over 12 Mbit/s (chanemu `fixed:0ms/12mbit` and the same rate as
  a Mahimahi trace, one opportunity per ms; Mahimahi `mm-link` on that trace).
- trace: iperf3 goodput over a Mahimahi cellular trace for one loop period (so the
  trace start offset does not matter), against the trace's mean capacity.
- ceiling: iperf3 goodput with unlimited rate and zero delay (chanemu
  `fixed:0ms/unlimited`, Mahimahi `mm-delay 0`).
- plt: page-load time of the first `--pages` tp5n pages over 40 ms / 200 Mbit/s
  (`dch pageload` with all-hbc and hbc-only; Chromium inside `mm-delay 20 mm-link
  200mbps` beside LocalReplay's webreplay), both judged by the lab's verdict.

chanemu runs in the lab testbed (`hbc-only`: the raw link; `all-hbc`: through the
agents, what the experiments measure). Mahimahi must be built outside the repository
and its binaries installed setuid root (its own requirement: it refuses to run as root,
so its shells run as `--user`). Every Mahimahi shell starts inside a namespace of our
own (`mmcmp<pid>`) that also holds the servers; Mahimahi connects its shell to that
namespace only, so no test packet reaches the root namespace. Without the binaries the
Mahimahi rows are skipped with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import site
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dchlab import REPO_ROOT
from dchlab.closing import close_on_failure
from dchlab.paths import shared_data
from dchlab.traces.mahimahi import MBIT_PER_OPPORTUNITY, read_mahimahi

PING_ARGS = ["-n", "-c", "200", "-i", "0.05"]
PING_RTT_MS = 40.0
CONST_MBIT = 12.0
SERVER_ADDR = "198.19.128.1"  # server.test in the testbed's srv namespace
TESTS = ("ping", "const", "trace", "ceiling", "plt")
_PING_TIME = re.compile(r"\btime=([0-9.]+) ms")
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


# ------------------------------------------------------------------ parsing / summary
def parse_ping(text: str) -> tuple[list[float], int, int]:
    """RTTs (ms) of the replies in `ping -n` output, packets sent and received.
    ValueError if the summary line is missing (ping did not finish)."""
    rtts = [float(m.group(1)) for m in _PING_TIME.finditer(text)]
    m = _PING_SUMMARY.search(text)
    if not m:
        raise ValueError(f"ping output without a summary line: {text[-200:]!r}")
    return rtts, int(m.group(1)), int(m.group(2))


def ping_summary(rtts: Sequence[float], expected_ms: float) -> dict[str, float]:
    """p50/p99/mean RTT and the p50's error against `expected_ms` (all ms)."""
    if not rtts:
        raise ValueError("no ping replies")
    p50, p99 = np.percentile(rtts, [50, 99])
    return {
        "p50_ms": round(float(p50), 3),
        "p99_ms": round(float(p99), 3),
        "mean_ms": round(float(np.mean(rtts)), 3),
        "min_ms": round(float(min(rtts)), 3),
        "error_p50_ms": round(float(p50) - expected_ms, 3),
    }


def parse_iperf3(text: str) -> tuple[float, int | None]:
    """Goodput (Mbit/s) the receiver saw and the sender's retransmissions (None if not
    reported), from `iperf3 -J` output; ValueError with iperf3's message if it failed."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"iperf3 output is not JSON ({e}): {text[:200]!r}") from None
    if data.get("error"):
        raise ValueError(f"iperf3: {data['error']}")
    try:
        mbit = float(data["end"]["sum_received"]["bits_per_second"]) / 1e6
    except (KeyError, TypeError):
        raise ValueError("iperf3 JSON without end.sum_received.bits_per_second") from None
    retrans = (data["end"].get("sum_sent") or {}).get("retransmits")
    return mbit, None if retrans is None else int(retrans)


def trace_mean_mbit(path: Path) -> tuple[float, float]:
    """A Mahimahi trace's mean capacity (Mbit/s) over one loop period, and that period (s)."""
    ts = read_mahimahi(path)
    period_ms = float(ts[-1])
    return len(ts) * MBIT_PER_OPPORTUNITY * 1000.0 / period_ms, period_ms / 1000.0


def write_constant_trace(path: Path, mbit: float) -> Path:
    """A Mahimahi trace of constant `mbit` Mbit/s: over the shortest loop of P ms
    (P <= 1000) that holds a whole number of 1500-byte opportunities, millisecond k
    gets floor(k·r) − floor((k−1)·r) of them (r = opportunities per ms)."""
    per_ms = mbit / (MBIT_PER_OPPORTUNITY * 1000.0)
    period = next((p for p in range(1, 1001) if abs(per_ms * p - round(per_ms * p)) < 1e-6), None)
    if per_ms <= 0 or period is None:
        raise ValueError(f"{mbit} Mbit/s: no loop of <= 1000 ms holds whole opportunities")
    total = round(per_ms * period)
    lines = []
    for k in range(1, period + 1):
        n = total * k // period - total * (k - 1) // period
        lines += [f"{k}\n"] * n
    path.write_text("".join(lines))
    return path


def trace_profile(path: Path, up: Path, down: Path, name: str) -> Path:
    """A chanemu profile serving `up`/`down` like mm-link alone: no delay, unlimited
    queue (mm-link's default is an infinite drop-tail queue)."""

    def side(trace: Path) -> str:
        return f'rate = {{ mahimahi = "{trace.resolve()}" }}\nqueue = "unlimited"\nloss = 0.0\n'

    path.write_text(
        f'name = "{name}"\ndescription = "Mahimahi trace {name}, no delay (as mm-link)"\n\n'
        '[delay]\nkind = "fixed"\nrtt_ms = 0\n\n'
        f"[uplink]\n{side(up)}\n[downlink]\n{side(down)}"
    )
    return path


@dataclass
class Row:
    """One measurement: `tool` (chanemu scheme or Mahimahi command) on `test`."""

    test: str
    tool: str
    setup: str
    values: dict[str, Any] = field(default_factory=dict)
    skipped: str = ""


def goodput_values(result: tuple[float, int | None], capacity_mbit: float | None) -> dict[str, Any]:
    mbit, retrans = result
    out: dict[str, Any] = {"goodput_mbit": round(mbit, 3), "retransmits": retrans}
    if capacity_mbit:
        out["capacity_mbit"] = round(capacity_mbit, 3)
        out["share"] = round(mbit / capacity_mbit, 4)
    return out


def plt_medians(rows: Sequence[Row]) -> dict[str, tuple[float, int]]:
    """Per tool: median PLT (ms) over the pages every tool loaded validly, and their count."""
    by_tool: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.test == "plt" and not r.skipped and r.values.get("valid"):
            by_tool.setdefault(r.tool, {})[r.values["page"]] = float(r.values["plt_ms"])
    if not by_tool:
        return {}
    common = set.intersection(*(set(d) for d in by_tool.values()))
    return {
        tool: (float(np.median([d[p] for p in common])) if common else float("nan"), len(common))
        for tool, d in by_tool.items()
    }


def markdown(rows: Sequence[Row]) -> str:
    """The results table of docs/chanemu.md."""
    lines = ["| test | tool | setup | result |", "|---|---|---|---|"]
    for r in rows:
        v = r.values
        if r.skipped:
            res = f"skipped: {r.skipped}"
        elif "plt_ms" in v:
            plt = "-" if v["plt_ms"] is None else f"{v['plt_ms']:.0f} ms"
            res = f"{v['page']}: PLT {plt}" + ("" if v["valid"] else f" (invalid: {v['note']})")
        elif "p50_ms" in v:
            res = (
                f"p50 {v['p50_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms "
                f"(error {v['error_p50_ms']:+.2f} ms; {v['received']}/{v['sent']} replies)"
            )
        else:
            res = f"{v['goodput_mbit']:.2f} Mbit/s"
            if "share" in v:
                res += f" = {100 * v['share']:.1f} % of {v['capacity_mbit']:.2f}"
            if v.get("retransmits") is not None:
                res += f", {v['retransmits']} retransmits"
        lines.append(f"| {r.test} | {r.tool} | {r.setup} | {res} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ processes
def _retry_iperf3(run: Any, argv: list[str], timeout: float) -> tuple[float, int | None]:
    """Run an iperf3 client (`run(argv)` → CompletedProcess) until its server answers."""
    deadline = time.monotonic() + 10
    while True:
        p = run(argv, timeout)
        try:
            return parse_iperf3(p.stdout)
        except ValueError as e:
            # Not up yet, or still closing the previous test.
            if not ("refused" in str(e) or "busy" in str(e)) or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def iperf3_client(server: str, seconds: float) -> list[str]:
    return ["iperf3", "-c", server, "-R", "-J", "-t", f"{seconds:g}"]


def chanemu_ping(scheme: str) -> Row:
    from dchlab.testbed import Testbed, TestbedConfig

    hbc = "fixed:40ms/unlimited"
    with Testbed(TestbedConfig(scheme=scheme, hbc=hbc, llc="urllc")) as tb:
        p = tb.run_ue(["ping", *PING_ARGS, SERVER_ADDR], capture_output=True, text=True)
    rtts, sent, recv = parse_ping(p.stdout)
    vals = {**ping_summary(rtts, PING_RTT_MS), "sent": sent, "received": recv}
    return Row("ping", f"chanemu {scheme}", hbc, vals)


def chanemu_goodput(test: str, scheme: str, hbc: str, seconds: float, cap: float | None) -> Row:
    from dchlab.testbed import Testbed, TestbedConfig

    with Testbed(TestbedConfig(scheme=scheme, hbc=hbc, llc="urllc")) as tb:
        # Supervised by the testbed and stopped by it (by PID) at teardown.
        tb.spawn("iperf3", ["iperf3", "-s", "-B", SERVER_ADDR], ns="srv", ready=None)

        def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
            return tb.run_ue(argv, capture_output=True, text=True, timeout=timeout)

        mbit = _retry_iperf3(run, iperf3_client(SERVER_ADDR, seconds), seconds + 30)
    setup = Path(hbc).stem if hbc.endswith(".toml") else hbc
    return Row(test, f"chanemu {scheme}", setup, goodput_values(mbit, cap))


def mahimahi_binaries(bin_dir: Path | None) -> tuple[dict[str, Path], str]:
    """{tool: path} for mm-delay and mm-link, or ({}, why they cannot run)."""
    if bin_dir is None:
        return {}, "no --mahimahi-bin given"
    tools: dict[str, Path] = {}
    for name in ("mm-delay", "mm-link"):
        exe = bin_dir / name
        if not exe.is_file():
            return {}, f"{exe} not found (build Mahimahi, docs/chanemu.md)"
        st = exe.stat()
        if st.st_uid != 0 or not st.st_mode & stat.S_ISUID:
            return {}, f"{exe} must be setuid root (chown root:root; chmod 4755)"
        tools[name] = exe
    return tools, ""


class MahimahiHost:
    """A namespace of our own holding the servers; Mahimahi's shells start in it and
    connect to it only (veth-less: a TUN pair + NAT inside this namespace)."""

    def __init__(self, tools: dict[str, Path], user: str, ns: str | None = None) -> None:
        """`ns`: borrow that namespace (its owner removes it) instead of making one."""
        self.tools = tools
        pw = pwd.getpwnam(user)
        if pw.pw_uid == 0:
            raise ValueError("--user: Mahimahi refuses to run as root; give a normal user")
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.ids = [f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]
        self.owned = ns is None
        self.ns = ns or f"mmcmp{os.getpid()}"
        self.children: list[subprocess.Popen[Any]] = []
        self.port = 5200  # iperf3 servers take 5201, 5202, ...

    def __enter__(self) -> MahimahiHost:
        if self.owned:
            subprocess.run(["ip", "netns", "add", self.ns], check=True)
        with close_on_failure(self.__exit__):
            subprocess.run(["ip", "-n", self.ns, "link", "set", "lo", "up"], check=True)
            # Mahimahi checks forwarding in the namespace it starts in (this one).
            self.exec(["sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.children:
            _stop(p)
        if self.owned:
            subprocess.run(["ip", "netns", "del", self.ns], check=False)

    def argv(self, cmd: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *cmd]

    def exec(self, cmd: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.argv(cmd), **kw)

    def next_port(self) -> int:
        self.port += 1
        return self.port

    def serve(self, cmd: Sequence[str]) -> subprocess.Popen[Any]:
        p = subprocess.Popen(self.argv(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.children.append(p)
        return p

    def shell(self, tool: str, args: Sequence[str], inner: Sequence[str]) -> list[str]:
        """argv of `tool ARGS INNER` as the unprivileged user, in our namespace."""
        # mm-link parses options with getopt: `--` keeps the command's own options;
        # mm-delay takes everything after the delay as the command.
        sep = ["--"] if tool == "mm-link" else []
        return self.argv(["setpriv", *self.ids, str(self.tools[tool]), *args, *sep, *inner])


def _stop(p: subprocess.Popen[Any]) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants now (from /proc/*/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def realtime(pid: int, priority: int) -> list[int]:
    """Give Mahimahi's packet loops what chanemu's have (SCHED_FIFO `priority`): every
    Mahimahi process (comm `mm-*`) under `pid`, i.e. the downlink and uplink loops.
    Call it once the shell's command runs: processes forked before keep normal
    scheduling (dnsmasq, the command), so only the emulator is real-time.
    Returns the PIDs changed."""
    pids = []
    for p in process_tree(pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{p}/comm").read_text().startswith("mm-"):
                pids.append(p)
    done = []
    for p in pids:
        r = subprocess.run(["chrt", "-a", "-f", "-p", str(priority), str(p)], capture_output=True)
        if r.returncode == 0:
            done.append(p)
        elif Path(f"/proc/{p}").exists():  # gone meanwhile is fine; refused is not
            raise RuntimeError(f"chrt {p}: {r.stderr.decode().strip()}")
    return done


@contextlib.contextmanager
def mm_shell(
    host: MahimahiHost, tool: str, args: Sequence[str], inner: str, rt_priority: int
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start `tool ARGS sh -c INNER` whose first output line marks that the command
    runs; yield the process and that line (stdin stays open until the block ends)."""
    p = subprocess.Popen(
        host.shell(tool, args, ["sh", "-c", inner]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    host.children.append(p)
    try:
        assert p.stdout
        first = p.stdout.readline()
        if not first:
            raise RuntimeError(f"{tool} {' '.join(args)}: exited before its command started")
        if rt_priority:
            realtime(p.pid, rt_priority)
        yield p, first
    finally:
        _stop(p)


def mahimahi_ping(host: MahimahiHost, rt_priority: int) -> Row:
    """Ping the shell's inner address from our namespace (as root: the user may not ping
    every 50 ms); the echo crosses mm-delay both ways like the shell's own traffic."""
    inner = "ip -4 -o addr show dev ingress; exec cat >/dev/null"
    with mm_shell(host, "mm-delay", ["20"], inner, rt_priority) as (p, line):
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)", line)
        if not m:
            raise RuntimeError(f"mm-delay: no inner address in {line!r}")
        out = host.exec(["ping", *PING_ARGS, m.group(1)], capture_output=True, text=True)
        assert p.stdin
        p.stdin.close()  # the inner `cat` ends, and with it the shell
        p.wait(10)
    rtts, sent, recv = parse_ping(out.stdout)
    vals = {**ping_summary(rtts, PING_RTT_MS), "sent": sent, "received": recv}
    return Row("ping", "mahimahi", "mm-delay 20", vals)


def mahimahi_goodput(
    host: MahimahiHost,
    test: str,
    tool: str,
    args: list[str],
    seconds: float,
    cap: float | None,
    rt_priority: int,
) -> Row:
    # A server of its own per test: when a shell exits, the previous test's connection
    # may die without its last exchange and leave a shared server "busy" for minutes.
    port = host.next_port()
    inner = f'echo started; exec iperf3 -c "$MAHIMAHI_BASE" -p {port} -R -J -t {seconds:g}'

    def run(_argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        with mm_shell(host, tool, args, inner, rt_priority) as (p, _):
            out, _err = p.communicate(timeout=timeout)
        return subprocess.CompletedProcess(p.args, p.returncode, out, "")

    server = host.serve(["iperf3", "-s", "-p", str(port)])
    try:
        mbit = _retry_iperf3(run, [], seconds + 30)
    finally:
        _stop(server)
    setup = " ".join([tool, *(Path(a).name for a in args)])
    return Row(test, "mahimahi", setup, goodput_values(mbit, cap))


# ------------------------------------------------------------------ page loads
PLT_CHANNEL = "fixed:40ms/200mbit"
PLT_MBIT = 200.0


def plt_row(tool: str, setup: str, page: str, plt_ms: Any, valid: Any, note: str) -> Row:
    vals = {"page": page, "plt_ms": plt_ms, "valid": valid, "note": note}
    return Row("plt", tool, setup, vals)


def chanemu_plt(pages: int, schemes: str, timeout_s: float) -> list[Row]:
    """`dch pageload` over the testbed (its own validity verdict per load)."""
    argv = [
        str(Path(REPO_ROOT) / "dch"), "pageload", "--corpus", "tp5n", "--pages", str(pages),
        "--scheme", schemes, "--hbc", PLT_CHANNEL, "--llc", "urllc", "--timeout",
        f"{timeout_s:g}", "--json", "--no-store",
    ]  # fmt: skip
    p = subprocess.run(argv, capture_output=True, text=True)
    rows = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            note = r.get("invalid_reason") or ""
            rows.append(
                plt_row(
                    f"chanemu {r['scheme']}",
                    PLT_CHANNEL,
                    r["page"],
                    r.get("plt_ms"),
                    r.get("valid"),
                    note,
                )
            )
    if not rows:
        raise RuntimeError(f"dch pageload exited {p.returncode}: {p.stderr[-800:]}")
    return rows


def mahimahi_plt(
    tools: dict[str, Path],
    user: str,
    pages: int,
    timeout_s: float,
    rt: int,
    work: Path,
    python: str,
) -> list[Row]:
    """Each page once in a fresh Chromium inside `mm-delay 20 mm-link 200mbit 200mbit`,
    started in the namespace where LocalReplay serves the corpus (no DNS: Chromium maps
    origins with --host-resolver-rules). Mahimahi's inner mm-link checks forwarding in
    the namespace mm-delay made; we switch it on there (as root, from outside) before
    the shell goes on."""
    from dchlab.pages import open_corpus
    from dchlab.workloads.localreplay import LocalReplay
    from dchlab.workloads.validity import judge

    corpus = open_corpus("tp5n")
    trace = write_constant_trace(work / "200mbps.trace", PLT_MBIT)
    # The driver runs as `user`, who may not reach this interpreter (a venv of root's):
    # `python` (the system's, same minor version) with this one's packages on the path.
    paths = [str(Path(REPO_ROOT) / "lab"), *site.getsitepackages()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    setup = "mm-delay 20 mm-link 200mbps"
    rows = []
    with LocalReplay(corpus) as lr, MahimahiHost(tools, user, ns=lr.ns) as host:
        # Chromium runs as `user`: it needs the NSS db (trusting the CA) as its own.
        os.chmod(lr.dir, 0o755)
        for d, _, files in os.walk(lr.home):
            os.chown(d, host.uid, host.gid)
            for f in files:
                os.chown(Path(d) / f, host.uid, host.gid)
        for page in corpus.pages[:pages]:
            driver = [
                python, "-m", "dchlab.workloads.browser", page.entry_url,
                "--timeout", f"{timeout_s:g}", "--home", str(lr.home),
                "--host-rules", lr.resolver_rules(),
            ]  # fmt: skip
            mm_link = [str(host.tools["mm-link"]), str(trace), str(trace), "--"]
            link = [*mm_link, "sh", "-c", 'echo linked; exec "$@"', "sh", *driver]
            inner = 'echo "$$"; read go; exec "$@"'
            argv = host.shell("mm-delay", ["20"], ["sh", "-c", inner, "sh", *link])
            p = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
            host.children.append(p)
            assert p.stdin and p.stdout
            pid = p.stdout.readline().strip()
            if not pid.isdigit():
                _stop(p)
                raise RuntimeError(f"{setup}: shell did not start ({pid!r})")
            if rt:
                realtime(p.pid, rt)
            nsenter = ["nsenter", "-t", pid, "-n", "sysctl", "-qw", "net.ipv4.ip_forward=1"]
            subprocess.run(nsenter, check=True)
            p.stdin.write("go\n")
            p.stdin.flush()  # communicate() closes it
            if p.stdout.readline().strip() == "linked" and rt:
                realtime(p.pid, rt)  # now mm-link's loops too; the driver stays normal
            out, _ = p.communicate(timeout=timeout_s + 90)
            lines = [x for x in out.splitlines() if x.startswith("{")]
            if not lines:
                rows.append(plt_row("mahimahi", setup, page.name, None, False, "no result"))
                continue
            # The lab's verdict, as `dch pageload` gives it: failing the requests the page's
            # record lists as missing is the page as recorded.
            r = json.loads(lines[-1])
            v = judge(r, page.missing_urls, corpus.all_hosts())
            rows.append(
                plt_row("mahimahi", setup, page.name, r.get("plt_ms"), v.valid, v.invalid_reason)
            )
    return rows


# ------------------------------------------------------------------ main
def find_trace(name: str, trace_dir: Path | None) -> tuple[Path, Path] | None:
    data = shared_data()
    base = trace_dir or (data / "traces" / "mahimahi" if data else None)
    if base is None:
        return None
    up, down = base / f"{name}.up", base / f"{name}.down"
    return (up, down) if up.is_file() and down.is_file() else None


def measure(args: argparse.Namespace, work: Path) -> Iterator[Row]:
    tools, why = mahimahi_binaries(args.mahimahi_bin)
    only = set(args.only.split(","))
    const = write_constant_trace(work / "12mbps.trace", CONST_MBIT)
    trace = find_trace(args.trace, args.trace_dir)
    rt = args.mm_rt_priority
    with contextlib.ExitStack() as stack:
        host = stack.enter_context(MahimahiHost(tools, args.user)) if tools else None

        def mm(test: str, setup: str, fn: Callable[[MahimahiHost], Row]) -> Row:
            return fn(host) if host else Row(test, "mahimahi", setup, skipped=why)

        if "ping" in only:
            yield chanemu_ping("hbc-only")
            yield chanemu_ping("all-hbc")
            yield mm("ping", "mm-delay 20", lambda h: mahimahi_ping(h, rt))
        if "const" in only:
            s = args.seconds
            yield chanemu_goodput("const", "hbc-only", "fixed:0ms/12mbit", s, CONST_MBIT)
            prof = trace_profile(work / "mm-12mbps.toml", const, const, "mm-12mbps")
            yield chanemu_goodput("const", "hbc-only", str(prof), s, CONST_MBIT)
            link = [str(const), str(const)]
            yield mm(
                "const",
                "mm-link 12mbps",
                lambda h: mahimahi_goodput(h, "const", "mm-link", link, s, CONST_MBIT, rt),
            )
        if "trace" in only:
            if trace is None:
                yield Row("trace", "both", args.trace, skipped="trace files not found")
            else:
                up, down = trace
                cap, period = trace_mean_mbit(down)
                secs = args.trace_seconds or period
                prof = trace_profile(work / f"{args.trace}.toml", up, down, args.trace)
                yield chanemu_goodput("trace", "hbc-only", str(prof), secs, cap)
                link = [str(up), str(down)]
                yield mm(
                    "trace",
                    f"mm-link {args.trace}",
                    lambda h: mahimahi_goodput(h, "trace", "mm-link", link, secs, cap, rt),
                )
        if "ceiling" in only:
            s = args.seconds
            yield chanemu_goodput("ceiling", "hbc-only", "fixed:0ms/unlimited", s, None)
            yield chanemu_goodput("ceiling", "all-hbc", "fixed:0ms/unlimited", s, None)
            yield mm(
                "ceiling",
                "mm-delay 0",
                lambda h: mahimahi_goodput(h, "ceiling", "mm-delay", ["0"], s, None, rt),
            )
    if "plt" in only:
        if shared_data() is None and not os.environ.get("DCH_CORPUS_TP5N"):
            yield Row("plt", "both", PLT_CHANNEL, skipped="tp5n pages not found")
            return
        yield from chanemu_plt(args.pages, "all-hbc,hbc-only", args.timeout)
        if tools:
            yield from mahimahi_plt(
                tools, args.user, args.pages, args.timeout, rt, work, args.driver_python
            )
        else:
            yield Row("plt", "mahimahi", "mm-delay 20 mm-link 200mbps", skipped=why)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dchlab.bench_mahimahi", description=__doc__.split("\n")[0])
    ap.add_argument("--mahimahi-bin", type=Path, help="directory with mm-delay and mm-link")
    ap.add_argument("--user", default="nobody", help="unprivileged user for Mahimahi's shells")
    ap.add_argument(
        "--mm-rt-priority",
        type=int,
        default=10,
        help="SCHED_FIFO priority of Mahimahi's packet loops, as chanemu's (0: leave them)",
    )
    ap.add_argument("--only", default=",".join(TESTS), help=f"comma-separated subset of {TESTS}")
    ap.add_argument("--trace", default="TMobile-LTE-short", help="Mahimahi trace name")
    ap.add_argument("--trace-dir", type=Path, help="default: ../shared/data/traces/mahimahi")
    ap.add_argument("--seconds", type=float, default=20, help="iperf3 time (const, ceiling)")
    ap.add_argument(
        "--trace-seconds", type=float, help="iperf3 time on the trace (default: its period)"
    )
    ap.add_argument("--pages", type=int, default=5, help="tp5n pages to load (plt)")
    ap.add_argument("--timeout", type=float, default=60, help="per page load, s (plt)")
    ap.add_argument(
        "--driver-python",
        default="/usr/bin/python3",
        help="interpreter --user runs the page-load driver with (plt; same minor version)",
    )
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    bad = set(args.only.split(",")) - set(TESTS)
    if bad:
        ap.error(f"--only: unknown test(s) {sorted(bad)}; known: {', '.join(TESTS)}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-mahimahi-") as tmp:
        os.chmod(tmp, 0o755)  # Mahimahi's user reads the trace files written here
        for row in measure(args, Path(tmp)):
            rows.append(row)
            print(markdown([row]).splitlines()[-1], flush=True)
    print(markdown(rows))
    for tool, (med, n) in plt_medians(rows).items():
        print(f"PLT median {tool}: {med:.0f} ms over {n} page(s) valid in every tool")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
