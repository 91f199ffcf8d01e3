"""Analysis kind `bulk`: completion time gain against the baseline per file size
(Figure 6; `bulk` workload, one item per size).

For each size, the gain of `analysis.metric` (default total_ms) paired per trial as
in `gain`; with one item per size, each trial counts as its own page, so the 95%
bootstrap CI resamples trials. The table gives the baseline's and the scheme's mean
beside the gain. Plotted as gain over file size.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows, register
from dchlab.experiments.analyses.item_gains import item_gain_row, item_gain_table, measured
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import num
from dchlab.units import format_size


@register("bulk", help="completion time gain per file size against the baseline")
class Bulk(Analysis):
    """One gain table over (condition, size, scheme); its rows are the plot's points."""

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        base = c.analysis.get("baseline", "all-hbc")
        metric = c.analysis.get("metric", "total_ms")
        t = item_gain_table(
            f"Completion time gain against {base} per file size (95% CI over trials)",
            "size",
            [f"{base} ms", "scheme ms", "gain % [CI]", "gain ms [CI]"],
        )
        points: list[dict[str, Any]] = []
        for size in c.workload.sizes:
            item = format_size(size)
            sub = [r for r in rows if an.item_of(r) == item]
            # one item: resample trials, i.e. treat each trial as its own "page"
            per_trial = [dict(r, item=f"{item}#{r.get('trial')}") for r in sub]
            gains = an.paired_gains(per_trial, metric=metric, baseline=base)
            for cond, arm, g in measured(c, gains, base):
                cells = [
                    num(g.base_mean_ms, 0),
                    num(g.arm_mean_ms, 0),
                    g.gain_pct.fmt(1, "%"),
                    g.gain_ms.fmt(0),
                ]
                t.rows.append(item_gain_row(cond, item, arm, g, cells))
                points.append(
                    {"condition": cond.name, "size": size, "arm": arm, "gain_pct": g.gain_pct}
                )
        return Findings([t], {"points": points})
