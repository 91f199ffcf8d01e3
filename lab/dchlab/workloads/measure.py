"""What every workload on the testbed shares: the row it fills (dchlab.workloads.rows),
the testbed configuration of its run (dchlab.run_config: the paired seed is applied
there only) and the frame that measures one run in a fresh testbed.

workloads.api (page loads, curl phases, bulk) and apps.run (app interactions) both
build on it; it imports neither, so the two do not import each other's internals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

# paired_seed, testbed_config: re-exported (callers of the workload layer use them)
from dchlab.run_config import RunConfig, paired_seed, testbed_config  # noqa: F401
from dchlab.testbed.servers import QUIC_STATS_KEY

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


def quic_counters(stats: dict[str, Any]) -> dict[str, int | None]:
    """The servers' QUIC loss recovery over every HTTP/3 connection of the run (webreplay
    --quic-stats-json, in stats()["servers"][QUIC_STATS_KEY]): packets sent, declared
    lost, congestion events. None when no QUIC endpoint ran (h2) or it wrote nothing."""
    totals = ((stats.get("servers") or {}).get(QUIC_STATS_KEY) or {}).get("totals")
    names = ("sent_packets", "lost_packets", "congestion_events")
    if not isinstance(totals, dict):
        return {f"quic_{n}": None for n in names}
    return {f"quic_{n}": int(totals[n]) if isinstance(totals.get(n), int) else None for n in names}


@dataclass(frozen=True)
class Frame:
    """What the testbed measured around a workload's body (columns of rows.Outcome: the
    trace offset, the machine's CPU shares, each channel's counters, the stats) and why
    it made the measurement invalid, if it did."""

    trace_offset_ms: float | None = None  # None: the testbed never started
    host_cpu_busy: float | None = None
    host_cpu_steal: float | None = None
    bytes_hbc: int | None = None
    bytes_llc: int | None = None
    pkts_hbc: int | None = None
    pkts_llc: int | None = None
    quic_sent_packets: int | None = None
    quic_lost_packets: int | None = None
    quic_congestion_events: int | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    #: `testbed: ...`: the testbed failed under the workload (the lab failed)
    testbed_failure: str | None = None
    #: the scheme never took effect (its stats show it; Scheme.invalid_reason)
    scheme_failure: str | None = None

    def columns(self) -> dict[str, Any]:
        """The row columns it measured."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.endswith("_failure")}  # fmt: skip

    def verdict(self, valid: bool, reason: str) -> tuple[bool, str]:
        """The measurement's (valid, invalid_reason) once the testbed had its say on the
        workload's own: a failed testbed invalidates it, a scheme that never took effect
        invalidates a load that was valid."""
        if self.testbed_failure:
            return False, self.testbed_failure
        if self.scheme_failure and valid:
            return False, self.scheme_failure
        return valid, reason

    def judged(self, outcome: Outcome) -> Outcome:
        """The workload's `outcome` with the columns this frame measured and its verdict
        (`verdict`) on the outcome's own."""
        valid, reason = self.verdict(outcome.valid, outcome.invalid_reason)
        return replace(outcome, **self.columns(), valid=valid, invalid_reason=reason)


def in_testbed(tb: Any, body: Callable[[Any], None]) -> Frame:
    """Start `tb`, run `body(tb)` in it, tear it down: what the testbed measured. A
    TestbedError (set-up, a daemon that died) becomes the frame's testbed_failure;
    TestbedInterrupted (SIGTERM/SIGHUP) propagates: the owner stops."""
    from dchlab import hostcpu
    from dchlab.testbed import TestbedError, TestbedInterrupted

    offset: float | None = None
    cpu: dict[str, float | None] = {}
    failure = None
    try:
        with tb:
            offset = tb.offset_ms
            cpu_before = hostcpu.read_cpu_times()
            try:
                body(tb)
            finally:
                cpu = hostcpu.shares(cpu_before, hostcpu.read_cpu_times())
    except TestbedInterrupted:
        raise  # SIGTERM/SIGHUP: the owner stops, this is not an invalid load
    except TestbedError as e:
        failure = f"testbed: {e}"
    stats = tb.stats()
    return Frame(
        trace_offset_ms=offset,
        host_cpu_busy=cpu.get("host_cpu_busy"),
        host_cpu_steal=cpu.get("host_cpu_steal"),
        **channel_counters(stats),
        **quic_counters(stats),
        stats=stats,
        testbed_failure=failure,
        scheme_failure=tb.scheme.invalid_reason(stats),
    )


def measure(
    row: dict[str, Any],
    cfg: Any,
    body: Callable[[Any], None],
    prepare: Callable[[Any], None] | None = None,
    tb: Any = None,
) -> dict[str, Any]:
    """Run `body(tb)` (which fills the workload's columns of `row`) in a fresh testbed
    (`cfg`) or the given one (`tb`: from a TestbedPool); add the frame's columns and its
    verdict. `prepare(tb)` runs before the testbed is built (e.g. to register tb.on_ue
    hooks)."""
    from dchlab.testbed import Testbed

    tb = tb or Testbed(cfg)
    if prepare is not None:
        prepare(tb)
    frame = in_testbed(tb, body)
    row.update(frame.columns())
    row["valid"], row["invalid_reason"] = frame.verdict(
        row.get("valid", True), row.get("invalid_reason") or ""
    )
    return row
