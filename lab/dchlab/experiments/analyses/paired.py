"""The paired-gain family of analysis kinds (gain, sweep, plt, reorder): each scheme's
page load time gain against the baseline, paired per (page, trial) as in the paper
(NSDI'23 §6.1; dchlab.experiments.analysis.paired_gains), beside the paper's gain.

After the gain table, whatever the campaign asks for or its rows hold: a candidate
policy against a reference (`analysis.versus`), the per-page best in hindsight
(`analysis.hindsight`), the reruns beside the original, the paint and visual metrics
(rows with `fcp_ms`), the LLC's use (`analysis.llc_usage`) and the gains per protocol
(`analysis.by_protocol`) with what the loads measured where they differ.
"""

from __future__ import annotations

import math
from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows
from dchlab.experiments.analyses.hindsight import hindsight_table
from dchlab.experiments.analyses.llc_usage import llc_usage_table
from dchlab.experiments.analyses.page_metrics import page_metrics_table
from dchlab.experiments.analyses.protocol_why import why_table
from dchlab.experiments.analyses.protocols import protocol_table
from dchlab.experiments.analyses.versus import versus_table
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.reruns import rerun_tables
from dchlab.experiments.tables import Table, compared_arms, num, paper_value


class PairedGain(Analysis):
    """Base of the paired-gain kinds: the gain table and the optional tables after it.
    A kind adds its own tables around the gain table (`around_gains`) and data to its
    plot (`more_plot`)."""

    def around_gains(self, c: Campaign, rows: Rows, metric: str) -> tuple[list[Table], list[Table]]:
        """The tables this kind shows before and after the gain table."""
        return [], []

    def more_plot(self, c: Campaign, rows: Rows, metric: str) -> dict[str, Any]:
        """Plot data beside the gain points."""
        return {}

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        base = c.analysis.get("baseline", "all-hbc")
        metric = c.analysis.get("metric", "plt_ms")
        gains = an.paired_gains(rows, metric=metric, baseline=base)
        t, points = gain_table(c, gains)
        before, after = self.around_gains(c, rows, metric)
        tables = [*before, t, *after]
        if c.analysis.get("versus"):
            tables.append(versus_table(c, rows, gains, metric))
        if c.analysis.get("hindsight"):
            tables.append(hindsight_table(c, rows, gains, metric))
        if reruns:
            tables += rerun_tables(c, rows, reruns)
        if any(r.get("fcp_ms") is not None for r in rows):
            tables.append(page_metrics_table(c, rows))
        if c.analysis.get("llc_usage"):
            tables.append(llc_usage_table(c, rows))
        if c.analysis.get("by_protocol"):
            tables += [protocol_table(c, rows, metric), why_table(c, rows, metric)]
        return Findings(tables, {"points": points, **self.more_plot(c, rows, metric)})


def best_of(
    c: Campaign, gains: dict[tuple[str, str], an.Gain]
) -> dict[tuple[str, str], tuple[str, an.Gain]]:
    """analysis.best_of: per condition, the member arm with the largest mean gain."""
    out: dict[tuple[str, str], tuple[str, an.Gain]] = {}
    for label, members in c.analysis.get("best_of", {}).items():
        for cond in c.conditions:
            cands = [(m, gains[(cond.name, m)]) for m in members if (cond.name, m) in gains]
            cands = [x for x in cands if not math.isnan(x[1].gain_ms.mean)]
            if cands:
                out[(cond.name, label)] = max(cands, key=lambda x: x[1].gain_pct.mean)
    return out


def gain_table(
    c: Campaign, gains: dict[tuple[str, str], an.Gain]
) -> tuple[Table, list[dict[str, Any]]]:
    """The gain of every scheme (and every `best_of` label) against the baseline per
    condition, beside the paper's; and the points of the gain plot."""
    t = Table(
        "PLT gain against "
        + c.analysis["baseline"]
        + " (positive = faster; mean over pages, 95% bootstrap CI over pages)",
        [
            "condition",
            "scheme",
            "gain % [CI]",
            "paper %",
            "gain ms [CI]",
            "paper ms",
            "LLC bytes %",
            "paper LLC %",
            "of ideal",
            "pages / pairs",
            "invalid (scheme / base)",
        ],
    )
    points: list[dict[str, Any]] = []
    best = best_of(c, gains)
    for cond in c.conditions:
        arms: list[tuple[str, str, an.Gain]] = [
            (a, a, gains[(cond.name, a)])
            for a in compared_arms(c, c.analysis["baseline"])
            if (cond.name, a) in gains
        ]
        arms += [
            (lbl, f"{lbl} (= {m})", g) for (cn, lbl), (m, g) in best.items() if cn == cond.name
        ]
        ideal = gains.get((cond.name, "ideal"))
        for key, shown, g in arms:
            pp = paper_value(c, cond.name, key, "gain_pct")
            t.rows.append(
                [
                    cond.name,
                    shown,
                    g.gain_pct.fmt(1, "%"),
                    paper_vs_bound(pp, ideal),
                    g.gain_ms.fmt(0),
                    num(paper_value(c, cond.name, key, "gain_ms"), 0),
                    num(g.llc_bytes_pct),
                    num(paper_value(c, cond.name, key, "llc_bytes_pct")),
                    "—" if g.ideal_share is None else f"{100 * g.ideal_share:.0f}%",
                    f"{g.pages} / {g.pairs}",
                    f"{g.invalid_arm} / {g.invalid_base}",
                ]
            )
            points.append(
                {
                    "condition": cond.name,
                    "x": cond.x,
                    "arm": key,
                    "gain_pct": g.gain_pct,
                    "gain_ms": g.gain_ms,
                    "paper_pct": pp,
                }
            )
    return t, points


def paper_vs_bound(paper_pct: float | None, ideal: an.Gain | None) -> str:
    """The paper's gain, marked when it lies above the upper end of our ideal scheme's
    CI: no policy can reach it on this emulation, pages and machine (issue 18)."""
    text = num(paper_pct)
    hi = ideal.gain_pct.hi if ideal is not None else math.nan
    if paper_pct is not None and not math.isnan(hi) and paper_pct > hi:
        text += f" (above our ideal bound, {hi:.1f}%)"
    return text
