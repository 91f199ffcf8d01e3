"""Rerun comparisons: how far a campaign's headline gains moved when it was run again
(`dch run FILE --name NAME`: another seed, day or machine state; issue 18).

A rerun is set beside its original on the pages both loaded, and reruns on the same
pages with offsets chosen the same way are set against each other; each move is
paired per page, with its 95% CI over pages and the trials per page that would pin
it to ±STABLE_POINTS.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analysis import CI, DEFAULT_BOOT, DEFAULT_SEED, bootstrap_mean
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, compared_arms


def rerun_moves(
    first: Iterable[dict[str, Any]],
    second: Iterable[dict[str, Any]],
    metric: str = "plt_ms",
    baseline: str = "all-hbc",
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict[tuple[str, str], tuple[CI, float]]:
    """Per (condition, arm) measured in both runs: how far the second run's gain moved
    from the first's, in points, paired per page (each page's gain in the second run
    minus its gain in the first) with a bootstrap CI over pages; and the runs' effective
    trials per page, 2 / (1/Ta + 1/Tb) averaged over pages (Ta = Tb = T when both ran T).
    Pairing by page cancels what differs between pages, so the CI is what the
    trial-to-trial noise (trace position, machine) leaves: a move whose CI holds 0 is
    noise, and the CI's square narrows as 1/Ta + 1/Tb."""
    a_by, b_by = an.by_condition(first), an.by_condition(second)
    out: dict[tuple[str, str], tuple[CI, float]] = {}
    for cond, a_arms in a_by.items():
        b_arms = b_by.get(cond)
        if b_arms is None or baseline not in a_arms or baseline not in b_arms:
            continue
        for arm, a_items in a_arms.items():
            if arm == baseline or arm not in b_arms:
                continue
            ga = an.page_gains(a_items, a_arms[baseline], metric)
            gb = an.page_gains(b_arms[arm], b_arms[baseline], metric)
            both = [i for i in ga if i in gb]
            if not both:
                continue
            diffs = [gb[i].gain_pct - ga[i].gain_pct for i in both]
            trials = float(np.mean([2 / (1 / ga[i].pairs + 1 / gb[i].pairs) for i in both]))
            out[(cond, arm)] = (bootstrap_mean(diffs, n_boot, seed), trials)
    return out


#: The stability target of issue 18: headline gains move by at most this many points.
STABLE_POINTS = 2.0


#: The cells `moves` gives each row of the rerun tables, after the tables' own first columns.
MOVE_COLUMNS = ["condition", "scheme", "first gain %", "second gain %", "moved (points)"]


