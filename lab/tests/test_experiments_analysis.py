"""Paired analysis against hand-computed expectations (NSDI'23 §6.1 methodology:
mean over pages of each page's mean PLT difference against all-hbc)."""

from __future__ import annotations

import math

import pytest

from dchlab.experiments.analysis import (
    bootstrap_mean,
    llc_bytes_pct,
    means,
    paired_gains,
    unpaired,
)


def row(arm, page, trial, plt, valid=True, cond="c", **kw):
    return {
        "arm": arm,
        "page": page,
        "trial": trial,
        "plt_ms": plt,
        "valid": valid,
        "condition": cond,
        "cell": f"{cond}|{page}|t{trial}|{arm}",
        **kw,
    }


def plts(**pages: dict[str, list[float]]) -> list[dict]:
    """Rows of loads from page={arm: [PLT of trial 0, trial 1, ...]}, in that order."""
    return [
        row(arm, page, trial, plt)
        for page, arms in pages.items()
        for arm, trial_plts in arms.items()
        for trial, plt in enumerate(trial_plts)
    ]


def test_paired_gain_two_pages_by_hand():
    rows = plts(
        # page a: base 100, 200; dchannel 80, 150 -> diffs 20, 50 -> mean 35 ms, base mean 150 -> 23.333 %
        a={"all-hbc": [100.0, 200.0], "dchannel": [80.0, 150.0]},
        # page b: base 1000, 1000; dchannel 900, 700 -> diffs 100, 300 -> 200 ms, 20 %
        b={"all-hbc": [1000.0, 1000.0], "dchannel": [900.0, 700.0]},
    )
    g = paired_gains(rows)[("c", "dchannel")]
    assert g.gain_ms.mean == pytest.approx((35 + 200) / 2)
    assert g.gain_pct.mean == pytest.approx((100 * 35 / 150 + 20.0) / 2)
    assert g.pages == 2 and g.pairs == 4
    assert g.invalid_arm == 0 and g.invalid_base == 0
    # resampling 2 pages: every bootstrap mean lies between the two page gains
    assert 35 <= g.gain_ms.lo <= g.gain_ms.mean <= g.gain_ms.hi <= 200
    assert g.base_mean_ms == pytest.approx((150 + 1000) / 2)
    assert g.arm_mean_ms == pytest.approx((115 + 800) / 2)


def test_invalid_loads_are_excluded_and_counted_not_averaged():
    rows = [
        row("all-hbc", "a", 0, 100.0),
        row("all-hbc", "a", 1, 100.0),
        row("all-hbc", "a", 2, 100.0, valid=False),  # baseline invalid: pair 2 dropped
        row("dchannel", "a", 0, 90.0),
        row("dchannel", "a", 1, 3.0, valid=False),  # a suspiciously fast invalid load
        row("dchannel", "a", 2, 50.0),
    ]
    g = paired_gains(rows)[("c", "dchannel")]
    assert g.pairs == 1
    assert g.gain_ms.mean == pytest.approx(10.0)
    assert g.gain_pct.mean == pytest.approx(10.0)
    assert g.invalid_arm == 1 and g.invalid_base == 1


def test_runner_failures_are_not_loads_and_newest_row_wins():
    rows = [
        row("all-hbc", "a", 0, 100.0, ts="2026-01-01 00:00:00"),
        row("dchannel", "a", 0, 10.0, ts="2026-01-01 00:00:00"),  # superseded by the rerun
        row("dchannel", "a", 0, 60.0, ts="2026-01-02 00:00:00"),
        row(
            "dchannel",
            "a",
            0,
            None,
            valid=False,
            error="RuntimeError: boom",
            ts="2026-01-03 00:00:00",
        ),
    ]
    g = paired_gains(rows)[("c", "dchannel")]
    assert g.gain_ms.mean == pytest.approx(40.0)
    assert g.invalid_arm == 0


def test_ideal_share_and_llc_bytes():
    rows = [
        row("all-hbc", "a", 0, 100.0, bytes_hbc=1000, bytes_llc=0),
        row("ideal", "a", 0, 60.0, bytes_hbc=1000, bytes_llc=0),  # gain 40
        row("dchannel", "a", 0, 70.0, bytes_hbc=900, bytes_llc=100),  # gain 30 -> 75 % of ideal
        row("all-hbc", "b", 0, 200.0),
        row("ideal", "b", 0, 120.0),  # gain 80
        row("dchannel", "b", 0, 160.0, bytes_hbc=2700, bytes_llc=300),  # gain 40
    ]
    gains = paired_gains(rows)
    d = gains[("c", "dchannel")]
    assert d.gain_ms.mean == pytest.approx(35.0)
    assert gains[("c", "ideal")].gain_ms.mean == pytest.approx(60.0)
    assert d.ideal_share == pytest.approx(35.0 / 60.0)
    assert d.llc_bytes_pct == pytest.approx(100 * 400 / 4000)
    assert gains[("c", "ideal")].ideal_share == pytest.approx(1.0)


