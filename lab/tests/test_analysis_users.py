"""Analysis kind `users` (issue 41): the gain per users per Mbit/s of URLLC and where
it falls to half of one device's, from hand-made rows."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dchlab.experiments.analyses import get_analysis
from dchlab.experiments.campaign import load_campaign
from dchlab.experiments.campaign_check import CampaignError

YAML = """
name: u
schemes: [all-hbc, dchannel]
conditions:
  - {name: A-C2-N1, hbc: embb, llc: urllc, x: {sweep: devices, value: 1, scenario: A, llc_mbit: 2, rule: none}}
  - {name: A-C2-N2, hbc: embb, llc: urllc, devices: 2, x: {sweep: devices, value: 2, scenario: A, llc_mbit: 2, rule: none}}
  - {name: A-C2-N4, hbc: embb, llc: urllc, devices: 4, x: {sweep: devices, value: 4, scenario: A, llc_mbit: 2, rule: none}}
  - {name: A-C10-N1, hbc: embb, llc: "fixed:5ms/10mbit", x: {sweep: devices, value: 1, scenario: A, llc_mbit: 10, rule: none}}
  - {name: A-C10-N4, hbc: embb, llc: "fixed:5ms/10mbit", devices: 4, x: {sweep: devices, value: 4, scenario: A, llc_mbit: 10, rule: none}}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1, p2]}
