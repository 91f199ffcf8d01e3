"""dch sim (issue 41, item 5): decision logs -> traces, LLC demand, the grid driver
on a tiny trace through the real llcsim binary, and the capacity knee."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dchlab import paths
from dchlab.sim import capacity, demand, grid, logs

DECISION_COLUMNS = (
    "t_ms,peer,flow_id,seq,flow,proto,size,payload,channel,outcome,"
    "reward_ms,c_hbc_ms,c_llc_ms,llc_queue_bytes,t_mono_ns"
)


def _decision_log(path: Path, rows: list[tuple[int, str, int, int, str]]) -> None:
    """rows: (t_mono_ns, flow, proto, size, channel)."""
    with path.open("w") as f:
        f.write(DECISION_COLUMNS + "\n")
        for t, flow, proto, size, ch in rows:
            f.write(f"0,0,1,0,{flow},{proto},{size},0,{ch},reward,,,,0,{t}\n")


def test_decision_logs_become_one_trace_in_time_order(tmp_path: Path) -> None:
    _decision_log(
        tmp_path / "uplink.csv",
        [
            (1_000, "tcp 198.19.0.2:40000>198.18.0.1:443 up", 6, 60, "llc"),
            (5_000, "-", 0, 0, "hbc"),  # unparsed: left out, counted
        ],
    )
    _decision_log(
        tmp_path / "downlink.csv",
        [(3_000, "tcp 198.18.0.1:443>198.19.0.2:40000 down", 6, 1500, "hbc")],
    )
    n, skipped = logs.convert(tmp_path, tmp_path / "page.csv")
    assert (n, skipped) == (2, 1)
    got = logs.read_trace(tmp_path / "page.csv")
    assert [(p.t_ns, p.dir, p.src, p.sport, p.dport, p.ip_len, p.channel) for p in got] == [
        (0, "up", "198.19.0.2", 40000, 443, 60, "llc"),
        (2_000, "down", "198.18.0.1", 443, 40000, 1500, "hbc"),
    ]
    bad = tmp_path / "bad.csv"
    bad.write_text("t_ms,flow\n1,x\n")
    with pytest.raises(ValueError, match="not a decision log"):
        logs.read_decision_log(bad, "up")


def _pkt(t_ns: int, size: int, channel: str = "llc", direction: str = "down") -> logs.Packet:
    return logs.Packet(t_ns, direction, 17, "198.18.0.1", 53, "198.19.0.2", 1000, size, channel)


def test_peak_rate_and_browsing_rate_by_hand() -> None:
    # 1000 bits at 0, 5 and 20 ms: a 10 ms window holds at most 2000 bits = 0.2 Mbit/s;
    # a 100 ms window all 3000 bits = 0.03 Mbit/s
    t, b = [0, 5_000_000, 20_000_000], [1000.0, 1000.0, 1000.0]
    assert demand.peak_rate_mbit(t, b, 10_000_000) == pytest.approx(0.2)
    assert demand.peak_rate_mbit(t, b, 100_000_000) == pytest.approx(0.03)
    # a page: two LLC packets of 956 + 44 B = 8000 bits each, one HBC packet; 2 s span
    pkts = [_pkt(0, 956), _pkt(1_000_000_000, 956, "hbc"), _pkt(2_000_000_000, 956, direction="up")]
    d = demand.page_demand("p", pkts)
    assert (d.llc_pkts, d.llc_bits, d.llc_bits_up, d.span_s) == (2, 16000.0, 8000.0, 2.0)
    # 16 kbit per load over 2 s + 30 s think -> 500 bit/s
    assert demand.browsing_rate_bps([d], 30.0) == pytest.approx(500.0)


def test_knee_is_the_last_n_within_the_threshold_before_the_first_miss() -> None:
    cells = [
        {"users": 1, "capacity_mbit": 10.0, "rule": "none", "wait_p95_ms": 0.5},
        {"users": 10, "capacity_mbit": 10.0, "rule": "none", "wait_p95_ms": 2.0},
        {"users": 100, "capacity_mbit": 10.0, "rule": "none", "wait_p95_ms": 9.0},
        {"users": 1000, "capacity_mbit": 10.0, "rule": "none", "wait_p95_ms": 1.0},
        {"users": 1, "capacity_mbit": 10.0, "rule": "share", "wait_p95_ms": None},
    ]
    assert capacity.knee(cells, 2.5) == {(10.0, "none"): 10, (10.0, "share"): 0}
    # NSDI'23 §7: 10 Mbit/s per user -> a 100 Mbit/s cell holds 10; at 100,000 per km²
    # 1,000 users live on 0.01 km²
    assert capacity.fluid_users(100e6, capacity.PAPER_RATE_PER_USER_BPS) == 10
    assert capacity.area_km2(1000) == pytest.approx(0.01)


def _llcsim_or_skip() -> None:
    try:
        paths.binary("llcsim")
    except FileNotFoundError as e:
        pytest.skip(f"llcsim not built: {e}")


def test_grid_runs_llcsim_and_second_user_waits_one_millisecond(tmp_path: Path) -> None:
    # Two users start together (think 1 ns) with one 1456 B packet each; all-llc, 44 B
    # overhead = 1500 B on the wire, C = 12 Mbit/s: 1 ms per packet, the second waits 1 ms.
    _llcsim_or_skip()
    traces = tmp_path / "traces"
    traces.mkdir()
    logs.write_trace([_pkt(0, 1456, direction="up")], traces / "one.csv")
    opts = grid.SimOptions(policy="all-llc", duration_s=1e-9, think_s=1e-9)
    cells = grid.grid([2, 1], [12.0], ["none"], [7])
    assert [c.users for c in cells] == [2, 1]  # largest first
    done: list[int] = []
    cell_rows, page_rows = grid.run(cells, traces, opts, 0, lambda c, r: done.append(c.users))
    assert done == [2, 1]
    grid.write_parquet(cell_rows, tmp_path / "cells.parquet")
    grid.write_parquet(page_rows, tmp_path / "pages.parquet")
    cells_back = pq.read_table(tmp_path / "cells.parquet").to_pylist()
    two = next(r for r in cells_back if r["users"] == 2)
    assert (two["pages"], two["llc_pkts"], two["llc_bytes"], two["overflow_pkts"]) == (
        2,
        2,
        3000,
        0,
    )
    pages = sorted(
        (r for r in pq.read_table(tmp_path / "pages.parquet").to_pylist() if r["users"] == 2),
        key=lambda r: r["user"],
    )
    assert [r["wait_p50_ms"] for r in pages] == [0.0, pytest.approx(1.0)]
    assert all(r["page"] == "one" and r["seed"] == 7 for r in pages)
    with pytest.raises(ValueError, match="rule 'fair'"):
        grid.grid([1], [10.0], ["fair"], [1])


def test_trace_files_are_what_llcsim_reads(tmp_path: Path) -> None:
    # the Python writer's header starts with the Rust reader's columns (trace.rs HEADER)
    rust = (paths.repo_root() / "crates/llcsim/src/trace.rs").read_text()
    logs.write_trace([_pkt(0, 100)], tmp_path / "t.csv")
    header = next(csv.reader((tmp_path / "t.csv").open()))
    assert f'HEADER: &str = "{",".join(header[:8])}"' in rust


def test_capacity_cli_defaults_to_the_hbc_llc_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dchlab import cli

    base = {"rule": "none", "capacity_mbit": 10.0, "hbc_owd_ms": 10.0, "llc_owd_ms": 2.5}
    rows = [
        {**base, "users": 1, "seed": 1, "wait_p95_ms": 3.0},
        {**base, "users": 4, "seed": 1, "wait_p95_ms": 7.0},
        {**base, "users": 4, "seed": 2, "wait_p95_ms": 9.0},  # mean 8 > 7.5
        {**base, "rule": "share", "users": 1, "seed": 1, "wait_p95_ms": 0.1},
    ]
    grid.write_parquet(rows, tmp_path / "cells.parquet")
    assert cli.main(["sim", "capacity", str(tmp_path / "cells.parquet")]) == 0
    out = capsys.readouterr().out
    assert "p95 <= 7.5 ms" in out
    assert "C = 10 Mbit/s, rule none: 1 users (0.1 per Mbit/s)" in out  # 1 / 10
    assert "rule share: >= 1 users" in out
    assert (
        cli.main(["sim", "capacity", str(tmp_path / "cells.parquet"), "--threshold-ms", "8"]) == 0
    )
    assert "rule none: >= 4 users" in capsys.readouterr().out


def test_compare_cli_sets_captured_against_simulated_llc_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dchlab import cli

    traces = tmp_path / "traces"
    traces.mkdir()
    # captured: 1 of 4 packets on the LLC; simulated loads 0.5 and 0.3 -> mean 0.4
    logs.write_trace([_pkt(i, 100, "llc" if i == 0 else "hbc") for i in range(4)], traces / "p.csv")
    grid.write_parquet(
        [{"page": "p", "llc_frac": 0.5}, {"page": "p", "llc_frac": 0.3}], tmp_path / "pages.parquet"
    )
    assert cli.main(["sim", "compare", str(traces), str(tmp_path / "pages.parquet")]) == 0
    out = capsys.readouterr().out
    assert "p                           0.250    0.400      2" in out
    assert "mean |difference| 0.150" in out


def test_compare_cli_sets_link_delay_beyond_the_base_against_the_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from dchlab import cli

    traces = tmp_path / "traces"
    traces.mkdir()
    logs.write_trace([_pkt(0, 100)], traces / "p.csv")
    logs.write_trace([_pkt(0, 100)], traces / "q.csv")  # no row.json: said so
    row = {"stats": {"links": {"llc": {
        "uplink": {"delay_ms": {"p50": 3.0, "p99": 8.5}},
        "downlink": {"delay_ms": {"p50": 2.75, "p99": 6.0}},
    }}}}  # fmt: skip
    (tmp_path / "cap" / "p").mkdir(parents=True)
    (tmp_path / "cap" / "p" / "row.json").write_text("log line\n" + json.dumps(row) + "\n")
    pages = [
        {"page": "p", "llc_frac": 1.0, "wait_p50_ms": 0.5, "wait_p99_ms": 3.0},
        {"page": "p", "llc_frac": 1.0, "wait_p50_ms": None, "wait_p99_ms": 4.0},
    ]
    grid.write_parquet(pages, tmp_path / "pages.parquet")
    argv = ["sim", "compare", str(traces), str(tmp_path / "pages.parquet")]
    assert cli.main([*argv, "--captures", str(tmp_path / "cap")]) == 0
    out = capsys.readouterr().out
    # link minus the 2.5 ms base: 0.5 / 6.0 up, 0.25 / 3.5 down; sim means 0.5 and 3.5
    assert "p                           0.50    6.00    0.25    3.50     0.50     3.50" in out
    assert "q                        (no page-load row" in out


@pytest.mark.slow
def test_grid_on_ray_gives_what_a_local_run_gives(tmp_path: Path) -> None:
    """The Ray path (a local Ray of one CPU, traces shipped with the task) returns the
    same cell and page rows as running the cells in this process."""
    pytest.importorskip("ray")
    _llcsim_or_skip()
    traces = tmp_path / "traces"
    traces.mkdir()
    logs.write_trace(
        [_pkt(0, 1456, direction="up"), _pkt(2_000_000, 956), _pkt(2_500_000, 956)],
        traces / "p.csv",
    )
    opts = grid.SimOptions(duration_s=1.0, think_s=0.2)
    cells = grid.grid([3, 1], [2.0], ["none", "share"], [1])
    local = grid.run(cells, traces, opts, 0)
    on_ray = grid.run(cells, traces, opts, 1)

    def key(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        drop = {"wall_s"}
        return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows), key=repr)

    assert key(on_ray[0]) == key(local[0])
    assert key(on_ray[1]) == key(local[1])
    assert len(local[0]) == 4 and sum(r["pages"] for r in local[0]) == len(local[1]) > 4


def test_vs_testbed_sets_testbed_rows_against_the_grid_at_the_same_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from dchlab import cli
    from dchlab.sim import testbed_compare

    def link(p50: float, p99: float) -> dict[str, object]:
        return {"delay_ms": {"p50": p50, "p99": p99}}

    def row(
        scheme: str, rule: str, llc: int, hbc: int, up: float, down: float
    ) -> dict[str, object]:
        stats = {"links": {"llc": {"uplink": link(up, up + 4), "downlink": link(down, down + 4)}}}
        x = {"llc_mbit": 2, "rule": rule}
        return {"scheme": scheme, "devices": 2, "x": json.dumps(x), "pkts_llc": llc,
                "pkts_hbc": hbc, "stats": json.dumps(stats)}  # fmt: skip

    rows = [
        row("dchannel", "none", 1, 3, 3.5, 2.5),  # share 0.25; beyond 2.5: p50 (1 + 0) / 2
        row("dchannel", "none", 3, 1, 2.5, 2.5),  # share 0.75; p50 0
        row("all-hbc", "none", 0, 4, 9.0, 9.0),  # not dchannel: left out
        row("dchannel", "probe", 1, 1, 2.5, 2.5),  # no llcsim counterpart: left out
        row("dchannel", "token-bucket", 1, 1, 2.5, 2.5),  # -> share
    ]
    bed = testbed_compare.testbed_points(rows, 2.5)
    assert set(bed) == {(2.0, 2, "none"), (2.0, 2, "share")}
    p = bed[(2.0, 2, "none")]
    assert (p.llc_frac, p.delay_p50_ms, p.delay_p99_ms, p.rows) == (0.5, 0.25, 4.25, 2)
    grid_dir = tmp_path / "grid"
    base = {"capacity_mbit": 2.0, "users": 2, "rule": "none"}
    grid.write_parquet(
        [
            {**base, "wait_p50_ms": 0.1, "wait_p99_ms": 3.0},
            {**base, "wait_p50_ms": 0.3, "wait_p99_ms": 4.0},
        ],
        grid_dir / "cells.parquet",
    )
    grid.write_parquet(
        [{**base, "llc_frac": 0.6}, {**base, "llc_frac": 0.4}], grid_dir / "pages.parquet"
    )
    grid.write_parquet(rows, tmp_path / "rows.parquet")
    assert (
        cli.main(["sim", "vs-testbed", str(tmp_path / "rows.parquet"), "--grid", str(grid_dir)])
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "   2   2 none  |               0.50  0.25  4.25    2 |              0.50  0.20  3.50     2"
        in out
    )
    assert "   2   2 share |               0.50  0.00  4.00    1 | (not in the grid)" in out
