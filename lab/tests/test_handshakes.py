"""The connections a load opened and their handshakes (dchlab.workloads.handshakes), from
hand-made CDP responses shaped as Chromium 156 sends them (Network.Response: timing in
ms relative to requestTime, −1 for a phase that did not happen)."""

from __future__ import annotations

from typing import Any

from dchlab.workloads.handshakes import handshake_summary, note_connection
from dchlab.workloads.validity import page_outcome


def response(cid: int, start: float, end: float, proto: str = "h2", reused: bool = False) -> dict[str, Any]:  # fmt: skip
    return {
        "connectionId": cid,
        "connectionReused": reused,
        "protocol": proto,
        "timing": {"connectStart": start, "connectEnd": end, "sslStart": -1, "sslEnd": -1},
    }


def test_a_connection_counts_once_with_the_handshake_of_the_response_that_opened_it() -> None:
    conns: list[dict[str, Any]] = []
    note_connection(conns, response(7, 2.0, 110.5))  # opened: TCP + TLS, 108.5 ms
    note_connection(conns, response(7, 0.0, 50.0))  # same id again: not a second connection
    note_connection(conns, response(9, -1, -1))  # found an open connection: no connect phase
    note_connection(conns, response(11, 1.0, 30.0, reused=True))  # reused: not opened here
    note_connection(conns, response(12, 5.0, 60.0, proto="h3"))  # a QUIC connection, 55 ms
    assert conns == [
        {"id": 7, "protocol": "h2", "handshake_ms": 108.5},
        {"id": 12, "protocol": "h3", "handshake_ms": 55.0},
    ]


def test_a_response_without_timing_opens_nothing() -> None:
    conns: list[dict[str, Any]] = []
    note_connection(conns, {"connectionId": 1, "protocol": "h2"})
    note_connection(conns, {"connectionId": 2, "timing": {"connectStart": 10, "connectEnd": 5}})
    assert conns == []


def test_summary_is_the_count_and_the_median() -> None:
    three = [{"handshake_ms": x} for x in (90.0, 30.0, 60.0)]
    assert handshake_summary(three) == {"handshakes": 3, "handshake_ms_p50": 60.0}
    four = [{"handshake_ms": x} for x in (90.0, 30.0, 60.0, 10.0)]  # (30 + 60) / 2
    assert handshake_summary(four) == {"handshakes": 4, "handshake_ms_p50": 45.0}
    assert handshake_summary([]) == {"handshakes": 0, "handshake_ms_p50": None}
    # a result from a driver that did not list connections: unknown, not zero
    assert handshake_summary(None) == {"handshakes": None, "handshake_ms_p50": None}


def test_page_outcome_carries_the_summary_into_the_row() -> None:
    res = {
        "valid": True,
        "plt_ms": 900.0,
        "resources_loaded": 2,
        "protocols": {"h3": 2},
        "connections": [{"id": 1, "protocol": "h3", "handshake_ms": 41.0}],
    }
    out = page_outcome(res, [], protocol="h3")
    assert (out.handshakes, out.handshake_ms_p50) == (1, 41.0)