analysis: {kind: users, baseline: all-hbc}
"""

#: dchannel's PLT per condition and page (p1, p2); all-hbc's is 1000 ms everywhere:
#: gains 20, 10 (0 and 20 per page: its CI [0, 20] reaches above half of 20), 5 % at
#: C = 2 (half first at N = 4: 4 / 2 = 2.00 users per Mbit/s) and 20, 15 % at C = 10
#: (never half: > 4 / 10 = 0.40).
DCHANNEL = {"A-C2-N1": (800, 800), "A-C2-N2": (1000, 800), "A-C2-N4": (950, 950),
            "A-C10-N1": (800, 800), "A-C10-N4": (850, 850)}  # fmt: skip
#: all-hbc is 1000 ms except at C = 2, N = 4, where this machine would have slowed it,
#: with dchannel's PLT scaled alike (the gain stays 5 %): 1.5 × N = 1's all-hbc.
BASE = {"A-C2-N4": 1500}
DCHANNEL["A-C2-N4"] = (1425, 1425)
#: the rows' load averages per condition; the C = 10, N = 4 rows have none.
LOAD = {"A-C2-N1": 1.0, "A-C2-N2": 1.5, "A-C2-N4": 2.0, "A-C10-N1": 0.5}


def test_users_tables_read_the_gain_per_mbit_and_its_halving(tmp_path: Path) -> None:
    p = tmp_path / "u.yaml"
    p.write_text(textwrap.dedent(YAML))
    c = load_campaign(p, check_channels=False)
    rows = [
        {"condition": cond, "arm": arm, "item": page, "trial": 0, "valid": True,
         "plt_ms": float(BASE.get(cond, 1000) if arm == "all-hbc" else plt[k]),
         "cell": f"{cond}{arm}{page}", "host_load1": LOAD.get(cond)}
        for cond, plt in DCHANNEL.items() for arm in ("all-hbc", "dchannel")
        for k, page in enumerate(("p1", "p2"))
    ]  # fmt: skip
    tables = get_analysis("users").analyze(c, rows, {}).tables
    per, half = tables[-2], tables[-1]
    got = [(r[3], r[4], r[5], r[8], r[9], r[10]) for r in per.rows]
    assert [r[7] for r in per.rows] == ["20.0%"] * 5  # every point has N = 1's pages
    assert got == [("2", "1", "0.50", "100%", "1.00", "1.0"), ("2", "2", "1.00", "50%", "1.00", "1.5"),
                   ("2", "4", "2.00", "25%", "1.50", "2.0"),
                   ("10", "1", "0.10", "100%", "1.00", "0.5"), ("10", "4", "0.40", "75%", "1.00", "—")]  # fmt: skip
    # N = 2's mean (10 %) is at half, not below it; N = 4's (5 %) is below
    assert [(r[3], r[4], r[5], r[6], r[7]) for r in half.rows] == [
        ("2", "20.0", "2.00", "1, 2, 4", "2.00"),
        ("10", "20.0", "> 0.40 (not reached)", "1, 4", "not below"),
    ]


def test_points_where_the_machine_is_the_limit_are_listed_not_judged(tmp_path: Path) -> None:
    """With machine_limit 1.4, C = 2, N = 4 (all-hbc 1.5x slower than alone) measures the
    machine: listed and marked, but the halving search stops before it, so C = 2 is
    "not reached" up to N = 2 (N = 2's CI [0, 20] reaches above half of 20)."""
    p = tmp_path / "u.yaml"
    p.write_text(
        textwrap.dedent(YAML).replace(
            "baseline: all-hbc}", "baseline: all-hbc, machine_limit: 1.4}"
        )
    )
    c = load_campaign(p, check_channels=False)
    rows = [
        {"condition": cond, "arm": arm, "item": page, "trial": 0, "valid": True,
         "plt_ms": float(BASE.get(cond, 1000) if arm == "all-hbc" else plt[k]),
         "cell": f"{cond}{arm}{page}"}
        for cond, plt in DCHANNEL.items() for arm in ("all-hbc", "dchannel")
        for k, page in enumerate(("p1", "p2"))
    ]  # fmt: skip
    per, half = get_analysis("users").analyze(c, rows, {}).tables[-2:]
    assert [r[9] for r in per.rows] == ["1.00", "1.00", "1.50 machine", "1.00", "1.00"]
    assert [(r[3], r[5], r[6]) for r in half.rows] == [
        ("2", "> 1.00 (not reached)", "1, 2"),
        ("10", "> 0.40 (not reached)", "1, 4"),
    ]


def test_a_bad_machine_limit_names_the_field(tmp_path: Path) -> None:
    p = tmp_path / "u.yaml"
    p.write_text(
        textwrap.dedent(YAML).replace(
            "baseline: all-hbc}", "baseline: all-hbc, machine_limit: 0.5}"
        )
    )
    with pytest.raises(CampaignError, match=r"analysis.machine_limit: expected a number >= 1"):
        load_campaign(p, check_channels=False)


def test_each_point_is_judged_against_n1_on_its_own_pages(tmp_path: Path) -> None:
    """N = 1 measured on p1, p2 and p3, N = 2 on p1 and p2 only (a campaign extended
    with --pages for N = 1). all-hbc 1000 ms but 2000 on p3 at N = 1; dchannel at
    N = 1: 800, 800, 400 ms (gains 20, 20, 80 %: 40 % over all three pages, 20 % on p1
    and p2); at N = 2: 900, 900 (10 %). Against the whole N = 1 the point would keep 25 % and be below
    half; on its own pages it keeps 10 / 20 = 50 %: at half, not below. all-hbc's
    slowdown is on the same pages: N = 1's all-hbc means 1333 ms over three pages and
    1000 on p1 and p2, so N = 2's 1000 ms is 1.00x, not 0.75x."""
    p = tmp_path / "u.yaml"
    p.write_text(textwrap.dedent(YAML).replace("pages: [p1, p2]", "pages: [p1, p2, p3]"))
    c = load_campaign(p, check_channels=False)
    plt = {("A-C2-N1", "p1"): 800, ("A-C2-N1", "p2"): 800, ("A-C2-N1", "p3"): 400,
           ("A-C2-N2", "p1"): 900, ("A-C2-N2", "p2"): 900}  # fmt: skip
    base = {("A-C2-N1", "p3"): 2000}
    rows = [
        {"condition": cond, "arm": arm, "item": page, "trial": 0, "valid": True,
         "plt_ms": float(base.get((cond, page), 1000) if arm == "all-hbc" else ms),
         "cell": f"{cond}{arm}{page}"}
        for (cond, page), ms in plt.items() for arm in ("all-hbc", "dchannel")
    ]  # fmt: skip
    per, half = get_analysis("users").analyze(c, rows, {}).tables[-2:]
    # (N, gain's mean, N = 1 on its pages, kept, all-hbc slowdown)
    assert [(r[4], r[6].split()[0], r[7], r[8], r[9]) for r in per.rows] == [
        ("1", "40.0%", "40.0%", "100%", "1.00"),
        ("2", "10.0%", "20.0%", "50%", "1.00"),
    ]
    # the halving table keeps N = 1's whole gain; N = 2 is at half, not below it
    assert [(r[4], r[6], r[7]) for r in half.rows] == [("40.0", "1, 2", "not below")]


def test_a_page_without_a_valid_pair_leaves_the_reference_too(tmp_path: Path) -> None:
    """N = 2's dchannel loads of p2 are invalid (timeouts), so its gain counts p1 only,
    and so does its reference: N = 1 on p1 (all-hbc 1000, dchannel 800: 20 %), not on
    p1 and p2 (p2: 1000 against 400, 60 %; 40 % over both). N = 2's p1 gains 10 %: half
    of its reference, not a quarter."""
    p = tmp_path / "u.yaml"
    p.write_text(textwrap.dedent(YAML))
    c = load_campaign(p, check_channels=False)
    plt = {("A-C2-N1", "p1"): 800, ("A-C2-N1", "p2"): 400,
           ("A-C2-N2", "p1"): 900, ("A-C2-N2", "p2"): None}  # fmt: skip
    rows = [
        {"condition": cond, "arm": arm, "item": page, "trial": 0,
         "valid": arm == "all-hbc" or ms is not None,
         "plt_ms": 1000.0 if arm == "all-hbc" else (float(ms) if ms else None),
         "cell": f"{cond}{arm}{page}"}
        for (cond, page), ms in plt.items() for arm in ("all-hbc", "dchannel")
    ]  # fmt: skip
    per = get_analysis("users").analyze(c, rows, {}).tables[-2]
    assert [(r[4], r[6].split()[0], r[7], r[8]) for r in per.rows] == [
        ("1", "40.0%", "40.0%", "100%"),
        ("2", "10.0%", "20.0%", "50%"),
    ]
