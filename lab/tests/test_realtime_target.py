"""Issue 40's target in the `realtime` analysis (realtime_target, realtime_why) on
hand-made rows (TEST DATA ONLY) with hand-computed expectations: the reduction and its
bootstrap CI (paired and not), the verdict's three clauses, the bound, what the LLC
carried, where the time goes, and the fallback when rows lack the parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dchlab.experiments.analyses import get_analysis
from dchlab.experiments.analyses.realtime_target import reduction, verdict
from dchlab.experiments.analysis import CI
from dchlab.experiments.campaign import Campaign, load_campaign
from dchlab.experiments.tables import Table

REPO = Path(__file__).resolve().parents[2]


def test_paired_reduction_resamples_the_pairs_together() -> None:
    # p95 means 90 vs 125: 1 - 90/125 = 28%. Resampling 2 pairs gives pair 0 twice
    # (1 - 80/100 = 20%, p = 1/4), pair 1 twice (1 - 100/150 = 33.3%, p = 1/4) or
    # both (28%, p = 1/2): the 2.5th and 97.5th percentiles are 20% and 33.3%.
    red = reduction([(0, 80.0), (1, 100.0)], [(0, 100.0), (1, 150.0)])
    assert red is not None and red.how == "paired, 2"
    assert red.ci.mean == pytest.approx(28.0)
    assert red.ci.lo == pytest.approx(20.0) and red.ci.hi == pytest.approx(100 / 3)


def test_unpaired_reduction_resamples_each_arm() -> None:
    # No trial in common: new means resample to 80 (1/4), 100 (1/2), 120 (1/4), the
    # base's always to 100, so the reduction is 20%, 0%, -20%: CI [-20, 20] around 0.
    red = reduction([(None, 80.0), (None, 120.0)], [(5, 100.0), (6, 100.0)])
    assert red is not None and red.how == "unpaired, 2/2"
    assert (red.ci.mean, red.ci.lo, red.ci.hi) == pytest.approx((0.0, -20.0, 20.0))
    # one pair is not enough to pair: every session, independently
    red = reduction([(0, 90.0), (1, 70.0)], [(0, 100.0)])
    assert red is not None and red.how == "unpaired, 2/1"
    assert red.ci.mean == pytest.approx(20.0)
    assert reduction([], [(0, 100.0)]) is None
    # one session each, of the same trial: paired, no CI
    red = reduction([(3, 75.0)], [(3, 100.0)])
    assert red is not None and red.how == "paired, 1"
    assert (red.ci.mean, red.ci.lo, red.ci.hi, red.ci.n) == (25.0, 25.0, 25.0, 1)


def _ci(mean: float, lo: float, hi: float) -> CI:
    return CI(mean, lo, hi, 10)


def test_the_verdict_needs_all_three_clauses() -> None:
    red = reduction([(0, 70.0), (1, 70.0)], [(0, 100.0), (1, 100.0)])  # 30%, CI [30, 30]
    same = (_ci(1.0, 0.5, 1.5), _ci(1.0, 0.5, 1.5))
    assert verdict(red, same, same) == "met"
    # overlapping CIs are "not higher" / "not lower" even when the point is worse
    assert verdict(red, (_ci(1.4, 1.0, 2.0), _ci(1.0, 0.5, 1.5)), same) == "met"
    assert verdict(red, same, (_ci(3.0, 2.5, 3.5), _ci(3.2, 3.0, 3.6))) == "met"
    got = verdict(
        red, (_ci(3.0, 2.0, 4.0), _ci(1.0, 0.5, 1.5)), (_ci(1, 0.8, 1.2), _ci(2, 1.5, 2.5))
    )
    assert got == "not met: more freezes (3.00 vs 1.00/min); lower bitrate (1.00 vs 2.00 Mbit/s)"
    small = reduction([(0, 90.0), (1, 90.0)], [(0, 100.0), (1, 100.0)])
    assert verdict(small, same, same) == "not met: p95 reduction 10.0% < 20%"
    assert verdict(None, same, same) == "—"


def _campaign(tmp_path: Path) -> Campaign:
    data = yaml.safe_load((REPO / "experiments" / "realtime.yaml").read_text())
    data["schemes"] = ["all-hbc", "dchannel", "realtime"]
    data["conditions"] = [{"name": "MM-D", "hbc": "MM-D", "llc": "urllc"}]
    data["workload"]["apps"] = ["cloud-gaming"]
    data.pop("quick")
    (tmp_path / "rt.yaml").write_text(yaml.safe_dump(data))
    return load_campaign(tmp_path / "rt.yaml", check_channels=False)


#: Per arm: (p95 ms, freezes per 60-s session, Mbit/s, parts p50, parts p95).
ARMS: dict[str, tuple[float, int, float, dict[str, float], dict[str, float]]] = {
    "all-hbc": (120.0, 1, 4.0, {}, {}),
    "dchannel": (100.0, 1, 4.0, {"network_down": 20.0, "jitter_buffer": 33.0},
                 {"network_down": 40.0, "jitter_buffer": 50.0}),
    "realtime": (90.0, 1, 4.0, {"network_down": 10.0, "jitter_buffer": 30.0},
                 {"network_down": 15.0, "jitter_buffer": 60.0}),
}  # fmt: skip
#: Per arm: the Mbit/s the player saw (shown_mbps; all-hbc's sessions have none).
SHOWN = {"dchannel": 2.5, "realtime": 3.5}


def _row(arm: str, trial: int, parts: str) -> dict[str, Any]:
    """A session of `arm`; `parts`: "i2d" (row columns, JSON text as in the store),
    "frame" (only the frame delay's parts in stats) or "none"."""
    p95, freezes, mbps, p50s, p95s = ARMS[arm]
    links = {  # 10% of the downlink and 25% of the uplink bytes on the LLC, over 8 s
        "hbc": {"uplink": {"bytes_in": 750_000}, "downlink": {"bytes_in": 9_000_000}},
        "llc": {"uplink": {"bytes_in": 250_000}, "downlink": {"bytes_in": 1_000_000},
                "duration_s": 8.0},
    }  # fmt: skip
    agents = {
        "client": {"decisions": {"llc:rt_input": 30, "llc:rt_rtcp": 5, "hbc:reward": 2}},
        "gateway": {"decisions": {"llc:rt_input": 10, "hbc:rt_media": 100}},
    }
    video_down = {"parts_median_ms": {"network": 12.0}, "parts_p95_ms": {"network": 30.0}}
    row = {  # TEST DATA ONLY
        "workload": "realtime", "condition": "MM-D", "arm": arm, "scheme": arm,
        "item": "cloud-gaming", "page": "cloud-gaming", "trial": trial, "valid": True,
        "cell": f"MM-D|cloud-gaming|{trial}|{arm}", "input_to_display_p95_ms": p95,
        "input_to_display_p50_ms": p95 / 2, "frame_delay_p50_ms": 40.0,
        "frame_delay_p95_ms": 80.0, "duration_s": 60.0, "freezes": freezes,
        "fps_delivered": 30.0, "bitrate_mbps": mbps, "bytes_hbc": 9_750_000,
        "bytes_llc": 1_250_000, "frame_bytes_key_p50": 50_000.0,
        "frame_bytes_delta_p50": 5_000.0,
        "stats": {"links": links, "agents": agents, "realtime": {
            "samples": {"input_to_display_ms": [p95]},
            "video_down": video_down if parts == "frame" else {}}},
    }  # fmt: skip
    if arm in SHOWN:
        row["shown_mbps"] = SHOWN[arm]
    if parts == "i2d" and p50s:
        row["i2d_parts_p50_ms"] = json.dumps(p50s)
        row["i2d_parts_p95_ms"] = json.dumps(p95s)
    return row


def _tables(tmp_path: Path, parts: str) -> dict[str, Table]:
    rows = [_row(a, t, parts) for a in ARMS for t in (0, 1)]
    found = get_analysis("realtime").analyze(_campaign(tmp_path), rows, {})
    return {t.title.split(": ", 1)[1].split(" (")[0].split(",")[0]: t for t in found.tables}


def test_the_target_table_judges_the_new_policy(tmp_path: Path) -> None:
    t = _tables(tmp_path, "i2d")
    (row,) = t["the target"].rows
    # 90 vs 100 ms in both pairs: 10% [10, 10]; one freeze a minute and 4 Mbit/s each;
    # the Mbit/s shown are reported beside, not judged
    assert row == [
        "MM-D", "realtime", "2 / 2", "90.0 [90.0, 90.0]", "100.0 [100.0, 100.0]",
        "10.0% [10.0, 10.0]", "paired, 2", "1.00 [1.00, 1.00]", "1.00 [1.00, 1.00]",
        "4.00 [4.00, 4.00]", "4.00 [4.00, 4.00]", "3.50 [3.50, 3.50]", "2.50 [2.50, 2.50]",
        "not met: p95 reduction 10.0% < 20%",
    ]  # fmt: skip
    # all-hbc's 120 ms is above 96; realtime's 90 is under it, CI and all
    (bound,) = t["which schemes bring the p95 under 96 ms where all-hbc is above it"].rows
    assert bound == ["MM-D", "120.0 [120.0, 120.0]", "realtime 90.0 [90.0, 90.0] (CI under)"]


def test_the_reason_says_what_the_llc_carried_and_where_the_time_goes(tmp_path: Path) -> None:
    t = _tables(tmp_path, "i2d")
    carried = {r[1]: r for r in t["what the LLC carried"].rows}
    # 25% / 10% of the bytes; 8 * 250 kB / 8 s = 0.25 Mbit/s up, 1 Mbit/s down; the
    # 4 Mbit/s video is 2x urllc's 2 Mbit/s; 50 kB take 8 * 50e3 / 2e6 = 200 ms, 5 kB 20;
    # per session 30 + 10 rt_input and 5 rt_rtcp packets on the LLC
    assert carried["realtime"][2:] == [
        "2", "25.0", "10.0", "0.25", "1.00", "2.0", "4.00", "2.0x", "50000", "200", "5000",
        "20", "rt_input 40, rt_rtcp 5",
    ]  # fmt: skip
    parts = {(r[4]): r for r in t["where the time goes"].rows}
    assert parts["network_down"][2:] == [
        "input-to-display", "2 / 2", "network_down", "20.0", "10.0", "-10.0", "40.0", "15.0",
        "-25.0",
    ]  # fmt: skip
    assert parts["jitter_buffer"][8:] == ["50.0", "60.0", "+10.0"]
    assert "superseded" not in parts  # in neither arm's rows: no row of dashes
    assert parts["whole"][5:] == ["50.0", "45.0", "-5.0", "100.0", "90.0", "-10.0"]
    (why,) = t["why the target was missed"].rows
    assert why[:3] == ["MM-D", "realtime", "not met: p95 reduction 10.0% < 20%"]
    assert why[3] == (
        "10.0% of the downlink bytes under realtime (10.0% under dchannel), 25.0% of the "
        "uplink (25.0%); the video (4.00 Mbit/s) is 2.0x its 2 Mbit/s; a median key frame "
        "(50000 B) takes 200 ms on it"
    )
    assert why[4] == (
        "p95 parts differing most (new - Alg. 1): network_down -25.0 ms, jitter_buffer +10.0 ms"
    )


def test_rows_without_parts_fall_back_and_say_what_is_missing(tmp_path: Path) -> None:
    missing = (
        "the rows of realtime and dchannel have no input-to-display parts (i2d_parts_p50_ms, "
        "i2d_parts_p95_ms, stats.realtime.input_to_display_parts: recorded before they were "
        "measured, commit 747b0b2); "
    )
    t = _tables(tmp_path, "frame")
    rows = t["where the time goes"].rows
    assert [r[4] for r in rows] == ["network", "whole"]  # frame-delay parts that exist
    assert rows[0][2:] == ["downlink frame delay", "2 / 2", "network", "12.0", "12.0", "+0.0",
                           "30.0", "30.0", "+0.0"]  # fmt: skip
    assert rows[1][5:] == ["40.0", "40.0", "+0.0", "80.0", "80.0", "+0.0"]
    (why,) = t["why the target was missed"].rows
    assert why[4] == (
        "p95 parts differing most (new - Alg. 1): network +0.0 ms; "
        + missing
        + "the downlink frame delay's parts instead"
    )
    t = _tables(tmp_path, "none")
    assert "where the time goes" not in t
    (why,) = t["why the target was missed"].rows
    assert why[4] == missing + (
        "and no downlink frame delay parts either (stats.realtime.video_down.parts_median_ms, "
        "parts_p95_ms): no part compared"
    )


def test_a_met_target_needs_no_reason(tmp_path: Path) -> None:
    rows = [_row(a, t, "i2d") for a in ARMS for t in (0, 1)]
    for r in rows:
        if r["arm"] == "realtime":
            r["input_to_display_p95_ms"] = 70.0  # 30% below dchannel's 100
    found = get_analysis("realtime").analyze(_campaign(tmp_path), rows, {})
    titles = [t.title for t in found.tables]
    assert not any("why the target" in x or "LLC carried" in x for x in titles)
    target = next(t for t in found.tables if "the target" in t.title)
    assert target.rows[0][5:7] == ["30.0% [30.0, 30.0]", "paired, 2"]
    assert target.rows[0][-1] == "met"


def test_a_labelled_parameterised_policy_is_a_new_arm(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "experiments" / "realtime.yaml").read_text())
    data["schemes"] = [
        "all-hbc", "dchannel", {"label": "rt-dup-a05", "scheme": "realtime-dup:alpha=0.5"}
    ]  # fmt: skip
    data["conditions"] = [{"name": "MM-D", "hbc": "MM-D", "llc": "urllc"}]
    data["workload"]["apps"] = ["cloud-gaming"]
    data.pop("quick")
    (tmp_path / "rt.yaml").write_text(yaml.safe_dump(data))
    c = load_campaign(tmp_path / "rt.yaml", check_channels=False)
    rows = [_row("dchannel", t, "i2d") for t in (0, 1)]
    for t in (0, 1):
        r = _row("realtime", t, "i2d")
        rows.append({**r, "arm": "rt-dup-a05", "cell": f"MM-D|cloud-gaming|{t}|rt-dup-a05"})
    found = get_analysis("realtime").analyze(c, rows, {})
    target = next(t for t in found.tables if "the target" in t.title)
    assert [r[:2] for r in target.rows] == [["MM-D", "rt-dup-a05"]]
    assert target.rows[0][5] == "10.0% [10.0, 10.0]"
