"""Analysis kind `heatmap`: IANS' comparison, each scheme against the better single
network of its scenario (the single arm with the lower mean metric there).

`analysis.singles` lists the single-network arms; `analysis.metrics` the metrics
(default: `analysis.metric`). Per page, the mean over paired trials of
(better - scheme) / better in %; then the median over pages with a 95% bootstrap CI
(IANS reports medians). One table per metric; plotted as a heatmap over the
scenarios' network A (LLC) x network B (HBC).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows, register
from dchlab.experiments.analysis import CI, DEFAULT_BOOT, DEFAULT_SEED, bootstrap_median
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table


@register("heatmap", help="median improvement over the better single network (IANS)")
class Heatmap(Analysis):
    """One better-single-network table per metric; the gains are the heatmap's cells."""

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        metrics = list(c.analysis.get("metrics") or [c.analysis.get("metric", "plt_ms")])
        plot: dict[str, Any] = {"metrics": metrics}
        tables = []
        for m in metrics:
            t, by_cell = better_single_table(c, rows, m)
            tables.append(t)
            plot.setdefault("cells", {})[m] = by_cell
        return Findings(tables, plot)


@dataclass(frozen=True)
class BetterSingleGain:
    """A scheme against the better of the single networks under one condition (IANS'
    comparison): the single arm with the lower mean metric is the baseline."""

    condition: str
    arm: str
    better: str  # the single arm with the lower mean metric here
    singles_mean: dict[str, float]  # mean metric of each single arm
    improvement_pct: CI  # median over pages of (better - arm) / better, %
    pages: int


def better_single_gains(
    rows: Iterable[dict[str, Any]],
    singles: Sequence[str],
    metric: str = "plt_ms",
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict[tuple[str, str], BetterSingleGain]:
    """Every other scheme against the better single network, per condition: per page
    the mean over paired trials of (better - arm) / better in %, then the median over
    pages with a bootstrap CI (IANS reports medians)."""
    rows = an.latest_per_cell(rows)
    table: dict[str, dict[str, dict[str, dict[int, float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for r in rows:
        if an.is_valid(r, metric):
            v = float(r[metric])
            table[an.condition_of(r)][an.arm_of(r)][an.item_of(r)][int(r.get("trial") or 0)] = v
    out: dict[tuple[str, str], BetterSingleGain] = {}
    for cond, arms in table.items():
        means_of = {
            a: float(np.mean([v for t in arms[a].values() for v in t.values()]))
            for a in singles
            if arms.get(a)
        }
        if not means_of:
            continue
        better = min(means_of, key=lambda a: means_of[a])
        base = arms[better]
        for arm, items in arms.items():
            if arm in singles:
                continue
            per_page = []
            for item, trials in items.items():
                pct = [
                    (base[item][t] - v) / base[item][t] * 100
                    for t, v in trials.items()
                    if t in base.get(item, {}) and base[item][t] > 0
                ]
                if pct:
                    per_page.append(float(np.mean(pct)))
            out[(cond, arm)] = BetterSingleGain(
                cond, arm, better, means_of,
                bootstrap_median(per_page, n_boot, seed), len(per_page),
            )  # fmt: skip
    return out


def better_single_table(
    c: Campaign, rows: Rows, metric: str
) -> tuple[Table, dict[tuple[str, str, str], BetterSingleGain]]:
    """IANS' comparison: each scheme against the better single network of its
    scenario (`analysis.singles`), median improvement over pages with a 95% CI.
    Returns the table and {(network A, network B, scheme): gain} for the heatmap."""
    singles = list(c.analysis.get("singles") or [])
    gains = better_single_gains(rows, singles, metric=metric)
    t = Table(
        f"{metric}: median improvement over the better single network (positive = faster; "
        "95% bootstrap CI over pages)",
        ["scenario", "network A (LLC)", "network B (HBC)", "better single", "scheme",
         "improvement % [CI]", "pages"],
    )  # fmt: skip
    cells: dict[tuple[str, str, str], BetterSingleGain] = {}
    for cond in c.conditions:
        a, b = str(cond.x.get("a", cond.llc)), str(cond.x.get("b", cond.hbc))
        for sch in c.schemes:
            g = gains.get((cond.name, sch.label))
            if g is None:
                continue
            cells[(a, b, sch.label)] = g
            t.rows.append(
                [cond.name, a, b, g.better, sch.label, g.improvement_pct.fmt(1, "%"), str(g.pages)]
            )
    return t, cells
