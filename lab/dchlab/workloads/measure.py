"""What every workload on the testbed shares: the row it fills (dchlab.workloads.rows),
the testbed configuration of its run (dchlab.run_config: the paired seed is applied
there only) and the frame that measures one run in a fresh testbed.

workloads.api (page loads, curl phases, bulk) and apps.run (app interactions) both
build on it; it imports neither, so the two do not import each other's internals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# paired_seed, testbed_config: re-exported (callers of the workload layer use them)
from dchlab.run_config import RunConfig, paired_seed, testbed_config  # noqa: F401

# ROW_KEYS: re-exported (the workload layer's row keys, dchlab.workloads.rows)
from dchlab.workloads.rows import ROW_KEYS, Outcome, make_row  # noqa: F401

#: The name this module gave RunConfig before it moved to dchlab.run_config.
RunSpec = RunConfig


def new_row(spec: RunConfig, workload: str, page: str) -> dict[str, Any]:
    """The row a workload fills: `spec`'s configuration columns, nothing measured yet."""
    return make_row(spec, workload, page, Outcome())


def channel_counters(stats: dict[str, Any]) -> dict[str, int | None]:
    """Bytes and packets (both directions) on the ue side of each channel's link."""
    ue = (stats.get("interfaces") or {}).get("ue") or {}
    out: dict[str, int | None] = {}
    for ch in ("hbc", "llc"):
        c = ue.get(ch)
        out[f"bytes_{ch}"] = c["rx_bytes"] + c["tx_bytes"] if c else None
        out[f"pkts_{ch}"] = c["rx_packets"] + c["tx_packets"] if c else None
    return out


def measure(
    row: dict[str, Any],
    cfg: Any,
    body: Callable[[Any], None],
    prepare: Callable[[Any], None] | None = None,
    tb: Any = None,
) -> dict[str, Any]:
    """Run `body(tb)` in a fresh testbed; fill offset, stats and channel counters.
    `prepare(tb)` runs before the testbed is built (e.g. to register tb.on_ue hooks);
    `tb`: a prepared testbed (dchlab.workloads.ahead) to start instead of a new one."""
    from dchlab import hostcpu
    from dchlab.testbed import Testbed, TestbedError, TestbedInterrupted

    tb = tb or Testbed(cfg)
    if prepare is not None:
        prepare(tb)
    try:
        with tb:
            row["trace_offset_ms"] = tb.offset_ms
            cpu_before = hostcpu.read_cpu_times()
            try:
                body(tb)
            finally:
                row.update(hostcpu.shares(cpu_before, hostcpu.read_cpu_times()))
    except TestbedInterrupted:
        raise  # SIGTERM/SIGHUP: the owner stops, this is not an invalid load
    except TestbedError as e:
        row["valid"] = False
        row["invalid_reason"] = f"testbed: {e}"
    stats = tb.stats()
    row["stats"] = stats
    reason = tb.scheme.invalid_reason(stats)
    if reason and row.get("valid", True):
        row["valid"] = False
        row["invalid_reason"] = reason
    row.update(channel_counters(stats))
    return row