def test_conditions_are_kept_apart():
    rows = [
        row("all-hbc", "a", 0, 100.0, cond="x"),
        row("dchannel", "a", 0, 50.0, cond="x"),
        row("all-hbc", "a", 0, 100.0, cond="y"),
        row("dchannel", "a", 0, 150.0, cond="y"),
    ]
    g = paired_gains(rows)
    assert g[("x", "dchannel")].gain_pct.mean == pytest.approx(50.0)
    assert g[("y", "dchannel")].gain_pct.mean == pytest.approx(-50.0)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    vals = [1.0, 2.0, 3.0, 10.0]
    a, b = bootstrap_mean(vals, seed=7), bootstrap_mean(vals, seed=7)
    assert a == b
    assert a.mean == pytest.approx(4.0)
    assert 1.0 <= a.lo < 4.0 < a.hi <= 10.0
    assert bootstrap_mean([5.0]).lo == 5.0
    assert math.isnan(bootstrap_mean([]).mean)


def test_means_of_phases_over_trials():
    rows = [
        {"arm": "all-hbc", "item": "curl", "trial": t, "dns_ms": d, "valid": True, "condition": "c"}
        for t, d in enumerate([40.0, 44.0, 48.0])
    ] + [
        {
            "arm": "all-hbc",
            "item": "curl",
            "trial": 3,
            "dns_ms": 1.0,
            "valid": False,
            "condition": "c",
        }
    ]
    m = means(rows, ["dns_ms"])[("c", "all-hbc", "dns_ms")]
    assert m.value.mean == pytest.approx(44.0)
    assert m.loads == 4 and m.invalid == 1


def test_llc_bytes_ignores_rows_without_byte_counts():
    assert llc_bytes_pct([{"bytes_hbc": 3, "bytes_llc": 1}, {"plt_ms": 1}]) == pytest.approx(25.0)
    assert math.isnan(llc_bytes_pct([]))


def test_unpaired_offsets_are_detected():
    rows = [
        row("all-hbc", "a", 0, 100.0, trace_offset_ms=5.0),
        row("dchannel", "a", 0, 90.0, trace_offset_ms=5.0),
        row("all-hbc", "b", 0, 100.0, trace_offset_ms=7.0),
        row("dchannel", "b", 0, 90.0, trace_offset_ms=8.0),
    ]
    assert unpaired(rows) == ["c|b|t0: [7.0, 8.0]"]


def test_better_single_network_by_hand():
    """IANS' comparison: per scenario the single network with the lower mean is the
    baseline; per page the improvement in %, then the median over pages."""
    from dchlab.experiments.analyses.heatmap import better_single_gains

    rows = []
    # scenario s1: llc-only means 1000, hbc-only 800 -> hbc-only is the better single
    for page, (llc, hbc, ians) in {
        "p1": (1000, 800, 600),  # +25%
        "p2": (1000, 800, 720),  # +10%
        "p3": (1000, 800, 880),  # -10%
    }.items():
        rows += [row("all-llc", page, 0, llc, cond="s1"), row("all-hbc", page, 0, hbc, cond="s1"),
                 row("ians", page, 0, ians, cond="s1")]  # fmt: skip
    # scenario s2: the LLC network is better; an invalid ians load is left out
    rows += [row("all-llc", "p1", 0, 500, cond="s2"), row("all-hbc", "p1", 0, 900, cond="s2"),
             row("ians", "p1", 0, 400, cond="s2"), row("all-llc", "p2", 0, 500, cond="s2"),
             row("all-hbc", "p2", 0, 900, cond="s2"), row("ians", "p2", 0, 1, valid=False,
             cond="s2")]  # fmt: skip
    g = better_single_gains(rows, ["all-llc", "all-hbc"])
    s1, s2 = g[("s1", "ians")], g[("s2", "ians")]
    assert s1.better == "all-hbc" and s1.pages == 3
    assert s1.improvement_pct.mean == pytest.approx(10.0)  # median of 25, 10, -10
    assert s1.singles_mean == {"all-llc": 1000.0, "all-hbc": 800.0}
    assert s2.better == "all-llc" and s2.pages == 1
    assert s2.improvement_pct.mean == pytest.approx(20.0)  # (500 - 400) / 500
    assert ("s1", "all-hbc") not in g  # the singles are baselines, not rows


