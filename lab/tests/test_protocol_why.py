"""Why a scheme's gain differs between h2 and h3 (analysis.by_protocol's second table,
dchlab.experiments.analyses.protocol_why and transport_facts), on hand-made rows whose
expected cells are computed by hand in each test's docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dchlab.experiments.analyses.protocol_why import THRESHOLD_POINTS, why_table
from dchlab.experiments.analyses.transport_facts import transport_facts
from dchlab.experiments.campaign import Campaign, load_campaign

ARMS = ["all-hbc", "dchannel", "ideal"]


def _campaign(tmp_path: Path) -> Campaign:
    schemes: list[Any] = [*ARMS, *({"label": f"{a}-h3", "scheme": a, "protocol": "h3"} for a in ARMS)]  # fmt: skip
    data = {
        "name": "t-why",
        "schemes": schemes,
        "conditions": [{"name": "embb", "hbc": "fixed:40ms/200mbit", "llc": "urllc"}],
        "workload": {"kind": "bulk", "sizes": ["10KB"]},
        "analysis": {"kind": "gain", "baseline": "all-hbc", "by_protocol": True},
    }
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_campaign(p, check_channels=False)


def _agent(classes: dict[str, int] | None, pkts: int, bursts: int | None, held: int,
           timeouts: int, peak: int) -> dict[str, Any]:  # fmt: skip
    hbc: dict[str, Any] = {"tx_pkts": pkts}
    if bursts is not None:
        hbc["tx_bursts"] = bursts
    a: dict[str, Any] = {
        "rtt_ms": {"hbc": 50.0, "llc": 5.0},
        "channels": {"hbc": hbc, "llc": {"tx_pkts": 300}},
        "reorder": {"held": held, "timeout_releases": timeouts, "max_occupancy_bytes": peak},
    }
    if classes is not None:
        a["classes"] = classes
    return a


def _row(arm: str, page: str, plt: float, **kw: Any) -> dict[str, Any]:
    return {"arm": arm, "condition": "embb", "item": page, "trial": 0, "valid": True,
            "plt_ms": plt, "cell": f"embb|{page}|t0|{arm}", **kw}  # fmt: skip


def _rows(new: bool) -> list[dict[str, Any]]:
    """Two pages. PLT (ms), p1 and p2 alike: h2 all-hbc 1000, dchannel 800 (gain 20%),
    ideal 600 (40%); h3 all-hbc 900, dchannel 810 (10%), ideal 558 (38%). `new`: the
    facts of rows recorded since issue 39 item 5 (handshakes per connection, packet
    classes, HBC bursts); else only what older rows have (main document connect+TLS)."""
    ack_h2 = ({"llc:tcp_pure_ack": 300, "hbc:tcp_pure_ack": 10, "llc:tcp_data": 20},
              {"llc:tcp_pure_ack": 5, "hbc:tcp_data": 200})  # fmt: skip
    ack_h3 = ({"llc:quic_short_small": 200, "hbc:quic_short_small": 4, "llc:quic_short_data": 50},
              {"llc:quic_short_small": 2, "hbc:quic_short_data": 210})  # fmt: skip
    rows = []
    for page, i in (("p1", 0), ("p2", 1)):
        for arm, plt, hs, n, acks, bursts, reorder in (
            ("all-hbc", 1000.0, 100.0, 6, None, 25, (0, 0, 0, 0)),
            ("all-hbc-h3", 900.0, 50.0, 6, None, 40, (0, 0, 0, 0)),
            ("dchannel", 800.0, (100.0, 120.0)[i], (6, 8)[i], ack_h2, 20, (30, 10, 1, 3000)),
            ("dchannel-h3", 810.0, (50.0, 70.0)[i], 5, ack_h3, 50, (100, 0, 3, 9000)),
        ):
            held_c, held_g, to, peak = reorder
            stats = {
                "agents": {
                    "client": _agent(acks[0] if acks and new else None, 10, None, held_c, to, peak),
                    "gateway": _agent(
                        acks[1] if acks and new else None,
                        200,
                        bursts if new else None,
                        held_g,
                        0,
                        peak // 2,
                    ),
                }
            }
            extra = {"handshake_ms_p50": hs, "handshakes": n} if new else {}
            rows.append(_row(arm, page, plt, connect_ms=hs / 2, tls_ms=hs / 2 + 4, stats=stats, **extra))  # fmt: skip
        rows += [_row("ideal", page, 600.0), _row("ideal-h3", page, 558.0)]
    return rows


def test_transport_facts_of_a_new_row() -> None:
    """dchannel-h3 on p2: handshake 70 ms over the client's HBC RTT of 50 ms = 1.4; ACK-
    like up on the LLC 200, on the HBC 4, down 2 and 0; the gateway's HBC sent 200
    packets in 50 bursts = 4.0 per burst; holds 100 + 0, timeouts 3 + 0, peak max(9000,
    4500) bytes = 9.0 KB."""
    row = next(r for r in _rows(True) if r["arm"] == "dchannel-h3" and r["item"] == "p2")
    f = transport_facts(row)
    assert (f["handshake_ms"], f["handshake_scope"], f["handshakes"]) == (70.0, "per connection", 5.0)  # fmt: skip
    assert f["handshake_rtts"] == 1.4
    assert (f["ack_up_llc"], f["ack_up_hbc"], f["ack_down_llc"], f["ack_down_hbc"]) == (
        200,
        4,
        2,
        0,
    )
    assert (f["pkts_up_hbc"], f["pkts_down_hbc"], f["pkts_up_llc"]) == (10, 200, 300)
    assert f["hbc_burst_pkts"] == 4.0
    assert (f["reorder_held"], f["reorder_timeouts"], f["reorder_max_kb"]) == (100, 3, 9.0)


def test_transport_facts_of_an_old_row_use_the_main_document() -> None:
    """No handshake_ms_p50: connect_ms + tls_ms = 35 + 39 = 74 ms, scope "main
    document"; no classes, no bursts: None (not 0)."""
    row = next(r for r in _rows(False) if r["arm"] == "dchannel-h3" and r["item"] == "p2")
    f = transport_facts(row)
    assert (f["handshake_ms"], f["handshake_scope"], f["handshakes"]) == (74.0, "main document", None)  # fmt: skip
    assert f["ack_up_llc"] is None and f["hbc_burst_pkts"] is None
    assert f["pkts_up_llc"] == 300 and f["reorder_held"] == 100
    # a load without agents (ideal) has no agent facts at all
    g = transport_facts(_row("ideal", "p1", 600.0))
    assert g["plt_ms"] == 600.0 and g["reorder_held"] is None and g["handshake_ms"] is None


