"""The channel-fault experiment (issue 16 item 1, docs/reliability.md): one testbed
under `dchannel` whose HBC or LLC goes down on a repeating schedule while curl
downloads a body over HTTPS, and the figures read from the agents' logs.

Clocks: chanemu's fault schedule is in its run time; its stats give the run's
start on CLOCK_MONOTONIC (`start_mono_ns`), the clock of the agents' decision and
arrival logs (docs/agent.md) and of `time.monotonic_ns()`, so every outage window
is placed exactly on the logs' time line.

Figures per outage window [a, b) that lies inside the transfer:
- failover_ms[role]: last packet the role's agent steered onto the dead link,
  minus a (0 when it sent nothing there): how long it kept feeding the dead link;
- return_ms[role]: first packet steered onto the link after b, minus b;
- stall_ms: per TCP flow carrying data from the server, the largest gap between
  two data packets arriving at the client agent (from either channel, before the
  reorder buffer); the whole transfer and the gap that overlaps the window;
- carried_bytes: inner bytes that arrived at the client over the live link
  during the window.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dchlab.testbed import Testbed, TestbedConfig
from dchlab.traces.faults import Fault, with_faults

HBC = "fixed:40ms/20mbit"  # ~13 s for 30 MB: spans at least one whole outage period
LLC = "urllc"  # 5 ms RTT, 2 Mbit/s
SIZE = 30_000_000
PERIOD_MS = 8000.0
DOWN_MS = (3000.0, 5000.0)  # 2 s down in every 8 s period


def body_sha(n: int) -> str:
    """The sha256 of webreplay's /bytes/N body (byte i = i mod 251)."""
    block = bytes(i % 251 for i in range(251 * 4096))
    h = hashlib.sha256()
    full, rest = divmod(n, len(block))
    for _ in range(full):
        h.update(block)
    h.update(block[:rest])  # len(block) is a multiple of 251: the pattern continues
    return h.hexdigest()


@dataclass
class Window:
    """One outage window on CLOCK_MONOTONIC (ns) and what happened in it."""

    a: int
    b: int
    failover_ms: dict[str, float] = field(default_factory=dict)
    return_ms: dict[str, float | None] = field(default_factory=dict)
    stall_ms: float = 0.0
    carried_bytes: int = 0


