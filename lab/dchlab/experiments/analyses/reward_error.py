"""Analysis kind `reward-error`: how far the agents' reward estimates were from the
truth (Figure 11), over every reward-rule decision, both directions.

`analysis.stat` names the dotted path (or several, pooled) into each valid load's
`stats` that holds the errors in ms (default reward_error_ms); the table gives the
number of samples, p50 and p90 per (condition, scheme), beside the paper's p90
(`reward_error_p90_ms`). Plotted as CDFs of the samples.
"""

from __future__ import annotations

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows, register
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num, paper_value


@register("reward-error", help="distribution of the agents' reward estimation error")
class RewardError(Analysis):
    """One table of the error's percentiles; the samples are the plot's. A note says
    when loads were measured but none carries the statistic."""

    uses_baseline = False
    needs_decision_logs = True

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        key = c.analysis.get("stat", "reward_error_ms")
        shown = key if isinstance(key, str) else " + ".join(key)
        samples = an.stat_samples(rows, key)
        t = Table(
            f"Reward estimation error (stats: {shown}) over all reward-rule decisions, both directions",
            ["condition", "scheme", "samples", "p50 ms", "p90 ms", "paper p90 ms"],
        )
        for cond in c.conditions:
            for sch in c.schemes:
                vals = samples.get((cond.name, sch.label))
                if not vals:
                    continue
                t.rows.append(
                    [
                        cond.name,
                        sch.label,
                        str(len(vals)),
                        num(an.percentile(vals, 50)),
                        num(an.percentile(vals, 90)),
                        num(paper_value(c, cond.name, sch.label, "reward_error_p90_ms")),
                    ]
                )
        notes = []
        if not t.rows and an.latest_per_cell(rows):
            notes.append(
                f"No row carries {shown} in its stats: the agents' decision log is not in the results yet."
            )
        return Findings([t], {"samples": samples}, notes)
