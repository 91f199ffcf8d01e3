"""Stratified and latin trace offsets (dchlab.experiments.offsets): every trial spreads
a campaign's pages evenly over the trace, the same for every scheme of a (page, trial),
and `dch run --offsets stratified --name ...` makes such a rerun; `latin` also rotates
each page through every stratum and replays one trace realization for every load."""

from __future__ import annotations

import math
import textwrap

import pytest

from dchlab.experiments import store
from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.experiments.offsets import (
    LATIN_TRACE_SEED,
    latin_fraction,
    radical_inverse,
    stratified_fraction,
)
from dchlab.experiments.runner import plan, run_campaign
from dchlab.traces import profiles

CAMPAIGN = """
name: st
schemes: [all-hbc, dchannel, ideal]
conditions:
  - {name: embb, hbc: embb, llc: urllc}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1, p2, p3, p4, p5]}
trials: 3
seed: 4
offsets: stratified
analysis: {kind: gain, baseline: all-hbc}
"""


@pytest.fixture
def campaign(tmp_path):
    p = tmp_path / "st.yaml"
    p.write_text(textwrap.dedent(CAMPAIGN))
    return load_campaign(p, check_channels=False)


def test_radical_inverse_fills_the_gaps_of_earlier_trials():
    assert [radical_inverse(k) for k in range(6)] == [0.0, 0.5, 0.25, 0.75, 0.125, 0.625]
    with pytest.raises(ValueError):
        radical_inverse(-1)


@pytest.mark.parametrize("seed", [1, 2, 77])
@pytest.mark.parametrize("n", [1, 10, 40])
def test_each_trial_puts_one_page_in_every_nth_of_the_trace(seed, n):
    for trial in range(4):
        fr = [stratified_fraction(seed, n, i, trial) for i in range(n)]
        assert all(0.0 <= f < 1.0 for f in fr)
        # one page per stratum [k/n, (k+1)/n) after removing the common shift
        strata = sorted(math.floor(((f - fr[0]) % 1.0) * n + 1e-9) for f in fr)
        assert strata == list(range(n))


def test_trials_interleave_and_seeds_shift():
    n = 10
    t0 = stratified_fraction(3, n, 0, 0)
    # trial 1 starts the same page half a stratum later, trial 2 a quarter (radical inverse)
    assert stratified_fraction(3, n, 0, 1) == pytest.approx((t0 + 0.5 / n) % 1.0)
    assert stratified_fraction(3, n, 0, 2) == pytest.approx((t0 + 0.25 / n) % 1.0)
    # another seed: another shift and another page order
    assert stratified_fraction(4, n, 0, 0) != pytest.approx(t0)
    with pytest.raises(ValueError, match="outside"):
        stratified_fraction(1, 3, 3, 0)


def test_a_fraction_picks_that_share_of_the_longest_period():
    offset = profiles.trace_offset_ms  # MM-S: an hour-long drive (test_traces_profiles)
    a = offset("MM-S", 1, 0.25)
    b = offset("MM-S", 99, 0.25)  # the seed no longer matters for the offset
    assert a == b and 0 < a < 60 * 60_000
    assert offset("MM-S", 1, 0.5) == pytest.approx(2 * a, abs=1)
    assert offset("fixed:10ms/5mbit", 1, 0.5) == 0  # no trace, no offset
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        offset("MM-S", 1, 1.0)


def test_plan_gives_every_scheme_of_a_page_and_trial_the_same_stretch(campaign):
    groups, total = plan(campaign, set())
    assert total == 3 * 5 * 3
    by_pair: dict[tuple[str, int], set[float | None]] = {}
    for g in groups:
        by_pair.setdefault((g.items[0], g.trial), set()).add(g.offset_fraction)
    assert all(len(v) == 1 and None not in v for v in by_pair.values())
    for trial in range(3):
        got = sorted(next(iter(by_pair[(p, trial)])) for p in ["p1", "p2", "p3", "p4", "p5"])
        expected = sorted(stratified_fraction(4, 5, i, trial) for i in range(5))
        assert got == pytest.approx(expected)
    # the default stays the seed-hashed offset of every earlier campaign
    random_groups, _ = plan(campaign.variant(name="st-random", offsets="random"), set())
    assert {g.offset_fraction for g in random_groups} == {None}


def test_rows_say_how_their_offsets_were_chosen(campaign, tmp_path):
    seen = []

    def run(c, g, pool=None):  # TEST DATA ONLY: records the fraction the workload layer would get
        seen.append(g.offset_fraction)
        return [{"page": it, "plt_ms": 1000.0, "valid": True} for it in g.items]

    db = tmp_path / "s.duckdb"
    run_campaign(campaign, store_path=db, executor=run)
    rows = store.load_rows("st", store=db)
    assert len(rows) == 45 and {r["offsets"] for r in rows} == {"stratified"}
    assert None not in seen