def moves(
    c: Campaign, first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> Iterator[list[str]]:
    """The table cells of every (condition, arm) both runs measured, on the pages both
    loaded: MOVE_COLUMNS (the move with its 95% CI over pages) and the trials per page
    and run for a CI of ±STABLE_POINTS."""
    metric = c.analysis.get("metric", "plt_ms")
    base = c.analysis.get("baseline", "all-hbc")
    pages = {str(r.get("item")) for r in first} & {str(r.get("item")) for r in second}
    first = [r for r in first if str(r.get("item")) in pages]
    second = [r for r in second if str(r.get("item")) in pages]
    ga = an.paired_gains(first, metric=metric, baseline=base)
    gb = an.paired_gains(second, metric=metric, baseline=base)
    moved = rerun_moves(first, second, metric=metric, baseline=base)
    for cond in c.conditions:
        for arm in compared_arms(c, base):
            a, b, m = (
                ga.get((cond.name, arm)),
                gb.get((cond.name, arm)),
                moved.get((cond.name, arm)),
            )
            if a is None or b is None or m is None:
                continue
            move, trials = m
            half = (move.hi - move.lo) / 2
            # the CI's half-width shrinks as 1/sqrt(trials) (pairing by page removed the
            # between-page part), so ±2 needs trials * (half / 2)^2 trials per page in
            # each run (trials: the effective number, rerun_moves)
            need = (
                "—"
                if math.isnan(half)
                else str(max(1, math.ceil(trials * (half / STABLE_POINTS) ** 2)))
            )
            yield [
                cond.name,
                arm,
                a.gain_pct.fmt(1, "%"),
                b.gain_pct.fmt(1, "%"),
                move.fmt(1),
                need,
            ]


def rerun_table(
    c: Campaign, rows: list[dict[str, Any]], reruns: dict[str, list[dict[str, Any]]]
) -> Table:
    """Each rerun's headline gains beside the original's on the same pages: how far they
    moved with another seed (trace offsets), day and machine state (issue 18)."""
    base = c.analysis.get("baseline", "all-hbc")
    t = Table(
        "Reruns (dch run --name): gain against "
        + base
        + " on the rerun's pages, original beside rerun (95% CI over pages; the move"
        " paired per page)",
        [
            "rerun",
            "condition",
            "scheme",
            f"{c.name} gain %",
            "rerun gain %",
            "moved (points)",
            f"trials/page for ±{STABLE_POINTS:g}",
        ],
    )
    for name, rr in sorted(reruns.items()):
        pages = {str(r.get("item")) for r in rr}
        t.rows += [[f"{name} ({len(pages)} pages)", *cells] for cells in moves(c, rows, rr)]
    return t


def offsets_of(rows: list[dict[str, Any]]) -> str:
    """How a rerun's loads chose their trace offsets (rows before the column: random)."""
    modes = sorted({str(r.get("offsets") or "random") for r in rows})
    return "/".join(modes)


def shared_stretches(
    ra: list[dict[str, Any]], rb: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The loads of two latin runs on the (condition, page, trace offset) stretches both
    measured, and how many such stretches there are per condition (the most of any).

    With latin offsets a (page, offset) is one stretch of one network, so two runs agree
    only on the stretches they share: a run of 5 trials against one of 10 would otherwise
    compare each page on 5 stretches with the same page on 10, a different sample."""

    def key(r: dict[str, Any]) -> tuple[str, str, Any]:
        return (an.condition_of(r), an.item_of(r), r.get("trace_offset_ms"))

    shared = {key(r) for r in ra} & {key(r) for r in rb}
    per_cond = Counter(k[0] for k in shared)
    n = max(per_cond.values(), default=0)
    return [r for r in ra if key(r) in shared], [r for r in rb if key(r) in shared], n


def rerun_pairs_table(c: Campaign, reruns: dict[str, list[dict[str, Any]]]) -> Table | None:
    """Reruns on the same pages, with offsets chosen the same way, set against each other
    (the stability check of issue 18: two seeds, two days; with latin offsets the same
    network sample), or None when no two reruns share pages and offsets mode."""
    base = c.analysis.get("baseline", "all-hbc")
    t = Table(
        "Rerun pairs on the same pages: gain against "
        + base
        + " in each (95% CI over pages), and how far the second moved from the first"
        " (paired per page, 95% CI over pages)",
        ["first", "second", *MOVE_COLUMNS, f"trials/page for ±{STABLE_POINTS:g}"],
    )
    names = sorted(reruns)
    for i, a_name in enumerate(names):
        for b_name in names[i + 1 :]:
            ra, rb = reruns[a_name], reruns[b_name]
            if {str(r.get("item")) for r in ra} != {str(r.get("item")) for r in rb}:
                continue
            if offsets_of(ra) != offsets_of(rb):
                continue
            first = f"{a_name} ({offsets_of(ra)}, seed {ra[0].get('seed')})"
            second = f"{b_name} ({offsets_of(rb)}, seed {rb[0].get('seed')})"
            if offsets_of(ra) == "latin":
                ra, rb, shared = shared_stretches(ra, rb)
                second += f"; {shared} (page, stretch) pairs in common"
            t.rows += [[first, second, *cells] for cells in moves(c, ra, rb)]
    return t if t.rows else None


def rerun_tables(
    c: Campaign, rows: list[dict[str, Any]], reruns: dict[str, list[dict[str, Any]]]
) -> list[Table]:
    """The rerun tables of a campaign: each rerun beside the original, then the pairs of
    reruns set against each other when any two share pages and offsets mode."""
    pairs = rerun_pairs_table(c, reruns)
    return [rerun_table(c, rows, reruns), *([pairs] if pairs is not None else [])]
