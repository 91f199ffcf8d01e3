"""Analysis kind `app`: interaction response time gain against the baseline per app
interaction (Figure 7; `app` workload, items = app profiles / interaction).

For each interaction of the workload, and for all of them together, the gain of
`analysis.metric` (default irt_ms) paired per (app, trial) as in `gain`, averaged over
apps with a 95% bootstrap CI over apps, beside the paper's `<interaction>_gain_pct`
(`gain_pct` for all). Plotted as gain bars per interaction.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows, register
from dchlab.experiments.analyses.item_gains import item_gain_row, item_gain_table, measured
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num, paper_value


@register("app", help="interaction response time gain per app interaction against the baseline")
class App(Analysis):
    """One gain table per interaction and overall; its rows are also the plot's points."""

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        metric = c.analysis.get("metric", "plt_ms")
        t, points = app_table(c, rows, metric if metric != "plt_ms" else "irt_ms")
        return Findings([t], {"points": points})


def app_table(c: Campaign, rows: Rows, metric: str) -> tuple[Table, list[dict[str, Any]]]:
    """Interaction response time gain per interaction (items = app profiles) and overall."""
    base = c.analysis.get("baseline", "all-hbc")
    t = item_gain_table(
        f"Interaction response time ({metric}) gain against {base}: mean over apps, 95% CI over apps",
        "interaction",
        ["gain % [CI]", "paper %", "gain ms [CI]"],
    )
    groups = [*c.workload.interactions, "all"]
    points: list[dict[str, Any]] = []
    for inter in groups:
        sub = rows if inter == "all" else [r for r in rows if an.item_of(r).endswith("/" + inter)]
        gains = an.paired_gains(sub, metric=metric, baseline=base)
        key = "gain_pct" if inter == "all" else f"{inter}_gain_pct"
        for cond, arm, g in measured(c, gains, base):
            cells = [
                g.gain_pct.fmt(1, "%"),
                num(paper_value(c, cond.name, arm, key)),
                g.gain_ms.fmt(0),
            ]
            t.rows.append(item_gain_row(cond, inter, arm, g, cells))
            label = inter if len(c.conditions) == 1 else f"{cond.name} {inter}"
            points.append(
                {
                    "condition": label,
                    "x": {},
                    "arm": arm,
                    "gain_pct": g.gain_pct,
                    "gain_ms": g.gain_ms,
                    "paper_pct": paper_value(c, cond.name, arm, key),
                }
            )
    return t, points
