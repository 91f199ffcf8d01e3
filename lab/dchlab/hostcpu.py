"""How the machine's CPUs spent the time of one load, from /proc/stat.

A row's `host_load1` is a 1-minute average taken when the row is stored; it cannot
tell a slow VM from a busy one. Two reruns of one campaign on this VM once differed by
6-10% in every load's PLT with the same load average (docs/results.md, "Stability"),
so every load also records, over exactly its own duration and across all CPUs:

- `host_cpu_busy`: the share of CPU time spent running anything (user, nice, system,
  irq, softirq) — the load's own processes included, so it is high by itself on a
  2-core machine; compare it between loads of one scheme;
- `host_cpu_steal`: the share the hypervisor gave to other guests (`steal`), i.e.
  CPU this machine wanted and did not get.

Both are None where /proc/stat cannot be read (not Linux) or no tick passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")

# Fields of the aggregate `cpu` line of /proc/stat (proc(5)), in clock ticks. `guest`
# and `guest_nice` are already counted in `user` and `nice`, so they are not summed.
USER, NICE, SYSTEM, IDLE, IOWAIT, IRQ, SOFTIRQ, STEAL = range(8)


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative ticks of all CPUs since boot."""

    busy: int
    idle: int  # idle + iowait
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal


def parse_cpu_line(line: str) -> CpuTimes:
    """The aggregate `cpu  user nice system idle iowait irq softirq steal ...` line."""
    parts = line.split()
    if not parts or parts[0] != "cpu" or len(parts) < 1 + STEAL + 1:
        raise ValueError(f"not the aggregate cpu line of /proc/stat: {line!r}")
    v = [int(x) for x in parts[1 : 1 + STEAL + 1]]
    return CpuTimes(
        busy=v[USER] + v[NICE] + v[SYSTEM] + v[IRQ] + v[SOFTIRQ],
        idle=v[IDLE] + v[IOWAIT],
        steal=v[STEAL],
    )


def read_cpu_times(path: Path = PROC_STAT) -> CpuTimes | None:
    """The machine's CPU times now; None where /proc/stat is missing or unreadable."""
    try:
        with path.open() as f:
            return parse_cpu_line(f.readline())
    except (OSError, ValueError):
        return None


def shares(before: CpuTimes | None, after: CpuTimes | None) -> dict[str, float | None]:
    """`host_cpu_busy` and `host_cpu_steal` between two readings (None: unknown)."""
    if before is None or after is None or after.total <= before.total:
        return {"host_cpu_busy": None, "host_cpu_steal": None}
    total = after.total - before.total
    return {
        "host_cpu_busy": (after.busy - before.busy) / total,
        "host_cpu_steal": (after.steal - before.steal) / total,
    }
