"""PLT beside the paint and visual metrics, a table after the paired gains of any
campaign whose rows carry them (`fcp_ms`; docs/formats.md, "Page metrics")."""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table

PAGE_METRICS = ["plt_ms", "fcp_ms", "lcp_ms", "speed_index_ms", "atf_ms"]


def page_metrics_table(c: Campaign, rows: list[dict[str, Any]]) -> Table:
    """PLT beside the paint and visual metrics (docs/formats.md, "Page metrics")."""
    m = an.means(rows, PAGE_METRICS)
    t = Table(
        "Page metrics in ms (mean over pages of each page's mean; 95% CI over pages)",
        ["condition", "scheme", "PLT", "FCP", "LCP", "Speed Index", "ATF", "loads (invalid)"],
    )
    for cond in c.conditions:
        for sch in c.schemes:
            got = [m.get((cond.name, sch.label, x)) for x in PAGE_METRICS]
            if got[0] is None:
                continue
            cells = [g.value.fmt(0) if g else "—" for g in got]
            t.rows.append([cond.name, sch.label, *cells, f"{got[0].loads} ({got[0].invalid})"])
    return t
