"""Analysis kind `reorder`: the paired gains of `gain`, then statistics the agents
report per load (Figure 5 / Table 3: reorder-buffer occupancy).

`analysis.stats` maps a column name to a dotted path into each row's `stats` (a
number or a list of numbers per load); the table gives the p50 over valid loads per
(condition, scheme) beside the paper's value of that name.
"""

from __future__ import annotations

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Rows, register
from dchlab.experiments.analyses.paired import PairedGain
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num, paper_value


@register("reorder", help="paired PLT gains, then per-load agent statistics (p50 over loads)")
class Reorder(PairedGain):
    """The agents' per-load statistics after the gain table."""

    def around_gains(self, c: Campaign, rows: Rows, metric: str) -> tuple[list[Table], list[Table]]:
        return [], [stats_table(c, rows)]


def stats_table(c: Campaign, rows: Rows) -> Table:
    """The p50 over loads of each `analysis.stats` entry (name: dotted path into the
    rows' stats) per (condition, scheme), ours / paper."""
    keys: dict[str, str] = dict(c.analysis.get("stats", {}))
    t = Table(
        "Per-load statistics from the agents (p50 over loads), ours / paper",
        ["condition", "scheme", *keys],
    )
    samples = {name: an.stat_samples(rows, key) for name, key in keys.items()}
    for cond in c.conditions:
        for sch in c.schemes:
            cells = []
            for name in keys:
                vals = samples[name].get((cond.name, sch.label), [])
                ours = num(an.percentile(vals, 50), 0) if vals else "—"
                cells.append(f"{ours} / {num(paper_value(c, cond.name, sch.label, name), 0)}")
            if any(not x.startswith("— / —") for x in cells):
                t.rows.append([cond.name, sch.label, *cells])
    return t
