"""`dch sim compare-testbed` (issue 41, item 5): the N-device testbed's rows per background
load against llcsim grids of the same mean think time; hand-made rows, hand-computed
expectations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dchlab.sim import grid
from dchlab.sim import testbed_compare as tc


def _link(p50: float, p99: float, pkts: int, size: int) -> dict[str, object]:
    return {"delay_ms": {"p50": p50, "p99": p99}, "pkts_in": pkts, "bytes_in": size}


def _row(
    think: str | None,
    devices: int,
    llc: int,
    hbc: int,
    *,
    scheme: str = "dchannel",
    scenario: str = "MM-S",
    c: float = 2,
    up: tuple[float, float] = (4.5, 8.5),
    down: tuple[float, float] = (2.5, 4.5),
    valid: bool = True,
    llc_share: str | None = None,
) -> dict[str, object]:
    """One page-load row: uplink 3 packets of 300 B in all, downlink 1 of 100 B."""
    stats: dict[str, object] = {
        "links": {"llc": {"uplink": _link(*up, 3, 300), "downlink": _link(*down, 1, 100)}}
    }
    if llc_share is not None:
        stats["llc_share"] = llc_share
    if think is not None:
        stats["background"] = {"think": think, "users": devices - 1}
    x = {"llc_mbit": c, "rule": "none", "scenario": scenario}
    return {"scheme": scheme, "devices": float(devices), "x": json.dumps(x), "pkts_llc": llc,
            "pkts_hbc": hbc, "stats": json.dumps(stats), "valid": valid, "error": None}  # fmt: skip


def test_think_specs_give_the_mean_think_time_and_bad_ones_are_named() -> None:
    assert tc.think_mean_s("exp:30") == 30.0
    assert tc.think_mean_s("fixed:0") == 0.0
    assert tc.think_mean_s(tc.IDLE) is None and tc.think_mean_s(tc.ALONE) is None
    for bad in ("uniform:3", "exp", "exp:-1", "fixed:x"):
        with pytest.raises(ValueError, match=f"background think '{bad}'"):
            tc.think_mean_s(bad)


def test_testbed_points_by_scenario_capacity_devices_and_load() -> None:
    rows = [
        _row("exp:30", 2, 1, 3),  # share 0.25
        _row("exp:30", 2, 3, 1),  # share 0.75
        _row("exp:30", 2, 9, 1, scheme="all-hbc"),  # not dchannel: left out
        _row("exp:30", 2, 9, 1, scenario="LB-D"),  # other scenario: left out
        _row("exp:30", 2, 9, 1, valid=False),  # invalid load: left out
        _row("fixed:0", 2, 1, 1),
        _row(None, 1, 1, 1),
        _row("idle", 4, 1, 1, c=10),
    ]
    bed = tc.testbed_by_load(rows, "MM-S", 2.5)
    assert set(bed) == {(2.0, 2, "exp:30"), (2.0, 2, "fixed:0"), (2.0, 1, "alone"),
                        (10.0, 4, "idle")}  # fmt: skip
    p = bed[(2.0, 2, "exp:30")]
    # two loads, 0.25 and 0.75: resampled means are 0.25 (p = 1/4), 0.5, 0.75 (1/4), so
    # the 2.5 % and 97.5 % percentiles of the bootstrap are the two values themselves
    assert (p.llc_frac.mean, p.llc_frac.lo, p.llc_frac.hi, p.llc_frac.n) == (0.5, 0.25, 0.75, 2)
    # p50 beyond 2.5 ms, directions weighted by packets: (3 x 2.0 + 1 x 0.0) / 4 = 1.5;
    # p99: (3 x 6.0 + 1 x 2.0) / 4 = 5.0; equal in both loads, so the CI is a point
    assert (p.delay_p50_ms.mean, p.delay_p50_ms.lo, p.delay_p50_ms.hi) == (1.5, 1.5, 1.5)
    assert p.delay_p99_ms.mean == 5.0
    # mean packet 400 B / 4 = 100 B = 800 bit at 2 Mbit/s: 0.4 ms; at 10 Mbit/s 0.08 ms
    assert p.tx_ms == pytest.approx(0.4)
    assert bed[(10.0, 4, "idle")].tx_ms == pytest.approx(0.08)
    single = bed[(2.0, 1, "alone")].llc_frac
    assert (single.mean, single.lo, single.hi, single.n) == (0.5, 0.5, 0.5, 1)


def test_a_link_without_packets_has_no_delay() -> None:
    empty = {"uplink": _link(3, 4, 0, 0), "downlink": _link(3, 4, 0, 0)}
    assert math.isnan(tc.link_delay_beyond_base(empty, "p50", 2.5))
    assert math.isnan(tc.link_mean_tx_ms(empty, 2))


def test_each_load_is_set_against_the_grid_of_its_think_time() -> None:
    think = {"slow": 30.0, "busy": 0.0}
    assert tc.pick_grid("exp:30", think) == "slow"
    assert tc.pick_grid("fixed:0", think) == "busy"
    assert tc.pick_grid("exp:5", think) is None  # no grid of that think time
    # one sender: the grid with the longest think (the measured device loading once)
    assert tc.pick_grid(tc.ALONE, think) == "slow" and tc.pick_grid(tc.IDLE, think) == "slow"
    assert tc.sim_users(4, tc.IDLE) == 1 and tc.sim_users(4, "exp:30") == 4


def test_sim_points_average_page_loads_and_seeds_of_one_rule() -> None:
    base = {"capacity_mbit": 2.0, "users": 2}
    cells = [
        {**base, "rule": "none", "wait_p50_ms": 0.1, "wait_p95_ms": 2.0, "wait_p99_ms": 3.0},
        {**base, "rule": "none", "wait_p50_ms": 0.3, "wait_p95_ms": 4.0, "wait_p99_ms": 5.0},
        {**base, "rule": "none", "wait_p50_ms": None, "wait_p95_ms": None, "wait_p99_ms": None},
        {**base, "rule": "share", "wait_p50_ms": 9.0, "wait_p95_ms": 9.0, "wait_p99_ms": 9.0},
    ]
    pages = [{**base, "rule": "none", "llc_frac": f} for f in (0.2, 0.4, 0.9)]
    pages.append({**base, "rule": "share", "llc_frac": 0.0})
    s = tc.sim_by_point(cells, pages, "none")[(2.0, 2)]
    # the cell without an LLC packet has no wait and is not averaged as 0
    assert s.llc_frac.mean == pytest.approx(0.5) and s.llc_frac.n == 3 and s.cells == 2
    assert 0.2 <= s.llc_frac.lo < 0.5 < s.llc_frac.hi <= 0.9
    assert (s.wait_p50_ms, s.wait_p95_ms, s.wait_p99_ms) == pytest.approx((0.2, 3.0, 4.0))


def test_cli_prints_testbed_mean_ci_llcsim_and_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dchlab import cli

    rows = [_row("exp:30", 2, 1, 3), _row("exp:30", 2, 3, 1), _row("fixed:0", 2, 1, 1),
            _row("idle", 4, 1, 1)]  # fmt: skip
    grid.write_parquet(rows, tmp_path / "rows.parquet")
    # two grids (think 30 s and 0 s), each with N = 1 (llc_frac 0.7) and N = 2
    for name, think, frac, p50, p99 in (
        ("slow", 30.0, 0.6, 0.5, 4.0),
        ("busy", 0.0, 0.3, 1.0, 9.0),
    ):
        base = {"capacity_mbit": 2.0, "rule": "none", "think_s": think}
        wait = {"wait_p50_ms": p50, "wait_p95_ms": 3.0, "wait_p99_ms": p99}
        cells = [{**base, **wait, "users": n} for n in (1, 2)]
        pages = [{**base, "users": 1, "llc_frac": 0.7}, {**base, "users": 2, "llc_frac": frac}]
        grid.write_parquet(cells, tmp_path / name / "cells.parquet")
        grid.write_parquet(pages, tmp_path / name / "pages.parquet")
    argv = ["sim", "compare-testbed", str(tmp_path / "rows.parquet"),
            "--grid", str(tmp_path / "slow"), "--grid", str(tmp_path / "busy"), "--markdown"]  # fmt: skip
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| C Mbit/s | N | background | loads | LLC share: testbed |")
    # testbed 0.50 [0.25, 0.75]; llcsim 0.60 (+0.10); p50 1.50 vs 0.50 (-1.00);
    # p99 5.00 vs p95 3.00, p99 4.00 (-1.00); mean packet 0.40 ms at 2 Mbit/s
    slow = "slow"  # the grid directory's name
    assert (
        f"| 2 | 2 | exp:30 | 2 | 0.50 [0.25, 0.75] | 0.60 | 1 | +0.10 | 1.50 [1.50, 1.50] | 0.50 |"
        f" -1.00 | 5.00 [5.00, 5.00] | 3.00 | 4.00 | -1.00 | 0.40 | {slow} N=2 |" in lines
    )
    # back-to-back users against the think-0 grid; one load: no interval
    busy = "busy"
    assert (
        f"| 2 | 2 | fixed:0 | 1 | 0.50 | 0.30 | 1 | -0.20 | 1.50 | 1.00 | -0.50 | 5.00 | 3.00 |"
        f" 9.00 | +4.00 | 0.40 | {busy} N=2 |" in lines
    )
    # three idle devices: llcsim's lone user (N = 1) of the slow grid
    assert (
        f"| 2 | 4 | idle | 1 | 0.50 | 0.70 | 1 | +0.20 | 1.50 | 0.50 | -1.00 | 5.00 | 3.00 | 4.00 | -1.00 | 0.40 | {slow} N=1 |"
        in lines
    )


def test_cli_names_a_grid_of_several_think_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dchlab import cli

    grid.write_parquet([_row("exp:30", 2, 1, 1)], tmp_path / "rows.parquet")
    base = {"capacity_mbit": 2.0, "users": 1, "rule": "none", "wait_p50_ms": 0.0,
            "wait_p95_ms": 0.0, "wait_p99_ms": 0.0}  # fmt: skip
    grid.write_parquet([{**base, "think_s": 30.0}, {**base, "think_s": 0.0}],
                       tmp_path / "g" / "cells.parquet")  # fmt: skip
    grid.write_parquet([{**base, "llc_frac": 0.5}], tmp_path / "g" / "pages.parquet")
    argv = ["sim", "compare-testbed", str(tmp_path / "rows.parquet"), "--grid", str(tmp_path / "g")]
    assert cli.main(argv) != 0
    assert "g/cells.parquet: think_s [0.0, 30.0]; expected one per grid" in capsys.readouterr().err


def test_sim_only_adds_the_grids_other_users_without_a_testbed_side() -> None:
    bed = tc.testbed_by_load([_row("exp:30", 2, 1, 3), _row(None, 1, 1, 1)], "MM-S", 2.5)
    point = tc.SimPoint(tc.Estimate(0.4, 0.3, 0.5, 10), 0.0, 1.0, 2.0, 3)
    grids = {"slow": {(2.0, 1): point, (2.0, 2): point, (2.0, 8): point, (10.0, 8): point}}
    rows = tc.compare(bed, grids, {"slow": 30.0}, sim_only=True)
    # N = 8 at C = 2 for the exp:30 load only (alone has no think time; C = 10 no testbed;
    # N = 1 is the testbed's alone row)
    assert [(r.capacity_mbit, r.devices, r.kind, r.bed is None) for r in rows] == [
        (2.0, 1, "alone", False),
        (2.0, 2, "exp:30", False),
        (2.0, 8, "exp:30", True),
    ]
    head, cells = tc.table(rows)
    # loads, LLC share: testbed, llcsim, sim loads, diff
    assert head[3:8] == ["loads", "LLC share: testbed", "llcsim", "sim loads", "diff"]
    assert cells[2][3:8] == ["-", "-", "0.40 [0.30, 0.50]", "10", "-"]
    assert len(tc.compare(bed, grids, {"slow": 30.0})) == 2


def test_only_the_rows_of_the_simulated_rule_are_compared() -> None:
    """urllc_share runs four sharing rules at the same (C, N, load): under llcsim's
    `none` only rule none's rows (and rows from before the rules) count, under `share`
    only token-bucket's; probe and priority have no llcsim counterpart."""
    rows = [
        _row("fixed:0", 2, 1, 3),  # before the rules: none (share 0.25)
        _row("fixed:0", 2, 3, 1, llc_share="none"),  # share 0.75
        _row("fixed:0", 2, 1, 4, llc_share="token-bucket"),  # share 0.2
        _row("fixed:0", 2, 9, 1, llc_share="probe"),
        _row("fixed:0", 2, 9, 1, llc_share="priority"),
    ]
    none = tc.testbed_by_load(rows, "MM-S", 2.5)[(2.0, 2, "fixed:0")]
    assert none.llc_frac.n == 2 and none.llc_frac.mean == pytest.approx(0.5)
    share = tc.testbed_by_load(rows, "MM-S", 2.5, "share")[(2.0, 2, "fixed:0")]
    assert share.llc_frac.n == 1 and share.llc_frac.mean == pytest.approx(0.2)
    assert [tc.row_rule(r) for r in rows] == ["none", "none", "share", None, None]
