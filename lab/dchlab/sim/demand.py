"""One user's LLC demand, from the traces of its page loads (what the testbed's agent
put on the LLC, `channel` = llc).

Per page load: LLC bits (wire bytes: IP length + the agents' per-packet overhead), the
load's span (first to last packet), and its burstiness: the peak LLC rate over any
window of 10 ms and of 100 ms (sliding over packet arrivals), per direction.

Per second of browsing: a user alternates page loads and think times; with think
times of mean T (the simulator draws them exponentially) the long-run LLC rate of one
user is `mean bits per load / (mean span + T)` (renewal-reward theorem).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dchlab.sim.logs import Packet

#: The agents' default per-packet overhead on a channel (dchannel header + outer
#: UDP/IP), which llcsim also charges (`--overhead`).
OVERHEAD_BYTES = 44


@dataclass(frozen=True)
class PageDemand:
    """One page load's LLC demand."""

    page: str
    span_s: float
    pkts: int
    llc_pkts: int
    llc_bits: float  # both directions
    llc_bits_up: float
    llc_bits_down: float
    peak_10ms_mbit: float  # max over windows and directions
    peak_100ms_mbit: float


def peak_rate_mbit(times_ns: Sequence[int], bits: Sequence[float], window_ns: int) -> float:
    """The largest rate (Mbit/s) of `bits` sent within any window of `window_ns` that
    starts at a packet: max over i of (bits of packets in [t_i, t_i + window)) / window."""
    best = 0.0
    total = 0.0
    j = 0
    for i, t in enumerate(times_ns):
        # extend the window to every packet before t + window (times are sorted)
        while j < len(times_ns) and times_ns[j] < t + window_ns:
            total += bits[j]
            j += 1
        best = max(best, total)
        total -= bits[i]
    return best / (window_ns / 1e9) / 1e6


def page_demand(page: str, packets: Sequence[Packet], overhead: int = OVERHEAD_BYTES) -> PageDemand:
    """The LLC demand of one page load's trace."""
    per_dir: dict[str, tuple[list[int], list[float]]] = {"up": ([], []), "down": ([], [])}
    for p in packets:
        if p.channel == "llc":
            times, bits = per_dir[p.dir]
            times.append(p.t_ns)
            bits.append((p.ip_len + overhead) * 8.0)
    up, down = sum(per_dir["up"][1]), sum(per_dir["down"][1])

    def peak(window_ns: int) -> float:
        return max(peak_rate_mbit(t, b, window_ns) for t, b in per_dir.values())

    return PageDemand(
        page=page,
        span_s=(packets[-1].t_ns - packets[0].t_ns) / 1e9 if packets else 0.0,
        pkts=len(packets),
        llc_pkts=sum(len(t) for t, _ in per_dir.values()),
        llc_bits=up + down,
        llc_bits_up=up,
        llc_bits_down=down,
        peak_10ms_mbit=peak(10_000_000),
        peak_100ms_mbit=peak(100_000_000),
    )


def browsing_rate_bps(pages: Sequence[PageDemand], think_s: float) -> float:
    """One user's long-run LLC rate (bit/s, both directions) browsing these pages in
    turn (uniformly) with think times of mean `think_s` (see the module docs)."""
    if not pages:
        raise ValueError("no page loads to average")
    bits = sum(p.llc_bits for p in pages) / len(pages)
    span = sum(p.span_s for p in pages) / len(pages)
    return bits / (span + think_s)
