"""The connections a page load opened and what opening them cost, from Chromium's
per-response ResourceTiming (CDP `Network.Response.timing`, `connectionId`,
`connectionReused`): the measured side of "QUIC saves a handshake round trip" (issue 39).

A response *opened* its connection when its timing has a connect phase (connectStart ≥
0; Chromium sets −1 when the request found the connection open) and the connection was
not reused. Its handshake is connectEnd − connectStart: TCP's handshake plus TLS 1.3's
for h2 (2 round trips), QUIC's combined transport and TLS handshake for h3 (1 round
trip, RFC 9000 §7). DNS is before connectStart and not in it.
"""

from __future__ import annotations

from typing import Any


def note_connection(connections: list[dict[str, Any]], response: dict[str, Any]) -> None:
    """Append the connection `response` came over to `connections` ({"id", "protocol",
    "handshake_ms"}) if the response opened it (module doc); a connection counts once
    (later responses naming the same connectionId are ignored)."""
    timing = response.get("timing") or {}
    start, end = timing.get("connectStart", -1), timing.get("connectEnd", -1)
    if response.get("connectionReused") or start is None or end is None:
        return
    if start < 0 or end < start:
        return
    cid = response.get("connectionId")
    if cid is not None and any(c["id"] == cid for c in connections):
        return
    connections.append(
        {
            "id": cid,
            "protocol": str(response.get("protocol") or "?"),
            "handshake_ms": round(float(end - start), 3),
        }
    )


def handshake_summary(connections: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The row's `handshakes` (connections opened with a timed handshake) and
    `handshake_ms_p50` (their median handshake, ms). Both None when the load's result
    has no connection list (a driver older than this module); a load that opened none
    has 0 and None."""
    if connections is None:
        return {"handshakes": None, "handshake_ms_p50": None}
    times = sorted(float(c["handshake_ms"]) for c in connections)
    if not times:
        return {"handshakes": 0, "handshake_ms_p50": None}
    mid = len(times) // 2
    p50 = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    return {"handshakes": len(times), "handshake_ms_p50": p50}
