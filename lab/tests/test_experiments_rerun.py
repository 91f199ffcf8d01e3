"""Reruns (`dch run FILE --name NAME --seed N --pages N`): their own campaign, rows that
say what they rerun, and a report table of how far the headline gains moved."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from dchlab.experiments import store
from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.experiments.runner import run_campaign
from dchlab.experiments.summary import summarize

CAMPAIGN = """
name: rr
schemes: [all-hbc, dchannel]
conditions:
  - {name: embb, hbc: embb, llc: urllc}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1, p2, p3]}
trials: 1
seed: 1
analysis: {kind: gain, baseline: all-hbc}
"""


def fake(dchannel_ms: float):
    def run(c, g, pool=None):  # TEST DATA ONLY: all-hbc 1000 ms, dchannel as given
        ms = 1000.0 if g.scheme.label == "all-hbc" else dchannel_ms
        return [{"page": it, "plt_ms": ms, "valid": True} for it in g.items]

    return run


@pytest.fixture
def campaign(tmp_path):
    p = tmp_path / "rr.yaml"
    p.write_text(textwrap.dedent(CAMPAIGN))
    return load_campaign(p, check_channels=False)


def test_variant_is_its_own_campaign(campaign):
    v = campaign.variant(name="rr-seed2", seed=2, pages=2)
    assert (v.name, v.seed, v.workload.pages, v.rerun_of) == ("rr-seed2", 2, ("p1", "p2"), "rr")
    assert v.rerun_command().endswith("rr.yaml --pages 2 --seed 2 --name rr-seed2")
    assert campaign.variant(pages=2).rerun_of is None  # a subset of the same cells
    with pytest.raises(CampaignError, match="needs --name"):
        campaign.variant(seed=2)
    with pytest.raises(CampaignError, match="--name"):
        campaign.variant(name="bad name")


def test_variant_keeps_only_the_named_schemes_and_conditions(campaign, tmp_path):
    v = campaign.variant(schemes=["dchannel"], conditions=["embb"])
    assert [s.label for s in v.schemes] == ["dchannel"] and v.rerun_of is None
    assert [c.name for c in v.conditions] == ["embb"]
    assert v.rerun_command().endswith("rr.yaml --schemes dchannel --conditions embb")
    with pytest.raises(CampaignError, match=r"--schemes ideal: not a scheme label .*all-hbc"):
        campaign.variant(schemes=["all-hbc", "ideal"])
    with pytest.raises(CampaignError, match=r"--conditions MM-S: not a condition .*embb"):
        campaign.variant(conditions=["MM-S"])
    # a subset measures only its own cells; the full campaign later measures the rest
    db = tmp_path / "s.duckdb"
    run_campaign(v, store_path=db, executor=fake(800.0))
    assert {r["scheme"] for r in store.load_rows("rr", store=db)} == {"dchannel"}
    s = run_campaign(campaign, store_path=db, executor=fake(800.0))
    assert (s.skipped, s.measured) == (3, 3)


def test_report_sets_the_rerun_beside_the_original_on_its_pages(campaign, tmp_path):
    db = tmp_path / "s.duckdb"
    run_campaign(campaign, store_path=db, executor=fake(800.0))  # gain 20%
    rerun = campaign.variant(name="rr-seed2", seed=2, pages=2)
    run_campaign(rerun, store_path=db, executor=fake(700.0))  # gain 30%
    rows = store.load_rows("rr-seed2", store=db)
    assert {r["rerun_of"] for r in rows} == {"rr"} and {r["seed"] for r in rows} == {2}
    assert {r["item"] for r in rows} == {"p1", "p2"}
    reruns = store.reruns_of("rr", db)
    assert list(reruns) == ["rr-seed2"]
    s = summarize(campaign, store.load_rows("rr", store=db), reruns)
    (t,) = [t for t in s.tables if t.title.startswith("Reruns")]
    assert t.rows == [
        [
            "rr-seed2 (2 pages)",
            "embb",
            "dchannel",
            "20.0% [20.0, 20.0]",
            "30.0% [30.0, 30.0]",
            "10.0 [10.0, 10.0]",
            "1",
        ]
    ]


def rerun_pairs_rows(campaign, db) -> list[list[str]]:
    """The rows of the "Rerun pairs" table of campaign rr and its reruns in `db`."""
    s = summarize(campaign, store.load_rows("rr", store=db), store.reruns_of("rr", db))
    (t,) = [t for t in s.tables if t.title.startswith("Rerun pairs")]
    return t.rows


def test_two_reruns_on_the_same_pages_are_set_against_each_other(campaign, tmp_path):
    db = tmp_path / "s.duckdb"
    run_campaign(campaign, store_path=db, executor=fake(800.0))
    a = campaign.variant(name="rr-a", seed=3, pages=2, offsets="stratified")
    b = campaign.variant(name="rr-b", seed=4, pages=2, offsets="stratified")
    run_campaign(a, store_path=db, executor=fake(700.0))  # gain 30%
    run_campaign(b, store_path=db, executor=fake(750.0))  # gain 25%
    run_campaign(campaign.variant(name="rr-c", seed=5, pages=1), store_path=db, executor=fake(1.0))
    run_campaign(campaign.variant(name="rr-d", seed=6, pages=2), store_path=db, executor=fake(1.0))
    # rr-c covers other pages, rr-d chose its offsets at random: no pair with either
    assert rerun_pairs_rows(campaign, db) == [
        ["rr-a (stratified, seed 3)", "rr-b (stratified, seed 4)", "embb", "dchannel",
         "30.0% [30.0, 30.0]", "25.0% [25.0, 25.0]", "-5.0 [-5.0, -5.0]", "1"],
    ]  # fmt: skip


def test_two_latin_runs_are_compared_on_the_stretches_both_measured(campaign, tmp_path):
    """A latin run of one trial meets each page on one of its three stretches; set
    against a run of three trials it is compared on those stretches only, where the two
    runs measured the same network: here the same PLTs, so the move is exactly 0."""

    def by_stretch(c, g, pool=None):  # TEST DATA ONLY: dchannel 800 ms on stretch 0, else 600 ms
        frac = g.offset_fraction
        assert frac is not None
        ms = 1000.0 if g.scheme.label == "all-hbc" else (800.0 if frac < 1 / 3 else 600.0)
        off = round(frac * 3000)
        return [{"page": it, "plt_ms": ms, "valid": True, "trace_offset_ms": off} for it in g.items]

    db = tmp_path / "s.duckdb"
    run_campaign(campaign, store_path=db, executor=fake(800.0))
    a = dataclasses.replace(campaign.variant(name="rr-a", seed=3, offsets="latin"), trials=3)
    b = campaign.variant(name="rr-b", seed=4, offsets="latin")
    run_campaign(a, store_path=db, executor=by_stretch)
    run_campaign(b, store_path=db, executor=by_stretch)
    assert len(store.load_rows("rr-a", store=db)) == 18  # 3 pages x 3 stretches x 2 schemes
    assert rerun_pairs_rows(campaign, db) == [
        ["rr-a (latin, seed 3)", "rr-b (latin, seed 4); 3 (page, stretch) pairs in common",
         "embb", "dchannel", "33.3% [20.0, 40.0]", "33.3% [20.0, 40.0]", "0.0 [0.0, 0.0]", "1"],
    ]  # fmt: skip


def test_report_does_not_list_a_rerun_as_an_orphan(campaign, tmp_path):
    from dchlab.experiments.report import build_report

    db = tmp_path / "s.duckdb"
    run_campaign(campaign, store_path=db, executor=fake(800.0))
    run_campaign(
        campaign.variant(name="rr-b", seed=3, pages=1), store_path=db, executor=fake(900.0)
    )
    html = build_report(db, tmp_path / "r.html", [campaign.path], with_channels=False).read_text()
    assert "Reruns" in html and "rr-b (1 pages)" in html
    assert "in the store, no campaign file" not in html


def test_a_campaigns_cdn_block_reaches_webreplay(campaign, tmp_path):
    from dchlab.experiments.runner import cell_config, plan

    p = tmp_path / "cdn.yaml"
    p.write_text(
        textwrap.dedent(CAMPAIGN).replace("name: rr", "name: rr-cdn")
        + "cdn: {delays_ms: {edge: 0, parent: 10, origin: 50}, hit_ratio: {edge: 0.6, parent: 0.25}, seed: 3}\n"
    )
    c = load_campaign(p, check_channels=False)
    groups, _ = plan(c, set())
    args = cell_config(c, groups[0]).webreplay_args
    assert args == tuple(c.cdn.webreplay_args()) and args  # non-empty: the tier model is on
    plain = cell_config(load_campaign(tmp_path / "rr.yaml", check_channels=False), groups[0])
    assert plain.webreplay_args == ()


def test_rows_measured_on_a_busy_machine_are_counted():
    from dchlab.experiments.summary import busy_text

    rows = [
        {"cell": "a", "host_load1": 5.5, "host_cpus": 2, "valid": True, "plt_ms": 1.0},
        {"cell": "b", "host_load1": 9.25, "host_cpus": 2, "valid": True, "plt_ms": 1.0},
        {"cell": "c", "valid": True, "plt_ms": 1.0},  # older row: no load recorded
    ]
    assert busy_text(rows).startswith("1 of 2 measurements were taken while the machine's")
    assert "up to 9.2" in busy_text(rows)
    assert busy_text(rows[:1]) == ""


def test_arms_measured_hours_from_their_baseline_are_named():
    """An arm added to a campaign later pairs with baseline loads of another hour or
    day (table5's alpha = 0.25-2 on pages 11-40: 27.6 h); the report must say so."""
    from datetime import datetime, timedelta

    from dchlab.experiments.analysis import pairing_gaps
    from dchlab.experiments.summary import pairing_gap_text

    t0 = datetime(2026, 11, 23, 12, 18)

    def row(arm: str, page: str, trial: int, ts: datetime) -> dict:
        cell = f"c/{page}/{trial}/{arm}"
        return {
            "cell": cell,
            "condition": "c",
            "item": page,
            "trial": trial,
            "arm": arm,
            "ts": ts,
            "valid": True,
            "plt_ms": 1.0,
        }

    rows = []
    for i, page in enumerate(["p1", "p2", "p3"]):
        rows.append(row("all-hbc", page, 0, t0 + timedelta(minutes=i)))
        rows.append(row("dchannel", page, 0, t0 + timedelta(minutes=i)))  # same run
        # added a day later; p3 was re-measured beside its baseline
        base_ts = t0 + timedelta(minutes=i)
        late = base_ts + timedelta(hours=27, minutes=36) if page != "p3" else base_ts
        rows.append(row("dchannel:alpha=2", page, 0, late))
    # the same cell measured again later replaces the first (latest per cell)
    rows.append(row("dchannel", "p1", 0, t0 + timedelta(hours=1)))
    gaps = pairing_gaps(rows, "all-hbc")
    assert gaps["dchannel"] == 0.0  # median of 3600, 0, 0
    assert gaps["dchannel:alpha=2"] == pytest.approx(27.6 * 3600)  # median of 2 far, 1 near
    text = pairing_gap_text(rows, "all-hbc")
    assert text.startswith("1 arm ran apart from the all-hbc loads")
    assert "dchannel:alpha=2 (27.6 h)" in text and "dchannel (" not in text
    # within PAIR_GAP_S (30 min), or with no timestamps, nothing is said
    assert pairing_gap_text([r for r in rows if r["arm"] != "dchannel:alpha=2"], "all-hbc") == ""
    assert pairing_gap_text([{**r, "ts": None} for r in rows], "all-hbc") == ""


def test_a_rerun_without_its_original_still_gets_its_tables(campaign, tmp_path):
    """Published as a rerun only (e.g. fig3-busy): summarised with the original's
    definition under its own name."""
    from dchlab.experiments.report import build_report

    db = tmp_path / "s.duckdb"
    run_campaign(campaign.variant(name="rr-busy"), store_path=db, executor=fake(800.0))
    html = build_report(db, tmp_path / "r.html", [campaign.path], with_channels=False).read_text()
    assert "rr-busy" in html and "A rerun of rr" in html and "20.0%" in html


def _row(run: str, page: str, trial: int, scheme: str, plt: float) -> dict:
    return {
        "campaign": run,
        "condition": "embb",
        "item": page,
        "trial": trial,
        "scheme": scheme,
        "plt_ms": plt,
        "valid": True,
    }


def test_a_move_is_paired_per_page_and_says_how_many_trials_pin_it_to_2_points():
    from dchlab.experiments.reruns import rerun_moves

    # page p1: base 1000 ms; dchannel 800 then 700 in run a (gain 25%), 750 twice in b
    # (25%): p1 did not move. Page p2: base 2000; a: 1000 (50%), b: 1200 (40%): -10.
    a = [_row("a", "p1", t, "all-hbc", 1000) for t in (0, 1)]
    a += [_row("a", "p1", 0, "dchannel", 800), _row("a", "p1", 1, "dchannel", 700)]
    a += [_row("a", "p2", t, "all-hbc", 2000) for t in (0, 1)]
    a += [_row("a", "p2", t, "dchannel", 1000) for t in (0, 1)]
    b = [_row("b", "p1", t, "all-hbc", 1000) for t in (0, 1)]
    b += [_row("b", "p1", t, "dchannel", 750) for t in (0, 1)]
    b += [_row("b", "p2", t, "all-hbc", 2000) for t in (0, 1)]
    b += [_row("b", "p2", t, "dchannel", 1200) for t in (0, 1)]
    moves = rerun_moves(a, b)
    move, trials = moves[("embb", "dchannel")]
    # the mean over pages of (b - a): (0 + -10) / 2; the bootstrap resamples {0, -10}
    assert move.mean == pytest.approx(-5.0) and move.n == 2
    assert move.lo == pytest.approx(-10.0) and move.hi == pytest.approx(0.0)
    assert trials == 2.0
    # one trial against two: the effective trials are 2 / (1/1 + 1/2)
    one = [r for r in a if r["trial"] == 0]
    assert rerun_moves(one, b)[("embb", "dchannel")][1] == pytest.approx(4 / 3)
    # a page only one run loaded is not paired
    assert rerun_moves(a, [r for r in b if r["item"] == "p1"])[("embb", "dchannel")][0].mean == 0.0


def test_a_rerun_section_names_the_command_that_made_it(campaign, tmp_path):
    """The report's rerun command for a rerun comes from its rows: what it measured
    (schemes, pages, trials) and with what (seed, offsets), not the original's command."""
    db = tmp_path / "s.duckdb"
    rerun = campaign.variant(name="rr-lat", seed=5, pages=2, schemes=["dchannel"], offsets="latin")
    run_campaign(dataclasses.replace(rerun, trials=3), store_path=db, executor=fake(700.0))
    rows = store.load_rows("rr-lat", store=db)
    cmd = campaign.as_rerun("rr-lat", rows).rerun_command()
    assert cmd.endswith(
        "rr.yaml --schemes dchannel --pages 2 --seed 5 --offsets latin --trials 3 --name rr-lat"
    ), cmd
    # a rerun of everything the file holds needs only its name
    full = [dict(r, arm=a) for r in store.load_rows("rr-lat", store=db) for a in ("all-hbc", "dchannel")]  # fmt: skip
    full = [dict(r, page=p, seed=1, offsets="random", trial=0) for r in full for p in ("p1", "p2", "p3")]  # fmt: skip
    assert campaign.as_rerun("rr-all", full).rerun_command().endswith("rr.yaml --name rr-all")
