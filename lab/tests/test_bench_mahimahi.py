"""The chanemu-beside-Mahimahi harness (dchlab.bench_mahimahi): parsing, summaries,
trace files and the clean skip without Mahimahi — no Mahimahi build, no namespaces."""

from __future__ import annotations

import argparse
import json
import os
import stat
from pathlib import Path

import pytest

from dchlab import bench_mahimahi as bm
from dchlab.traces.mahimahi import read_mahimahi
from dchlab.traces.profile_toml import load_profile

PING_OUT = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=40.3 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=41.0 ms
64 bytes from 10.0.0.2: icmp_seq=4 ttl=64 time=40.1 ms
64 bytes from 10.0.0.2: icmp_seq=5 ttl=64 time=44.6 ms

--- 10.0.0.2 ping statistics ---
5 packets transmitted, 4 received, 20% packet loss, time 201ms
rtt min/avg/max/mdev = 40.100/41.500/44.600/1.806 ms
"""


def test_parse_ping_reads_replies_and_counts() -> None:
    rtts, sent, recv = bm.parse_ping(PING_OUT)
    assert rtts == [40.3, 41.0, 40.1, 44.6]
    assert (sent, recv) == (5, 4)


def test_parse_ping_without_summary_is_an_error() -> None:
    with pytest.raises(ValueError, match="summary"):
        bm.parse_ping(PING_OUT.split("\n---")[0])


def test_ping_summary_percentiles_and_error() -> None:
    # sorted 40.1 40.3 41.0 44.6: p50 = (40.3 + 41.0) / 2 = 40.65;
    # p99 at rank 0.99 * 3 = 2.97 → 41.0 + 0.97 * 3.6 = 44.492
    s = bm.ping_summary([40.3, 41.0, 40.1, 44.6], 40.0)
    assert s["p50_ms"] == pytest.approx(40.65)
    assert s["p99_ms"] == pytest.approx(44.492)
    assert s["mean_ms"] == pytest.approx(41.5)
    assert s["min_ms"] == pytest.approx(40.1)
    assert s["error_p50_ms"] == pytest.approx(0.65)
    with pytest.raises(ValueError):
        bm.ping_summary([], 40.0)


def test_parse_iperf3_receiver_goodput_and_errors() -> None:
    ok = {"end": {"sum_received": {"bits_per_second": 11_520_000.0}, "sum_sent": {}}}
    assert bm.parse_iperf3(json.dumps(ok)) == (pytest.approx(11.52), None)
    ok["end"]["sum_sent"] = {"bits_per_second": 11_600_000.0, "retransmits": 7}
    assert bm.parse_iperf3(json.dumps(ok)) == (pytest.approx(11.52), 7)
    refused = {"start": {}, "error": "unable to connect to server: Connection refused"}
    with pytest.raises(ValueError, match="refused"):
        bm.parse_iperf3(json.dumps(refused))
    with pytest.raises(ValueError, match="not JSON"):
        bm.parse_iperf3("iperf3: error")
    with pytest.raises(ValueError, match="sum_received"):
        bm.parse_iperf3("{}")


def test_constant_trace_is_the_rate_in_opportunities(tmp_path: Path) -> None:
    one = bm.write_constant_trace(tmp_path / "12.trace", 12.0)
    assert one.read_text() == "1\n"
    assert bm.trace_mean_mbit(one) == pytest.approx((12.0, 0.001))
    two = bm.write_constant_trace(tmp_path / "24.trace", 24.0)
    assert list(read_mahimahi(two)) == [1, 1]
    # 18 Mbit/s = 1.5 per ms: 3 in a 2 ms loop, ms 1 gets floor(1.5) = 1, ms 2 gets 3 - 1
    assert list(read_mahimahi(bm.write_constant_trace(tmp_path / "18", 18.0))) == [1, 2, 2]
    # 200 Mbit/s = 16.67 per ms: 50 in a 3 ms loop, 16 + 17 + 17
    ts = list(read_mahimahi(bm.write_constant_trace(tmp_path / "200", 200.0)))
    assert [ts.count(k) for k in (1, 2, 3)] == [16, 17, 17]
    assert bm.trace_mean_mbit(tmp_path / "200") == pytest.approx((200.0, 0.003))
    with pytest.raises(ValueError, match="whole opportunities"):
        bm.write_constant_trace(tmp_path / "x", 0.0131)


def test_trace_mean_over_the_loop_period(tmp_path: Path) -> None:
    # 4 opportunities in a 2000 ms loop: 4 * 12000 bit / 2 s = 24 kbit/s
    t = tmp_path / "t.down"
    t.write_text("0\n500\n1500\n2000\n")
    mbit, period_s = bm.trace_mean_mbit(t)
    assert mbit == pytest.approx(0.024)
    assert period_s == 2.0


def test_trace_profile_is_a_valid_zero_delay_unlimited_queue_profile(tmp_path: Path) -> None:
    up = bm.write_constant_trace(tmp_path / "u.trace", 12.0)
    down = bm.write_constant_trace(tmp_path / "d.trace", 24.0)
    p = load_profile(bm.trace_profile(tmp_path / "p.toml", up, down, "mm-test"))
    assert p["delay"] == {"kind": "fixed", "rtt_ms": 0}
    assert p["uplink"]["rate"] == {"mahimahi": str(up.resolve())}
    assert p["downlink"]["rate"] == {"mahimahi": str(down.resolve())}
    assert p["uplink"]["queue"] == p["downlink"]["queue"] == "unlimited"


def test_markdown_rows() -> None:
    ping = {**bm.ping_summary([40.3, 40.5], 40.0), "sent": 2, "received": 2}
    rows = [
        bm.Row("ping", "mahimahi", "mm-delay 20", ping),
        bm.Row("const", "chanemu hbc-only", "fixed:0ms/12mbit", bm.goodput_values((11.5, 3), 12.0)),
        bm.Row("ceiling", "mahimahi", "mm-delay 0", bm.goodput_values((950.0, None), None)),
        bm.Row("trace", "mahimahi", "mm-link T", skipped="no --mahimahi-bin given"),
    ]
    lines = bm.markdown(rows).splitlines()
    assert lines[0] == "| test | tool | setup | result |"
    assert lines[2] == (
        "| ping | mahimahi | mm-delay 20 | p50 40.40 ms, p99 40.50 ms (error +0.40 ms; 2/2 replies) |"
    )
    assert lines[3] == (
        "| const | chanemu hbc-only | fixed:0ms/12mbit | 11.50 Mbit/s = 95.8 % of 12.00, "
        "3 retransmits |"
    )
    assert lines[4] == "| ceiling | mahimahi | mm-delay 0 | 950.00 Mbit/s |"
    assert lines[5] == "| trace | mahimahi | mm-link T | skipped: no --mahimahi-bin given |"


def test_plt_rows_and_medians_over_common_valid_pages() -> None:
    rows = [
        bm.plt_row("chanemu all-hbc", "c", "a", 1000.0, True, ""),
        bm.plt_row("chanemu all-hbc", "c", "b", 3000.0, True, ""),
        bm.plt_row("chanemu all-hbc", "c", "c", 9000.0, True, ""),
        bm.plt_row("mahimahi", "m", "a", 1100.0, True, ""),
        bm.plt_row("mahimahi", "m", "b", 2900.0, True, ""),
        bm.plt_row("mahimahi", "m", "c", None, False, "timeout after 60 s"),
    ]
    # page c is invalid for Mahimahi: both medians are over a and b only
    assert bm.plt_medians(rows) == {"chanemu all-hbc": (2000.0, 2), "mahimahi": (2000.0, 2)}
    lines = bm.markdown(rows[3:]).splitlines()
    assert lines[2] == "| plt | mahimahi | m | a: PLT 1100 ms |"
    assert lines[4] == "| plt | mahimahi | m | c: PLT - (invalid: timeout after 60 s) |"
    assert bm.plt_medians([]) == {}


def test_mahimahi_binaries_skip_reasons(tmp_path: Path) -> None:
    assert bm.mahimahi_binaries(None) == ({}, "no --mahimahi-bin given")
    tools, why = bm.mahimahi_binaries(tmp_path)
    assert tools == {} and "mm-delay" in why and "not found" in why
    for name in ("mm-delay", "mm-link"):
        exe = tmp_path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    tools, why = bm.mahimahi_binaries(tmp_path)
    if os.geteuid() == 0:
        # Files root creates are root's: setuid makes them acceptable.
        assert "setuid root" in why
        for name in ("mm-delay", "mm-link"):
            (tmp_path / name).chmod(0o755 | stat.S_ISUID)
        tools, why = bm.mahimahi_binaries(tmp_path)
        assert why == "" and set(tools) == {"mm-delay", "mm-link"}
    else:
        assert tools == {} and "setuid root" in why


def test_no_binaries_gives_skipped_mahimahi_rows_for_a_missing_trace(tmp_path: Path) -> None:
    # Only the trace test, with a trace directory that lacks the trace: no testbed,
    # no Mahimahi, one clean skipped row.
    args = argparse.Namespace(
        mahimahi_bin=None,
        user="nobody",
        only="trace",
        trace="Nope-LTE",
        trace_dir=tmp_path,
        seconds=1.0,
        trace_seconds=None,
        mm_rt_priority=0,
        pages=1,
        timeout=1.0,
    )
    rows = list(bm.measure(args, tmp_path))
    assert [(r.test, r.skipped) for r in rows] == [("trace", "trace files not found")]


def test_unknown_test_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bm.main(["--only", "ping,plts"])
    assert "unknown test(s) ['plts']" in capsys.readouterr().err
