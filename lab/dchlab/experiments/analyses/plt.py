"""Analysis kind `plt`: mean page load times beside the paper's (Table 4), then the
paired gains of `gain`.

The mean is over pages of each page's mean over its valid loads, with a 95% bootstrap
CI over pages; the paired gains and their optional tables follow (analyses.paired).
Plotted as bars of the mean PLT per scheme.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Rows, register
from dchlab.experiments.analyses.paired import PairedGain
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num, paper_value


@register("plt", help="mean PLT per scheme beside the paper's, then the paired gains")
class Plt(PairedGain):
    """The mean-PLT table before the gain table; the means are also the plot's."""

    def around_gains(self, c: Campaign, rows: Rows, metric: str) -> tuple[list[Table], list[Table]]:
        return [plt_table(c, rows, metric)], []

    def more_plot(self, c: Campaign, rows: Rows, metric: str) -> dict[str, Any]:
        return {"means": an.means(rows, [metric])}


def plt_table(c: Campaign, rows: Rows, metric: str) -> Table:
    """Mean PLT per (condition, scheme) with its 95% CI over pages, beside the paper's."""
    m = an.means(rows, [metric])
    t = Table(
        "Mean page load time in ms (mean over pages of each page's mean; 95% CI over pages)",
        ["condition", "scheme", "ours ms [CI]", "paper ms", "loads (invalid)"],
    )
    for cond in c.conditions:
        for sch in c.schemes:
            got = m.get((cond.name, sch.label, metric))
            if got is None:
                continue
            t.rows.append(
                [
                    cond.name,
                    sch.label,
                    got.value.fmt(0),
                    num(paper_value(c, cond.name, sch.label, "plt_ms"), 0),
                    f"{got.loads} ({got.invalid})",
                ]
            )
    return t
