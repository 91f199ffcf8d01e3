"""`analysis.versus: {candidate, reference}`: a candidate policy against a reference
(issue 19: a new policy against Algorithm 1), a table after the paired gains."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analysis import CI, DEFAULT_BOOT, DEFAULT_SEED, bootstrap_mean
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num


def gain_differences(
    rows: Iterable[dict[str, Any]],
    candidate: str,
    reference: str,
    metric: str = "plt_ms",
    baseline: str = "all-hbc",
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict[str, tuple[CI, int]]:
    """Per condition: the candidate's gain over `baseline` minus the reference's, in
    points, paired per page (both gains on the same page's baseline loads) and then
    averaged over pages with a bootstrap CI; and the number of pages. Issue 19's
    "beats Algorithm 1 by >= 5 points mean PLT gain" is this difference."""
    out: dict[str, tuple[CI, int]] = {}
    for cond, arms in an.by_condition(rows).items():
        base, cand, ref = arms.get(baseline), arms.get(candidate), arms.get(reference)
        if base is None or cand is None or ref is None:
            continue
        gc, gr = an.page_gains(cand, base, metric), an.page_gains(ref, base, metric)
        diffs = [gc[i].gain_pct - gr[i].gain_pct for i in gc if i in gr]
        out[cond] = (bootstrap_mean(diffs, n_boot, seed), len(diffs))
    return out


def versus_table(
    c: Campaign, rows: list[dict[str, Any]], gains: dict[tuple[str, str], an.Gain], metric: str
) -> Table:
    """A candidate policy against a reference (issue 19: a new policy against Algorithm 1),
    cell by cell: both gains over the baseline, their paired difference in points, the
    share of the ideal's gain each takes, the LLC's share of bytes each uses, and whether
    the candidate is more than 2% slower than the baseline (mean gain < -2%)."""
    cand, ref = c.analysis["versus"]["candidate"], c.analysis["versus"]["reference"]
    base = c.analysis["baseline"]
    diffs = gain_differences(rows, cand, ref, metric=metric, baseline=base)
    t = Table(
        f"{cand} against {ref}, per cell (gains against {base}; difference paired per page, "
        "95% CI over pages)",
        [
            "condition",
            f"{cand} gain",
            f"{ref} gain",
            "difference, points",
            "of ideal",
            "LLC bytes %",
            f"{cand} > 2% slower than {base}",
            "pages",
        ],
    )

    def share(g: an.Gain | None) -> str:
        return "—" if g is None or g.ideal_share is None else f"{100 * g.ideal_share:.0f}%"

    for cond in c.conditions:
        gc, gr = gains.get((cond.name, cand)), gains.get((cond.name, ref))
        if gc is None and gr is None:
            continue
        d = diffs.get(cond.name)
        slower = "—" if gc is None else ("yes" if gc.gain_pct.mean < -2.0 else "no")
        t.rows.append(
            [
                cond.name,
                gc.gain_pct.fmt(1, "%") if gc else "—",
                gr.gain_pct.fmt(1, "%") if gr else "—",
                d[0].fmt(1) if d else "—",
                f"{share(gc)} / {share(gr)}",
                f"{num(gc.llc_bytes_pct if gc else None)} / {num(gr.llc_bytes_pct if gr else None)}",
                slower,
                str(d[1]) if d else "—",
            ]
        )
    return t