def test_why_line_of_a_difference_over_five_points(tmp_path: Path) -> None:
    """dchannel: 20% under h2, 10% under h3 on both pages → −10.0 points (both pages the
    same: CI [−10.0, −10.0]), beyond THRESHOLD_POINTS. Medians over the two pages, h2 →
    h3: dchannel's handshake (100+120)/2 = 110 → (50+70)/2 = 60 ms, (6+8)/2 = 7.0 → 5.0
    connections; all-hbc's 100 → 50 ms = 2.0 → 1.0 RTTs of 50 ms; ACK-like up HBC 10 → 4,
    up LLC 300 → 200, down HBC 0 → 0, down LLC 5 → 2; HBC bursts 200/20 = 10.0 → 200/50 =
    4.0 (all-hbc 8.0 → 5.0); holds 30+10 = 40 → 100, timeouts 1 → 3, peak 3.0 → 9.0 KB.
    ideal: 40% → 38%, −2 points: no why line."""
    c = _campaign(tmp_path)
    t = why_table(c, _rows(True), "plt_ms")
    assert THRESHOLD_POINTS == 5.0
    assert [r[:7] for r in t.rows] == [
        [
            "embb",
            "dchannel",
            "h2 / h3",
            "20.0% [20.0, 20.0]",
            "10.0% [10.0, 10.0]",
            "-10.0 [-10.0, -10.0]",
            "2",
        ],
        [
            "embb",
            "ideal",
            "h2 / h3",
            "40.0% [40.0, 40.0]",
            "38.0% [38.0, 38.0]",
            "-2.0 [-2.0, -2.0]",
            "2",
        ],
    ]
    assert t.rows[0][7] == (
        "PLT dchannel 800 → 810 ms, all-hbc 1000 → 900 ms; "
        "handshake per connection dchannel 110 → 60 ms (7.0 → 5.0 connections/load), "
        "all-hbc 100 → 50 ms = 2.0 → 1.0 HBC RTTs; "
        "ACK-like packets/load of dchannel: up HBC 10 → 4, up LLC 300 → 200, "
        "down HBC 0 → 0, down LLC 5 → 2; "
        "HBC downlink burst dchannel 10.0 → 4.0 packets, all-hbc 8.0 → 5.0; "
        "reorder holds 40 → 100/load, timeout releases 1 → 3, peak 3.0 → 9.0 KB"
    )
    assert t.rows[1][7] == "—"


def test_why_line_of_old_rows_says_what_they_lack(tmp_path: Path) -> None:
    """Rows from before the new facts: the main document's connect + TLS (h2: 104 and
    124 ms → median 114; h3: 54, 74 → 64; all-hbc 104 → 54 ms = 2.1 → 1.1 RTTs), the
    uplink packets in place of the ACK classes (HBC 10 → 10, LLC 300 → 300), and the
    facts missing named."""
    c = _campaign(tmp_path)
    line = why_table(c, _rows(False), "plt_ms").rows[0][7]
    assert line == (
        "PLT dchannel 800 → 810 ms, all-hbc 1000 → 900 ms; "
        "main document's connect + TLS dchannel 114 → 64 ms, "
        "all-hbc 104 → 54 ms = 2.1 → 1.1 HBC RTTs; "
        "uplink packets/load of dchannel (mostly ACKs): HBC 10 → 10, LLC 300 → 300; "
        "reorder holds 40 → 100/load, timeout releases 1 → 3, peak 3.0 → 9.0 KB; "
        "not recorded in these rows: handshakes per connection, ACK-like packet classes, "
        "HBC bursts (pacing)"
    )


def test_pages_without_both_protocols_valid_are_left_out(tmp_path: Path) -> None:
    """p2's dchannel-h3 load invalid: the difference is over p1 alone (one page: no CI)."""
    rows = _rows(True)
    for r in rows:
        if r["arm"] == "dchannel-h3" and r["item"] == "p2":
            r["valid"] = False
    row = why_table(_campaign(tmp_path), rows, "plt_ms").rows[0]
    assert row[5:7] == ["-10.0", "1"]