def test_heatmap_campaign_summarizes_and_plots(tmp_path):
    from dchlab.experiments.campaign import load_campaign
    from dchlab.experiments.report import plot_heatmap
    from dchlab.experiments.summary import summarize
    from dchlab.paths import repo_root

    c = load_campaign(repo_root() / "experiments" / "ians.yaml", check_channels=False)
    rows = []
    for cond in c.conditions[:3]:
        for page in ("p1", "p2"):
            for arm, v in (("all-llc", 900), ("all-hbc", 1000), ("ians", 800), ("mptcp", 950)):
                rows.append(row(arm, page, 0, v, cond=cond.name, atf_ms=v / 2))
    s = summarize(c, rows)
    atf, plt = s.tables
    assert len(atf.rows) == len(plt.rows) == 3 * 2  # 3 scenarios x (ians, mptcp)
    assert atf.rows[0][3] == "all-llc" and atf.rows[0][5].startswith("11.1%")
    png = plot_heatmap(s)
    assert png and len(png) > 1000


def _links(up: int, down: int) -> dict:
    return {"links": {"llc": {"uplink": {"bytes_out": up}, "downlink": {"bytes_out": down}}}}


def test_llc_usage_by_hand():
    """HotMobile'21 Table 1's quantities: kB over the LLC per load and that as a mean rate
    (bits / PLT). 125,000 B in 1000 ms = 1 Mbit/s; 50,000 B in 2000 ms = 0.2 Mbit/s."""
    from dchlab.experiments.analyses.llc_usage import LLC_USAGE, with_llc_usage

    rows = [
        row("pkt-state", "a", 0, 1000.0, stats=_links(125_000, 25_000)),
        row("pkt-state", "a", 1, 2000.0, stats=_links(50_000, 100_000)),
        row("pkt-state", "b", 0, 500.0, stats=_links(0, 62_500)),
        row("ideal", "b", 0, 400.0, stats={"links": {}}),  # no LLC link: left out
        row("pkt-state", "c", 0, float("nan"), valid=False, stats=_links(1, 1)),  # no PLT
    ]
    got = with_llc_usage(rows)
    assert [(r["page"], r["trial"]) for r in got] == [("a", 0), ("a", 1), ("b", 0)]
    a0, a1, b0 = got
    assert a0["llc_up_kb"] == 125.0 and a0["llc_down_kb"] == 25.0
    assert a0["llc_up_mbit"] == pytest.approx(1.0) and a0["llc_down_mbit"] == pytest.approx(0.2)
    assert a1["llc_up_mbit"] == pytest.approx(0.2) and a1["llc_down_mbit"] == pytest.approx(0.4)
    assert b0["llc_up_mbit"] == 0.0 and b0["llc_down_mbit"] == pytest.approx(1.0)
    # mean over pages of each page's mean: up (0.6 + 0.0) / 2, down (0.3 + 1.0) / 2
    m = means(got, LLC_USAGE)
    assert m[("c", "pkt-state", "llc_up_mbit")].value.mean == pytest.approx(0.3)
    assert m[("c", "pkt-state", "llc_down_mbit")].value.mean == pytest.approx(0.65)
    assert m[("c", "pkt-state", "llc_up_kb")].value.mean == pytest.approx((87.5 + 0.0) / 2)


def test_hotmobile_report_sets_llc_use_beside_table1():
    from pathlib import Path

    from dchlab.experiments.campaign import cell_key, load_campaign
    from dchlab.experiments.summary import summarize

    repo = Path(__file__).resolve().parents[2]
    c = load_campaign(repo / "experiments" / "hotmobile.yaml", check_channels=False)
    assert c.analysis["llc_usage"] is True
    rows = [
        dict(
            row(s.label, p, 0, 1000.0, cond="embb30", stats=_links(125_000, 62_500)),
            cell=cell_key("embb30", p, 0, s.label),
        )
        for s in c.schemes
        for p in ("a", "b")
    ]
    t = next(t for t in summarize(c, rows).tables if t.title.startswith("LLC use"))
    by_scheme = {r[1]: r for r in t.rows}
    assert set(by_scheme) == {s.label for s in c.schemes}
    ps = by_scheme["pkt-state"]
    assert ps[2].startswith("125.0 ") and ps[4].startswith("1.00 ") and ps[5].startswith("0.50 ")
    assert ps[6] == "1.00 / 0.50" and ps[7] == "0.87 / 0.52"  # p90; the paper's Table 1
    assert by_scheme["dchannel"][7] == "— / —"


