"""What one load measured about its transport, read from its row: the quantities that
can explain why a scheme gains differently over HTTP/3 than over HTTP/2 (issue 39 item
5; used by protocol_why.py). Every fact is a number or None (not recorded in this row:
older rows lack the newer facts, and loads without agents, such as `ideal`, lack theirs).

- `plt_ms`: the row's metric;
- `handshake_ms`, `handshakes`: the median handshake of the connections the load opened
  and their count (`handshake_ms_p50`, `handshakes`; dchlab.workloads.handshakes). Rows
  from before those columns have the main document's connect + TLS only
  (`connect_ms + tls_ms`): `handshake_ms` is that and `handshake_scope` says "main
  document" instead of "per connection";
- `handshake_rtts`: `handshake_ms` in HBC round trips (the client agent's HBC RTT,
  `stats.agents.client.rtt_ms.hbc`): ≈ 2 for TCP + TLS 1.3 and ≈ 1 for QUIC when the
  handshake ran on the HBC (all-hbc);
- `ack_up_<ch>`, `ack_down_<ch>`: ACK-like packets the client (uplink) and the gateway
  (downlink) sent on channel `ch`: TCP pure ACKs and QUIC short-header packets of
  ACK size (the agents' `classes`, dchannel_core::packet_class);
- `pkts_up_<ch>`, `pkts_down_<ch>`: all data packets the agents sent on `ch` per
  direction (`channels.<ch>.tx_pkts`), in every row with agents;
- `hbc_burst_pkts`: the HBC's mean downlink burst, packets the gateway sent on the HBC
  per burst (`channels.hbc.tx_pkts / tx_bursts`; a burst ends at a gap of 1 ms or more,
  dchannel_core::bursts): how paced the server's sending arrived;
- `reorder_held`, `reorder_timeouts`: packets the two agents' reorder buffers held and
  released on timeout, summed; `reorder_max_kb`: the larger of their peak occupancies.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an

CHANNELS = ("hbc", "llc")
#: The packet classes (dchannel_core::packet_class) that stand for an acknowledgement.
ACK_CLASSES = ("tcp_pure_ack", "quic_short_small")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _get(d: Any, *path: str) -> Any:
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def transport_facts(row: dict[str, Any], metric: str = "plt_ms") -> dict[str, Any]:
    """The transport facts of one load's row (module doc): {name: float | None}, plus
    `handshake_scope` ("per connection", "main document" or None)."""
    facts: dict[str, Any] = {"plt_ms": _num(row.get(metric))}
    hs = _num(row.get("handshake_ms_p50"))
    scope = "per connection" if hs is not None else None
    if (
        hs is None
        and _num(row.get("connect_ms")) is not None
        and _num(row.get("tls_ms")) is not None
    ):
        hs, scope = float(row["connect_ms"]) + float(row["tls_ms"]), "main document"
    facts.update(handshake_ms=hs, handshake_scope=scope, handshakes=_num(row.get("handshakes")))
    agents = _get(an.stats_of(row), "agents") or {}
    client, gateway = agents.get("client"), agents.get("gateway")
    rtt = _num(_get(client, "rtt_ms", "hbc"))
    facts["handshake_rtts"] = hs / rtt if hs is not None and rtt else None
    for role, direction in ((client, "up"), (gateway, "down")):
        classes = _get(role, "classes")
        for ch in CHANNELS:
            facts[f"pkts_{direction}_{ch}"] = _num(_get(role, "channels", ch, "tx_pkts"))
            facts[f"ack_{direction}_{ch}"] = (
                float(sum(int(classes.get(f"{ch}:{k}", 0)) for k in ACK_CLASSES))
                if isinstance(classes, dict)
                else None
            )
    pkts, bursts = (_num(_get(gateway, "channels", "hbc", k)) for k in ("tx_pkts", "tx_bursts"))
    facts["hbc_burst_pkts"] = pkts / bursts if pkts is not None and bursts else None
    reorders = [_get(a, "reorder") for a in (client, gateway)]
    if all(isinstance(r, dict) for r in reorders):
        facts["reorder_held"] = _sum([_num(r.get("held")) for r in reorders])
        facts["reorder_timeouts"] = _sum([_num(r.get("timeout_releases")) for r in reorders])
        peaks = [_num(r.get("max_occupancy_bytes")) for r in reorders]
        facts["reorder_max_kb"] = None if None in peaks else max(p or 0.0 for p in peaks) / 1000
    else:
        facts.update(reorder_held=None, reorder_timeouts=None, reorder_max_kb=None)
    return facts
