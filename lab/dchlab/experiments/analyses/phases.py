"""Analysis kind `phases`: mean time of each phase of a fetch (Table 2: DNS, connect,
TLS, transfer, total; `curl-phases` workload), ours beside the paper's.

`analysis.metrics` lists the phase columns (default: dns_ms, connect_ms, tls_ms,
transfer_ms, total_ms). Each cell is the mean over valid loads with a 95% bootstrap
CI (one URL: the CI resamples trials), then the paper's value; schemes are not
compared with a baseline. Plotted as stacked bars of the phases.
"""

from __future__ import annotations

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows, register
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num, paper_value

DEFAULT_PHASES = ["dns_ms", "connect_ms", "tls_ms", "transfer_ms", "total_ms"]


@register("phases", help="mean time of each fetch phase per scheme, beside the paper's")
class Phases(Analysis):
    """One table of phase means per (condition, scheme); the means are the plot's."""

    uses_baseline = False

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        metrics = list(c.analysis.get("metrics", DEFAULT_PHASES))
        m = an.means(rows, metrics)
        t = Table(
            "Mean phase times in ms, ours [95% CI over trials] / paper",
            ["condition", "scheme", *[x.removesuffix("_ms") for x in metrics], "loads (invalid)"],
        )
        for cond in c.conditions:
            for sch in c.schemes:
                cells = []
                for x in metrics:
                    got = m.get((cond.name, sch.label, x))
                    ours = got.value.fmt(0) if got else "—"
                    cells.append(f"{ours} / {num(paper_value(c, cond.name, sch.label, x), 0)}")
                g0 = m.get((cond.name, sch.label, metrics[0]))
                cnt = f"{g0.loads} ({g0.invalid})" if g0 else "0"
                t.rows.append([cond.name, sch.label, *cells, cnt])
        return Findings([t], {"means": m, "metrics": metrics})