def test_gain_difference_is_paired_per_page_by_hand():
    """Issue 19's goal 2 (>= 5 points over Algorithm 1): per page, the candidate's gain
    minus the reference's, both against the same baseline loads, then the mean."""
    from dchlab.experiments.analyses.versus import gain_differences

    rows = plts(
        # page a: base 1000; ref 800 (+20%), cand 700 (+30%) -> +10 points
        a={"all-hbc": [1000.0], "dchannel": [800.0], "new": [700.0]},
        # page b: base 500, 700 (mean 600); ref 450, 650 -> +50 ms = +8.33%;
        # cand 500, 740 -> -20 ms = -3.33% -> -11.67 points
        b={"all-hbc": [500.0, 700.0], "dchannel": [450.0, 650.0], "new": [500.0, 740.0]},
        # page c: no reference load -> not paired, left out
        c={"all-hbc": [900.0], "new": [100.0]},
    )
    ci, pages = gain_differences(rows, "new", "dchannel")["c"]
    assert pages == 2
    assert ci.mean == pytest.approx((10.0 - 35.0 / 3) / 2)  # -0.83


def test_beyond_report_sets_the_candidate_beside_algorithm_1():
    from pathlib import Path

    from dchlab.experiments.campaign import cell_key, load_campaign
    from dchlab.experiments.summary import summarize

    repo = Path(__file__).resolve().parents[2]
    c = load_campaign(repo / "experiments" / "beyond.yaml", check_channels=False)
    cand, ref = c.analysis["versus"]["candidate"], c.analysis["versus"]["reference"]
    plts = {"all-hbc": 1000.0, ref: 800.0, cand: 1030.0, "ideal": 600.0, "pkt-state": 900.0}
    rows = [
        dict(row(a, p, 0, plt, cond="MM-S"), cell=cell_key("MM-S", p, 0, a))
        for a, plt in plts.items()
        for p in ("a", "b")
    ]
    t = next(t for t in summarize(c, rows).tables if t.title.startswith(f"{cand} against"))
    assert len(t.rows) == 1
    cells = t.rows[0]
    assert cells[0] == "MM-S"
    assert cells[1].startswith("-3.0%") and cells[2].startswith("20.0%")
    assert cells[3].startswith("-23.0 ")  # -3 - 20 points
    assert cells[4] == "-8% / 50%"  # of the ideal's +400 ms: -30 ms, +200 ms
    assert cells[6] == "yes" and cells[7] == "2"  # 3% slower than all-hbc: more than 2%


def test_hindsight_picks_each_pages_best_scheme_by_hand():
    """Issue 19: the best of several schemes chosen per page after the fact (an optimistic
    bound on choosing among them) — per page the largest gain, then the mean."""
    from dchlab.experiments.analyses.hindsight import hindsight_best

    rows = plts(
        # page a: base 1000; x 800 (+20%), y 700 (+30%) -> y wins, +30%, 300 ms
        a={"all-hbc": [1000.0], "x": [800.0], "y": [700.0]},
        # page b: base 500; x 400 (+20%), y 450 (+10%) -> x wins, +20%, 100 ms
        b={"all-hbc": [500.0], "x": [400.0], "y": [450.0]},
        # page c: y never loaded it -> left out (both must have measured a page)
        c={"all-hbc": [900.0], "x": [100.0]},
    )
    h = hindsight_best(rows, ["x", "y"])["c"]
    assert h.pages == 2
    assert h.gain_pct.mean == pytest.approx(25.0)
    assert h.gain_ms == pytest.approx(200.0)
    assert h.wins == {"x": 1, "y": 1}
    assert hindsight_best(rows, ["x", "z"]) == {}  # z never measured: no bound


def test_fig3_reports_the_hindsight_bound_beside_the_ideal():
    from pathlib import Path

    from dchlab.experiments.campaign import cell_key, load_campaign
    from dchlab.experiments.summary import summarize

    repo = Path(__file__).resolve().parents[2]
    c = load_campaign(repo / "experiments" / "fig3.yaml", check_channels=False)
    arms = c.analysis["hindsight"]
    # every hindsight arm 900 ms but pkt-size:500 at 700 on page b; ideal 600
    plts = {a: 900.0 for a in arms} | {"all-hbc": 1000.0, "ideal": 600.0}
    rows = [
        dict(row(a, p, 0, 700.0 if (a, p) == ("pkt-size:500", "b") else plt, cond="MM-S"))
        | {"cell": cell_key("MM-S", p, 0, a)}
        for a, plt in plts.items()
        for p in ("a", "b")
    ]
    t = next(t for t in summarize(c, rows).tables if t.title.startswith("Hindsight"))
    assert len(t.rows) == 1
    cond, best, share, single, won, pages = t.rows[0]
    assert (cond, pages) == ("MM-S", "2")
    assert best.startswith("20.0%")  # (10 + 30) / 2
    assert share == "50%"  # 200 ms of the ideal's 400 ms
    assert single.startswith("pkt-size:500 20.0%")
    # page a: an eight-way tie, won by the first listed; page b: pkt-size:500
    assert won == "dchannel 1, pkt-size:500 1"
