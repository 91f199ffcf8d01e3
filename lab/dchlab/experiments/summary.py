"""Per-campaign result tables: our numbers beside the paper's, one function per analysis kind.

`summarize(campaign, rows)` returns a `Summary` (tables of plain strings for the HTML
report and the terminal, plus the numbers the plots need). The statistics come from
`analysis`; this module only arranges them.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import get_analysis, known_analyses
from dchlab.experiments.analyses.page_metrics import PAGE_METRICS
from dchlab.experiments.analyses.paired import paper_vs_bound as _paper_vs_bound
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.reruns import MOVE_COLUMNS, STABLE_POINTS
from dchlab.experiments.run_quality import (
    BUSY_LOAD_PER_CPU,
    PAIR_GAP_S,
    busy_text,
    cautions,
    cost_text,
    counts,
    exclusion_text,
    exclusions,
    pairing_gap_text,
    reason_kind,
)
from dchlab.experiments.tables import (
    Summary,
    Table,
    paper_value,
)

#: Names importable from here since before the analysis kinds, the run-quality rules
#: and the rerun comparisons had modules of their own.
__all__ = [
    "BUSY_LOAD_PER_CPU",
    "MOVE_COLUMNS",
    "PAGE_METRICS",
    "PAIR_GAP_S",
    "STABLE_POINTS",
    "Summary",
    "Table",
    "_paper_vs_bound",
    "busy_text",
    "cautions",
    "cost_text",
    "exclusion_text",
    "exclusions",
    "pairing_gap_text",
    "paper_value",
    "reason_kind",
    "summarize",
]


def summarize(
    c: Campaign,
    rows: list[dict[str, Any]],
    reruns: dict[str, list[dict[str, Any]]] | None = None,
) -> Summary:
    kind = c.analysis["kind"]
    loads, invalid, failed = counts(rows)
    s = Summary(c, [], {"kind": kind}, loads, invalid, failed, list(c.paper.get("notes", [])))
    s.excluded, s.expected_only = exclusions(rows)
    if kind in known_analyses():
        found = get_analysis(kind).analyze(c, rows, reruns or {})
        s.tables += found.tables
        s.plot.update(found.plot)
        s.notes += found.notes
        return s
    metric = c.analysis.get("metric", "plt_ms")
    if kind == "heatmap":
        metrics = list(c.analysis.get("metrics") or [metric])
        s.plot["metrics"] = metrics
        for m in metrics:
            t, by_cell = _better_single_table(c, rows, m)
            s.tables.append(t)
            s.plot.setdefault("cells", {})[m] = by_cell
    return s


def _better_single_table(
    c: Campaign, rows: list[dict[str, Any]], metric: str
) -> tuple[Table, dict[tuple[str, str, str], an.BetterSingleGain]]:
    """IANS' comparison: each scheme against the better single network of its
    scenario (`analysis.singles`), median improvement over pages with a 95% CI.
    Returns the table and {(network A, network B, scheme): gain} for the heatmap."""
    singles = list(c.analysis.get("singles") or [])
    gains = an.better_single_gains(rows, singles, metric=metric)
    t = Table(
        f"{metric}: median improvement over the better single network (positive = faster; "
        "95% bootstrap CI over pages)",
        ["scenario", "network A (LLC)", "network B (HBC)", "better single", "scheme",
         "improvement % [CI]", "pages"],
    )  # fmt: skip
    cells: dict[tuple[str, str, str], an.BetterSingleGain] = {}
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