def test_offsets_flag_needs_a_name_and_a_known_mode(campaign, tmp_path):
    with pytest.raises(CampaignError, match="needs --name"):
        campaign.variant(offsets="random")
    v = campaign.variant(name="st-r", offsets="random")
    assert v.offsets == "random" and v.rerun_command().endswith("--offsets random --name st-r")
    with pytest.raises(CampaignError, match="expected one of random, stratified, latin"):
        campaign.variant(name="st-x", offsets="even")
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent(CAMPAIGN).replace("offsets: stratified", "offsets: even"))
    with pytest.raises(CampaignError, match=r"bad.yaml.*offsets.*expected one of random"):
        load_campaign(bad, check_channels=False)


def _stratum(f: float, n: int) -> int:
    """Which nth of the trace `f` falls in (latin offsets keep the shift inside it)."""
    return math.floor(f * n + 1e-9)


@pytest.mark.parametrize("seed", [1, 5, 6])
@pytest.mark.parametrize("n", [1, 4, 10])
def test_latin_rotates_every_page_through_every_stratum(seed, n):
    grid = [[_stratum(latin_fraction(seed, n, i, t), n) for t in range(n)] for i in range(n)]
    # every trial: one page per stratum (a row of the Latin square)
    for t in range(n):
        assert sorted(grid[i][t] for i in range(n)) == list(range(n))
    # every page: every stratum once over n trials, one stratum further per trial
    for i in range(n):
        assert sorted(grid[i]) == list(range(n))
        assert all(grid[i][t] == (grid[i][0] + t) % n for t in range(n))
    # the second round of n trials starts each load half a stratum away (radical
    # inverse), wrapping inside the same stratum
    for i in range(n):
        first, later = latin_fraction(seed, n, i, 0), latin_fraction(seed, n, i, n)
        assert _stratum(later, n) == _stratum(first, n)
        assert abs(later - first) == pytest.approx(0.5 / n)
    with pytest.raises(ValueError):
        latin_fraction(seed, n, 0, -1)


def test_two_latin_seeds_sample_the_same_page_and_stretch_grid():
    n = 10

    def grid(seed: int) -> set[tuple[int, float]]:
        return {(i, round(latin_fraction(seed, n, i, t), 9)) for i in range(n) for t in range(n)}

    # every page at the middle of every tenth, whatever the seed: 0.05, 0.15, ... 0.95
    assert grid(5) == grid(6) == {(i, round((k + 0.5) / n, 9)) for i in range(n) for k in range(n)}
    # the seed decides only in which trial a page meets a stretch
    assert [latin_fraction(5, n, 0, t) for t in range(n)] != [
        latin_fraction(6, n, 0, t) for t in range(n)
    ]


def test_a_latin_campaign_replays_one_trace_realization_for_every_load(campaign):
    from dchlab.experiments.runner import cell_config
    from dchlab.testbed import channels as ch
    from dchlab.workloads import api

    latin = campaign.variant(name="st-latin", offsets="latin")
    groups, _ = plan(latin, set())
    specs = {(g.items[0], g.trial): cell_config(latin, g) for g in groups}
    assert {s.trace_seed for s in specs.values()} == {LATIN_TRACE_SEED}
    cfg_a = api.testbed_config(specs[("p1", 0)], "p1")
    cfg_b = api.testbed_config(specs[("p2", 1)], "p2")
    assert cfg_a.seed != cfg_b.seed and cfg_a.trace_seed == cfg_b.trace_seed == 1
    assert cfg_a.describe()["trace_seed"] == 1
    # what Testbed._check_inputs resolves: the same MM-S realization for both loads
    # (by the trace seed), where a stratified or random campaign draws one per load
    assert ch.resolve_channel("MM-S", cfg_a.trace_seed) == ch.resolve_channel("MM-S", 1)
    assert ch.resolve_channel("MM-S", cfg_a.seed) != ch.resolve_channel("MM-S", cfg_b.seed)
    stratified = {cell_config(campaign, g).trace_seed for g in plan(campaign, set())[0]}
    assert stratified == {None}


def test_a_latin_run_short_of_a_full_cycle_says_so(campaign, tmp_path, capsys):
    from dataclasses import replace

    def run(c, g, pool=None):  # TEST DATA ONLY
        return [{"page": it, "plt_ms": 1000.0, "valid": True} for it in g.items]

    def said() -> str:
        out = capsys.readouterr()
        return " ".join((out.out + out.err).split())  # the console wraps lines

    latin = campaign.variant(name="st-latin", offsets="latin")  # 5 pages, 3 trials
    run_campaign(latin, store_path=tmp_path / "s.duckdb", executor=run)
    assert "only after a multiple of 5 trials (5 pages); 3 trials leave the grid partial" in said()
    full = replace(campaign.variant(name="st-latin5", offsets="latin"), trials=5)
    run_campaign(full, store_path=tmp_path / "s.duckdb", executor=run)
    assert "multiple of" not in said()
