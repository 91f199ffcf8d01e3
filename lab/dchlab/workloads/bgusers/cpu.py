"""What N devices cost this machine's CPU (issue 41: where the machine, not the network,
becomes the limit).

For each N: a fresh N-device testbed, background users on ue2..ueN (think times as
given), and over `seconds` the CPU time (user + system, /proc/<pid>/stat) of the run's
processes by kind: emulators (chanemu), agents (dchannel), background users (either
client) and servers (webreplay, dnsmasq); also the time to build the testbed and to
start the users. The processes are those in the run's namespaces (`ip netns pids`)
plus the emulators (root namespace, named by the run's prefix).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from dchlab.testbed import Testbed, TestbedConfig
from dchlab.workloads.bgusers import background

KINDS = {"release/bguser ": "users", "chanemu": "emulators", "dchannel": "agents", "bgusers.replay": "users",
         "webreplay": "servers", "dnsmasq": "servers"}  # fmt: skip
_TICK = os.sysconf("SC_CLK_TCK")


def run_pids(tb: Testbed) -> list[int]:
    """Every process of the run: those in its namespaces and those naming its prefix."""
    pids: set[int] = set()
    for ns in tb.netns.values():
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        pids |= {int(p) for p in out.stdout.split()}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if tb.prefix.encode() in (proc / "cmdline").read_bytes():
                    pids.add(int(proc.name))
            except OSError:
                continue
    return sorted(pids)


def cpu_by_kind(pids: list[int]) -> dict[str, float]:
    """CPU seconds used so far by `pids`, per kind (KINDS; others: "other")."""
    out: dict[str, float] = {}
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        kind = next((k for n, k in KINDS.items() if n in cmd), "other")
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK
    return out


def measure(cfg: TestbedConfig, users: background.Users, seconds: float) -> dict[str, Any]:
    """One N: setup times and the cores each kind used over `seconds`."""
    t0 = time.monotonic()
    with Testbed(cfg) as tb:
        t1 = time.monotonic()
        running = background.start(tb, users) if cfg.devices > 1 else []
        t2 = time.monotonic()
        pids = run_pids(tb)
        before = cpu_by_kind(pids)
        time.sleep(seconds)
        after = cpu_by_kind(pids)
        summary = background.stop(running) if running else {"pages": 0}
    cores = {k: round((after.get(k, 0.0) - before.get(k, 0.0)) / seconds, 3) for k in after}
    return {"devices": cfg.devices, "setup_s": round(t1 - t0, 2), "users_start_s": round(t2 - t1, 2),
            "cores": cores, "cores_total": round(sum(cores.values()), 3),
            "bg_pages": summary["pages"]}  # fmt: skip
