"""Per-campaign results: `summarize(campaign, rows)` returns a `Summary`.

A Summary holds tables of plain strings (for the HTML report, docs/results.md and the
terminal), the data the plots need, and how many loads were counted, excluded and
failed. What the tables hold depends on the campaign's analysis kind, a plug-in in
dchlab.experiments.analyses (one file per kind); the rules about how loads were taken
are in run_quality, the comparison of reruns in reruns, the statistics in analysis.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments.analyses import get_analysis
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
from dchlab.experiments.tables import Summary, Table, paper_value

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
    """Campaign `c`'s summary from its rows (and its reruns' rows, by rerun name): the
    counts and exclusions of its loads (run_quality), then the tables, plot data and
    notes of its analysis kind (the plug-in registered in dchlab.experiments.analyses)."""
    kind = c.analysis["kind"]
    found = get_analysis(kind).analyze(c, rows, reruns or {})
    loads, invalid, failed = counts(rows)
    excluded, expected_only = exclusions(rows)
    return Summary(
        campaign=c,
        tables=found.tables,
        plot={"kind": kind, **found.plot},
        loads=loads,
        invalid=invalid,
        failed=failed,
        notes=[*c.paper.get("notes", []), *found.notes],
        excluded=excluded,
        expected_only=expected_only,
    )