@dataclass
class FaultRun:
    link: str
    ok: bool
    error: str
    transfer_s: float
    stall_ms: dict[str, float]
    windows: list[Window]
    dropped_outage: int
    agent_args: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "ok": self.ok,
            "error": self.error,
            "transfer_s": round(self.transfer_s, 3),
            "stall_ms": self.stall_ms,
            "dropped_outage": self.dropped_outage,
            "windows": [
                {
                    "failover_ms": w.failover_ms,
                    "return_ms": w.return_ms,
                    "stall_ms": w.stall_ms,
                    "carried_bytes": w.carried_bytes,
                }
                for w in self.windows
            ],
        }


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def run_outage(
    link: str,
    workdir: Path,
    *,
    seed: int = 1,
    size: int = SIZE,
    hbc: str = HBC,
    llc: str = LLC,
    down_ms: tuple[float, float] = DOWN_MS,
    period_ms: float = PERIOD_MS,
    agent_args: tuple[str, ...] = (),
) -> FaultRun:
    """Download `size` bytes under `dchannel` while `link` ("hbc" or "llc") is down
    from down_ms[0] to down_ms[1] of every `period_ms`, both directions."""
    workdir.mkdir(parents=True, exist_ok=True)
    fault = [Fault(down_ms[0], down_ms[1], ("uplink", "downlink"))]
    specs = {"hbc": hbc, "llc": llc}
    specs[link] = with_faults(specs[link], seed, fault, period_ms)
    logs = {r: (workdir / f"{r}.decisions.csv", workdir / f"{r}.arrivals.csv") for r in ("client", "gateway")}  # fmt: skip
    cfg = TestbedConfig(
        scheme="dchannel",
        hbc=specs["hbc"],
        llc=specs["llc"],
        seed=seed,
        agent_args=list(agent_args),
        client_args=["--decision-log", str(logs["client"][0]), "--arrival-log", str(logs["client"][1])],
        gateway_args=["--decision-log", str(logs["gateway"][0]), "--arrival-log", str(logs["gateway"][1])],
    )  # fmt: skip
    with Testbed(cfg) as tb:
        t0 = time.monotonic_ns()
        r = tb.run_ue(
            ["sh", "-c", f"curl -sS --fail --max-time 150 https://server.test/bytes/{size} | sha256sum"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        t1 = time.monotonic_ns()
    stats = tb.stats()
    emu = stats["links"][link]
    got = r.stdout.split()[0] if r.stdout else ""
    ok = got == body_sha(size)
    return analyse(
        link,
        logs,
        start_mono_ns=int(emu["start_mono_ns"]),
        down_ms=down_ms,
        period_ms=period_ms,
        span=(t0, t1),
        ok=ok,
        error="" if ok else f"body sha256 {got or '(none)'}: {r.stderr.strip()[-300:]}",
        dropped_outage=int(emu["uplink"]["pkts_dropped_outage"])
        + int(emu["downlink"]["pkts_dropped_outage"]),
        agent_args=agent_args,
    )


def analyse(
    link: str,
    logs: dict[str, tuple[Path, Path]],
    *,
    start_mono_ns: int,
    down_ms: tuple[float, float],
    period_ms: float,
    span: tuple[int, int],
    ok: bool,
    error: str,
    dropped_outage: int,
    agent_args: tuple[str, ...] = (),
) -> FaultRun:
    """The figures of the module docstring from the agents' logs."""
    dec = {role: _rows(logs[role][0]) for role in ("client", "gateway")}
    arrivals = _rows(logs["client"][1])
    # (flow_id, seq) of the gateway's data packets → the flow they belong to
    data = {
        (d["flow_id"], d["seq"]): d["flow"]
        for d in dec["gateway"]
        if d["flow"].startswith("tcp ") and int(d["payload"]) > 0
    }
    per_flow: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    for row in arrivals:
        flow = data.get((row["flow_id"], row["seq"]))
        if flow is not None:
            per_flow[flow].append((int(row["t_mono_ns"]), row["channel"], int(row["size"])))
    for v in per_flow.values():
        v.sort()

    def gaps(times: list[int]) -> list[tuple[int, int]]:
        return list(itertools.pairwise(times))

    stall = {
        f: max((b - a for a, b in gaps([t for t, _, _ in v])), default=0) / 1e6
        for f, v in per_flow.items()
    }
    # the outage windows that lie wholly inside the transfer
    first = max(span[0], min((v[0][0] for v in per_flow.values()), default=span[0]))
    last = min(span[1], max((v[-1][0] for v in per_flow.values()), default=span[1]))
    period, lo, hi = int(period_ms * 1e6), int(down_ms[0] * 1e6), int(down_ms[1] * 1e6)
    windows = []
    k = max(0, (first - start_mono_ns - lo) // period)
    while start_mono_ns + k * period + hi <= last:
        a, b = start_mono_ns + k * period + lo, start_mono_ns + k * period + hi
        k += 1
        if a < first:
            continue
        w = Window(a, b)
        for role, rows in dec.items():
            on_link = sorted(int(d["t_mono_ns"]) for d in rows if d["channel"] == link)
            inside = [t for t in on_link if a <= t < b]
            w.failover_ms[role] = (inside[-1] - a) / 1e6 if inside else 0.0
            after = [t for t in on_link if t >= b]
            w.return_ms[role] = (after[0] - b) / 1e6 if after else None
        for v in per_flow.values():
            times = [t for t, _, _ in v]
            for x, y in gaps(times):
                if x < b and y > a:  # the gap overlaps the window
                    w.stall_ms = max(w.stall_ms, (y - x) / 1e6)
            w.carried_bytes += sum(s for t, ch, s in v if a <= t < b and ch != link)
        windows.append(w)
    return FaultRun(
        link=link,
        ok=ok,
        error=error,
        transfer_s=(span[1] - span[0]) / 1e9,
        stall_ms=stall,
        windows=windows,
        dropped_outage=dropped_outage,
        agent_args=agent_args,
    )
