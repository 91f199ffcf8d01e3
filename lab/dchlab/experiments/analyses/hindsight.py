"""`analysis.hindsight: [schemes]`: on each page the best of the listed schemes, chosen
after the fact, a table after the paired gains (an optimistic bound, issue 19)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analysis import CI, DEFAULT_BOOT, DEFAULT_SEED, bootstrap_mean
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table


@dataclass(frozen=True)
class Hindsight:
    """The best of several schemes chosen per page after the fact, under one condition."""

    gain_pct: CI  # mean over pages of the largest gain on each page
    gain_ms: float  # mean over pages of the chosen scheme's gain in ms
    wins: dict[str, int]  # scheme -> pages on which it was the best
    pages: int


def hindsight_best(
    rows: Iterable[dict[str, Any]],
    arms: Sequence[str],
    metric: str = "plt_ms",
    baseline: str = "all-hbc",
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict[str, Hindsight]:
    """Per condition: on every page that all `arms` loaded, the largest of their gains
    over `baseline`, averaged over those pages. No policy knows in advance which scheme
    wins a page, and the largest of noisy gains is biased up (the winner's curse), so
    this is an optimistic bound on what choosing among `arms` could give (issue 19)."""
    out: dict[str, Hindsight] = {}
    for cond, by_arm in an.by_condition(rows).items():
        base = by_arm.get(baseline)
        if base is None or any(a not in by_arm for a in arms):
            continue
        per_arm = {a: an.page_gains(by_arm[a], base, metric) for a in arms}
        pages = sorted(set.intersection(*(set(g) for g in per_arm.values())))
        if not pages:
            continue
        wins: dict[str, int] = defaultdict(int)
        best_pct, best_ms = [], []
        for p in pages:
            winner = max(arms, key=lambda a: per_arm[a][p].gain_pct)
            wins[winner] += 1
            best_pct.append(per_arm[winner][p].gain_pct)
            best_ms.append(per_arm[winner][p].gain_ms)
        out[cond] = Hindsight(
            bootstrap_mean(best_pct, n_boot, seed), float(np.mean(best_ms)), dict(wins), len(pages)
        )
    return out


def hindsight_table(
    c: Campaign, rows: list[dict[str, Any]], gains: dict[tuple[str, str], an.Gain], metric: str
) -> Table:
    """analysis.hindsight: on each page the best of the listed schemes, chosen after the
    fact, beside the ideal: an optimistic bound on what choosing among them gives."""
    arms = list(c.analysis["hindsight"])
    base = c.analysis.get("baseline", "all-hbc")
    best = hindsight_best(rows, arms, metric=metric, baseline=base)
    t = Table(
        f"Hindsight: on each page the best of {len(arms)} schemes ({', '.join(arms)}), "
        f"gain against {base} (95% CI over pages); optimistic, since the largest of noisy "
        "gains is biased up",
        ["condition", "best per page", "of ideal", "the best single scheme", "won pages", "pages"],
    )
    for cond in c.conditions:
        h = best.get(cond.name)
        if h is None:
            continue
        ideal = gains.get((cond.name, "ideal"))
        share = (
            f"{100 * h.gain_ms / ideal.gain_ms.mean:.0f}%"
            if ideal is not None and ideal.gain_ms.mean > 0
            else "—"
        )
        singles = [(a, gains[(cond.name, a)]) for a in arms if (cond.name, a) in gains]
        top = max(singles, key=lambda x: x[1].gain_pct.mean, default=None)
        won = ", ".join(f"{a} {n}" for a, n in sorted(h.wins.items(), key=lambda x: (-x[1], x[0])))
        t.rows.append(
            [
                cond.name,
                h.gain_pct.fmt(1, "%"),
                share,
                "—" if top is None else f"{top[0]} {top[1].gain_pct.fmt(1, '%')}",
                won,
                str(h.pages),
            ]
        )
    return t
