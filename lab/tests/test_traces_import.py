"""Importers (ping, throughput CSV, Mahimahi), trace readers and their error messages,
on small fixtures written here and on the real files in ../shared/data when present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dchlab.paths import shared_data
from dchlab.traces.capacity import CapacitySeries, read_capacity, write_capacity
from dchlab.traces.errors import TraceFormatError
from dchlab.traces.mahimahi import (
    opportunities_to_rate,
    rate_to_opportunities,
    read_mahimahi,
    write_mahimahi,
)
from dchlab.traces.ping import parse_ping
from dchlab.traces.stats import file_stats, rtt_stats
from dchlab.traces.throughput_csv import import_throughput_csv
from dchlab.traces.timeline import RttTimeline, read_rtt, write_rtt

PING_SEQ = """\
PING 198.18.0.2 (198.18.0.2) 56(84) bytes of data.
64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=20.5 ms
64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=22.1 ms
64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=22.9 ms (DUP!)
From 198.18.0.1 icmp_seq=3 Destination Host Unreachable
64 bytes from 198.18.0.2: icmp_seq=5 ttl=64 time=130 ms

--- 198.18.0.2 ping statistics ---
5 packets transmitted, 3 received, +1 duplicates, 40% packet loss, time 800ms
rtt min/avg/max/mdev = 20.5/57.5/130.0/51.3 ms
"""

PING_D = """\
PING 198.18.0.2 (198.18.0.2) 56(84) bytes of data.
[1700000000.020500] 64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=20.5 ms
[1700000000.272000] 64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=22.0 ms
no answer yet for icmp_seq=3
[1700000000.790000] 64 bytes from 198.18.0.2: icmp_seq=4 ttl=64 time=40.0 ms
"""


def _write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_ping_sequence_times_and_lost_pings(tmp_path: Path) -> None:
    r = parse_ping(_write(tmp_path, "p.out", PING_SEQ))
    # Interval from the summary: 800 ms over 4 gaps = 200 ms; seq 3, 4 lost.
    assert r.interval_ms == 200.0
    assert r.timeline.t_ms.tolist() == [0.0, 200.0, 800.0]
    assert r.timeline.rtt_ms.tolist() == [20.5, 22.1, 130.0]  # DUP ignored
    assert (r.replies, r.lost, r.duplicates) == (3, 2, 1)
    r = parse_ping(tmp_path / "p.out", interval_s=0.01)
    assert r.timeline.t_ms.tolist() == [0.0, 10.0, 40.0]


def test_ping_with_D_timestamps_uses_send_times(tmp_path: Path) -> None:
    r = parse_ping(_write(tmp_path, "d.out", PING_D))
    # send = receive - rtt: 0.000, 0.250, 0.750 s after 1700000000 s.
    assert r.timeline.t_ms.tolist() == pytest.approx([0.0, 250.0, 750.0])
    assert r.interval_ms is None and r.lost == 1


PING_V6 = """\
PING 2001:db8::2(2001:db8::2) 56 data bytes
64 bytes from 2001:db8::2: icmp_seq=1 ttl=64 time=0.045 ms
Request timeout for icmp_seq 2
ping: sendmsg: Network is unreachable
64 bytes from host.test (2001:db8::2): icmp_seq=3 hlim=64 time=1.50 ms
"""


def test_ping_ipv6_hostnames_and_timeouts(tmp_path: Path) -> None:
    r = parse_ping(_write(tmp_path, "v6.out", PING_V6))
    assert r.timeline.t_ms.tolist() == [0.0, 2000.0]  # no summary: ping's 1 s default
    assert r.timeline.rtt_ms.tolist() == [0.045, 1.5]
    assert r.lost == 1


def test_ping_bad_input_names_file_and_line(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.out", PING_SEQ.replace("time=22.1 ms", "time=abc ms"))
    with pytest.raises(TraceFormatError, match=r"bad\.out:3: field 'time'"):
        parse_ping(bad)
    junk = _write(tmp_path, "junk.out", PING_SEQ + "hello world\n")
    with pytest.raises(TraceFormatError, match=r"junk\.out:11: not a line ping prints"):
        parse_ping(junk)
    with pytest.raises(TraceFormatError, match="no ping replies"):
        parse_ping(_write(tmp_path, "empty.out", "PING x (x) 56(84) bytes of data.\n"))


def test_rtt_and_capacity_files_roundtrip_and_refuse_bad_rows(tmp_path: Path) -> None:
    tl = RttTimeline(np.array([0.0, 15.0, 30.0]), np.array([20.0, 25.25, 30.5]))
    write_rtt(tmp_path / "a.rtt.csv", tl)
    back = read_rtt(tmp_path / "a.rtt.csv")
    assert back.t_ms.tolist() == [0, 15, 30] and back.rtt_ms.tolist() == [20.0, 25.25, 30.5]
    assert back.period_ms == 45.0
    cases = {
        "t_ms,rtt\n0,1\n": r":1: expected header",
        "t_ms,rtt_ms\n0,1\n15,x\n": r":3: field 'rtt_ms': expected a number",
        "t_ms,rtt_ms\n0,1\n0,2\n": r":3: field 't_ms': must be strictly increasing",
        "t_ms,rtt_ms\n0,-1\n": r":2: field 'rtt_ms': must be >= 0",
        "t_ms,rtt_ms\n0,1,2\n": r":2: expected 2 comma-separated values",
    }
    for i, (text, msg) in enumerate(cases.items()):
        p = _write(tmp_path, f"bad{i}.rtt.csv", text)
        with pytest.raises(TraceFormatError, match=f"bad{i}.rtt.csv" + msg):
            read_rtt(p)
    write_capacity(
        tmp_path / "c.cap.csv", CapacitySeries(np.array([1.0, 2.0]), np.array([3.0, 4.5]))
    )
    c = read_capacity(tmp_path / "c.cap.csv")
    assert c.up_mbit.tolist() == [1.0, 2.0] and c.down_mbit.tolist() == [3.0, 4.5]
    p = _write(tmp_path, "gap.cap.csv", "t_s,up_mbit,down_mbit\n0,1,1\n2,1,1\n")
    with pytest.raises(
        TraceFormatError, match=r"gap\.cap\.csv:3: field 't_s': expected consecutive"
    ):
        read_capacity(p)


def test_throughput_csv_bins_by_second_and_filters_mode(tmp_path: Path) -> None:
    head = "Timestamp,NetworkMode,DL_bitrate,UL_bitrate,State\n"
    rows = [
        "2020.01.01_10.00.00,5G,1000,100,D",
        "2020.01.01_10.00.01,5G,2000,100,D",
        "2020.01.01_10.00.01,5G,4000,300,D",  # same second: averaged -> 3 Mbit/s
        "2020.01.01_10.00.03,5G,5000,100,D",  # second 2 missing: previous value
        "2020.01.01_10.00.04,LTE,9000,900,D",  # 4G: dropped
        "2020.01.01_10.00.05,LTE,9000,900,D",
        "2020.01.01_10.00.06,LTE,9000,900,D",
        "2020.01.01_10.00.07,LTE,9000,900,D",
        "2020.01.01_10.00.08,5G,6000,200,D",  # new stretch after a 4 s gap
    ]
    p = _write(tmp_path, "t.csv", head + "\n".join(rows) + "\n")
    r = import_throughput_csv(p, mode="5G")
    assert r.series.down_mbit.tolist() == [1.0, 3.0, 3.0, 5.0, 6.0]
    assert r.series.up_mbit.tolist() == [0.1, 0.2, 0.2, 0.1, 0.2]
    assert (r.rows_total, r.rows_used, r.stretches) == (9, 5, 2)
    lte = import_throughput_csv(p, mode="4G")
    assert lte.series.down_mbit.tolist() == [9.0] * 4
    bad = _write(tmp_path, "b.csv", head + rows[0] + "\n2020.01.01_10.00.01,5G,fast,1,D\n")
    with pytest.raises(TraceFormatError, match=r"b\.csv:3: field 'DL_bitrate': expected a number"):
        import_throughput_csv(bad)
    nocol = _write(tmp_path, "n.csv", "Timestamp,DL\n2020.01.01_10.00.00,1\n")
    with pytest.raises(TraceFormatError, match=r"n\.csv:1: field 'DL_bitrate': missing column"):
        import_throughput_csv(nocol)


def test_mahimahi_write_then_read_recovers_the_rates(tmp_path: Path) -> None:
    rate = np.array([12.0, 0.0, 1.5, 100.3])
    ts = rate_to_opportunities(rate)
    # 12 Mbit/s = 1000 packets of 1500 B per second; the last stamp pins the period.
    assert int((ts <= 1000).sum()) == 1000 and ts[0] == 1 and ts[-1] == 4000
    assert len(ts) == 1000 + 125 + 8358  # 100.3 Mbit = 8358.3 packets, floor
    assert np.all(np.diff(ts) >= 0)
    write_mahimahi(tmp_path / "x.down", ts)
    back = opportunities_to_rate(read_mahimahi(tmp_path / "x.down"))
    assert len(back) == 4
    assert np.all(np.abs(back - rate) <= 0.012 + 1e-9)  # within one packet per second
    p = _write(tmp_path, "bad.up", "1\n5\n3\n")
    with pytest.raises(
        TraceFormatError, match=r"bad\.up:3: field 'timestamp': timestamps must not decrease"
    ):
        read_mahimahi(p)
    p = _write(tmp_path, "bad2.up", "1\n2.5\n")
    with pytest.raises(
        TraceFormatError, match=r"bad2\.up:2: field 'timestamp': expected an integer"
    ):
        read_mahimahi(p)


def test_stats_rows_for_each_kind(tmp_path: Path) -> None:
    write_rtt(
        tmp_path / "a.rtt.csv", RttTimeline(np.arange(4) * 15.0, np.array([10.0, 20.0, 30.0, 40.0]))
    )
    row = file_stats(tmp_path / "a.rtt.csv")
    assert row["span_min"] == pytest.approx(60 / 60000)
    assert (row["rtt_min"], row["rtt_p50"], row["rtt_mean"]) == (10.0, 25.0, 25.0)
    assert row["rtt_cv"] == pytest.approx(np.std([10, 20, 30, 40]) / 25)
    assert row["up_mbit"] is None
    m = file_stats(_write(tmp_path, "m.txt", "\n".join(["500"] * 250 + ["1000"] * 250) + "\n"))
    assert (m["kind"], m["span_min"], m["down_mbit"]) == ("mahimahi", 1 / 60, 6.0)  # 500 x 12 kbit
    p = _write(tmp_path, "x.txt", "hello\n")
    with pytest.raises(TraceFormatError, match=r"x\.txt:1: unrecognized trace"):
        file_stats(p)


# --- real data (../shared/data), skipped cleanly when absent ---------------------------

DATA = shared_data()
TRACES = DATA / "traces" if DATA else None
needs_data = pytest.mark.skipif(
    TRACES is None or not TRACES.is_dir(), reason="../shared/data absent"
)


@pytest.mark.shared_data
@needs_data
def test_real_imc23_ping_runs() -> None:
    assert TRACES is not None
    root = TRACES / "imc23-driving-rtt"
    r = parse_ping(root / "tmobile/run-26/run_ping_12_04.out")
    assert (r.replies, r.lost, r.duplicates) == (100, 0, 0)
    assert r.interval_ms == pytest.approx(19866 / 99)
    s = rtt_stats(r.timeline)
    assert (s["min"], s["p50"], s["p98"], s["mean"]) == (117.0, 134.0, 154.0, 136.0)
    assert s["cv"] == pytest.approx(0.0873, abs=1e-4)
    lossy = parse_ping(root / "tmobile/run-6/run_ping_19_17.out")
    assert (lossy.replies, lossy.lost) == (29, 71)
    assert rtt_stats(lossy.timeline)["mean"] == pytest.approx(80.2414, abs=1e-3)
    dup = parse_ping(root / "atnt/run-3/run_ping_15_50.out")
    assert (dup.replies, dup.duplicates) == (100, 1)
    total, refused = 0, 0
    for f in sorted(root.rglob("*.out")):
        try:
            total += parse_ping(f).replies
        except TraceFormatError:
            refused += 1  # one run has no reply at all
    assert (total, refused) == (10905, 1)


@pytest.mark.shared_data
@needs_data
def test_real_raca_5g_csv() -> None:
    assert TRACES is not None
    static = import_throughput_csv(TRACES / "raca-5g/Download/Static/B_2019.12.16_13.40.04.csv")
    assert (len(static.series), static.rows_total, static.rows_used) == (2282, 2143, 2143)
    assert static.series.down_mbit.mean() == pytest.approx(55.1726, abs=1e-3)
    assert static.series.up_mbit.mean() == pytest.approx(0.15111, abs=1e-4)
    drive = TRACES / "raca-5g/Download/Driving/B_2019.12.16_07.22.43.csv"
    nr = import_throughput_csv(drive, mode="5G")
    lte = import_throughput_csv(drive, mode="4G")
    assert (len(nr.series), nr.rows_used, nr.stretches) == (1517, 1528, 21)
    assert (len(lte.series), lte.rows_used) == (1095, 1089)
    assert nr.series.down_mbit.mean() == pytest.approx(35.1028, abs=1e-3)
    assert lte.series.down_mbit.mean() == pytest.approx(10.1120, abs=1e-3)


@pytest.mark.shared_data
@needs_data
def test_real_mahimahi_traces(tmp_path: Path) -> None:
    assert TRACES is not None
    ts = read_mahimahi(TRACES / "mahimahi/ATT-LTE-driving.down")
    assert (len(ts), int(ts[-1])) == (338895, 786112)
    rate = opportunities_to_rate(ts)
    assert len(rate) == 787
    assert rate.mean() == pytest.approx(5.16740, abs=1e-4)
    # Rate -> opportunities -> rate keeps every second within one packet.
    again = opportunities_to_rate(rate_to_opportunities(rate))
    assert np.max(np.abs(again - rate)) <= 0.012 + 1e-9
    up = opportunities_to_rate(read_mahimahi(TRACES / "mahimahi/TMobile-LTE-short.up"))
    assert len(up) == 140 and up.mean() == pytest.approx(13.31837, abs=1e-4)
