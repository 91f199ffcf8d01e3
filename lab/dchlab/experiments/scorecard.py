"""The scorecard: does the lab reproduce the paper, and how sure are we — on one screen.

One row per number of the papers the lab reproduces (`CLAIMS`, in the papers' order):
the paper's value, read from the campaign file's `paper.values` (experiments/*.yaml,
the one place the paper's numbers live; `summary.paper_value` reads them), ours with
its 95% CI computed from the campaign's rows (results/published for the published
report), the share of the `ideal` scheme's gain the scheme captures where the campaign
has an ideal arm, and a verdict. The verdict rule:

* **reproduced**: ours lies within the tolerance of the paper's value: 2 points for a
  percentage (`summary.STABLE_POINTS`, how far a rerun of the same campaign may move a
  headline), 10% of the paper's value for a time or a size (`RELATIVE_TOLERANCE`);
* **within CI**: further than that, but the paper's value lies inside our 95% CI (our
  data cannot tell the two apart);
* **differs**: the paper's value lies outside our 95% CI (for a number without a CI:
  further than the tolerance). The row then carries the one-line measured reason
  (`Claim.reason`, the finding of the docs/results.md section it links to).

Every number is computed here from the rows with the same statistics as the report's
tables (`analysis`): paired gains against the baseline (mean over pages of per-page
gains, percentile bootstrap over pages), means with CIs, percentiles of the agents'
per-load statistics. Table 4's paper gain is 1 − mean(dchannel)/mean(all-hbc) of its
PLTs, so its row measures ours the same way (bootstrap over pages of the ratio of
means) and names our usual estimator (the mean of per-page ratios) beside it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments import store
from dchlab.experiments.campaign import Campaign, CampaignError, load_campaign
from dchlab.experiments.summary import STABLE_POINTS, paper_value
from dchlab.paths import repo_root

#: Tolerance for a time or a size, as a share of the paper's value.
RELATIVE_TOLERANCE = 0.10

REPRODUCED, WITHIN_CI, DIFFERS, NOT_RUN = "reproduced", "within CI", "differs", "not run"

Measure = Literal["gain", "ratio", "mean", "p50", "p90"]


@dataclass(frozen=True)
class Claim:
    """One number of a paper the scorecard checks: where it is and how ours is measured.

    `measure`: "gain" (paired gain % of `arm` against the campaign's baseline, on the
    campaign's metric), "ratio" (1 − mean(arm)/mean(baseline) of `key`, the paper's
    Table 4 estimator), "mean" (mean of `key` with a CI), "p50"/"p90" (percentile of the
    agents' per-load statistic that the campaign's analysis names for `key`).
    """

    campaign: str
    figure: str
    condition: str
    arm: str
    key: str  # the paper value's key in paper.values (for "ratio": the metric)
    measure: Measure
    reason: str  # the measured reason when ours differs from the paper (docs/results.md)
    section: str  # docs/results.md section (GitHub anchor) that measures it


# docs/results.md sections (GitHub anchors) and the reasons several claims share
_FIG3 = "fig3-after-the-fix-all-six-scenarios-40-pages-each"
_FIG6_11 = "fig-611-and-fig3-on-the-warc-pages-first-full-runs-2026-11-23-fourth-sitting"
_MMW = "Table 1 gives MM-W MM-S's channels, and ours gain alike; 37% is 100% of our ideal"
_TABLE3 = "fig-5--table-3-the-reorder-buffer-fig5_table3-40-pages-one-trial"
_TABLE4 = "table-4-random-loss-table4-40-pages"
_LOSS = "loss slows the paper's dchannel more than its baseline; ours alike"
_TABLE5 = "table-5-α-and-the-embb-rtt-table5-α--075-on-40-pages"
_FLOOR_RTT = "likeliest: the machine's floor on our lighter pages (not split per load)"
_ORDER = "of the paper's order; not explained"

CLAIMS: tuple[Claim, ...] = (
    *(
        Claim("fig3", "Fig. 3", s, "dchannel", "gain_pct", "gain", r, _FIG3)
        for s, r in (
            ("MM-S", ""),
            ("MM-W", _MMW),
            ("MM-D", ""),
            ("LB-S", ""),
            ("LB-W", "the paper's ≈42% is its summary for low-band with mobility"),
            ("LB-D", ""),
        )
    ),
    Claim(
        "table2",
        "Table 2",
        "embb40-urllc5",
        "dchannel",
        "total_ms",
        "mean",
        "TLS 1.3, a 100 KB object: 38% of all-hbc's total (paper 54%)",
        "table-2-one-fetch-phase-by-phase-table2",
    ),
    *(
        Claim("fig5_table3", "Table 3", s, "reorder-both", k, "p50", r, _TABLE3)
        for s, k, r in (
            ("MM-S", "occ_gw_p50_bytes", ""),
            ("MM-S", "occ_ue_p50_bytes", _ORDER),
            ("LB-D", "occ_gw_p50_bytes", _ORDER),
            ("LB-D", "occ_ue_p50_bytes", _ORDER),
        )
    ),
    Claim(
        "fig7",
        "Fig. 7",
        "embb40-urllc5",
        "dchannel",
        "gain_pct",
        "gain",
        "our apps are network time; the paper's add on-device work (not measured)",
        _FIG6_11,
    ),
    Claim(
        "fig8",
        "Fig. 8",
        "embb-rtt100",
        "dchannel",
        "gain_pct",
        "gain",
        _FLOOR_RTT,
        _FIG6_11,
    ),
    *(
        Claim(
            "fig9",
            "Fig. 9",
            s,
            "dchannel",
            "gain_pct",
            "gain",
            r,
            _FIG6_11,
        )
        for s, r in (
            ("cov0", ""),
            ("cov2", "our LLC delay, a normal cut at 0, has a 14 ms mean at CoV 2"),
        )
    ),
    *(
        Claim(
            "fig11",
            "Fig. 11",
            s,
            "dchannel",
            "reward_error_p90_ms",
            "p90",
            r,
            _FIG6_11,
        )
        for s, r in (("MM-S", ""), ("MM-D", "measured, not explained"))
    ),
    *(
        Claim("table4", "Table 4", s, "dchannel", "plt_ms", "ratio", r, _TABLE4)
        for s, r in (
            ("MM-S-loss0", ""),
            ("MM-S-loss0.1", _LOSS),
            ("MM-S-loss1", ""),
            ("MM-D-loss0", ""),
            ("MM-D-loss0.1", _LOSS),
            ("MM-D-loss1", "1% loss: the paper's dchannel PLT ×2.8, ours ×2.2"),
        )
    ),
    *(
        Claim(
            "table5", "Table 5", s, "dchannel:alpha=0.75", "gain_pct", "gain", _FLOOR_RTT, _TABLE5
        )
        for s in ("embb20", "embb40", "embb60", "embb80", "embb100")
    ),
    *(
        Claim(
            "hotmobile",
            "HotMobile'21 Fig. 5a",
            s,
            "pkt-state",
            "gain_pct",
            "gain",
            "not explained (the paper: a median of 5 loads)",
            "hotmobile21s-setting-on-all-40-pages-hotmobile-issue-17",
        )
        for s in ("embb30", "embb150")
    ),
)


@dataclass(frozen=True)
class Score:
    """One scorecard row, computed."""

    claim: Claim
    paper: float | None
    ours: an.CI
    ideal_share: float | None  # the arm's gain over the ideal's (gain rows with an ideal arm)
    verdict: str
    note: str  # e.g. the other estimator of a ratio row
    unit: str  # "%" (points), "ms", "B"

    @property
    def label(self) -> str:
        """What the row measures, e.g. "MM-S dchannel gain"."""
        c = self.claim
        what = {
            "gain": "gain",
            "ratio": "gain, 1 − mean/mean",
            "mean": c.key.removesuffix("_ms"),
            "p50": c.key.removesuffix("_p50_bytes").replace("occ_", "") + " p50",
            "p90": "p90",
        }[c.measure]
        return f"{c.condition} {c.arm} {what}"

    def reason(self) -> str:
        """The one-line reason: the measured one of the claim when ours differs."""
        if self.verdict in (REPRODUCED, NOT_RUN) or self.paper is None:
            return ""
        gap = self.ours.mean - self.paper
        unit = " points" if self.unit == "%" else f" {self.unit}"
        digits = 1 if self.unit == "%" else 0
        head = f"ours {abs(gap):.{digits}f}{unit} {'above' if gap > 0 else 'below'}"
        return f"{head}: {self.claim.reason}" if self.claim.reason else head


def tolerance(paper: float, unit: str) -> float:
    """How close ours must be to the paper's value to count as reproduced."""
    return STABLE_POINTS if unit == "%" else RELATIVE_TOLERANCE * abs(paper)


def verdict(paper: float | None, ours: an.CI, unit: str) -> str:
    """The rule of the module docstring."""
    if paper is None or math.isnan(ours.mean):
        return NOT_RUN
    if abs(ours.mean - paper) <= tolerance(paper, unit):
        return REPRODUCED
    if ours.n >= 2 and ours.lo <= paper <= ours.hi:
        return WITHIN_CI
    return DIFFERS


def _paper(c: Campaign, cl: Claim) -> float | None:
    if cl.measure != "ratio":
        return paper_value(c, cl.condition, cl.arm, cl.key)
    base = c.analysis.get("baseline", "all-hbc")
    arm, b = (paper_value(c, cl.condition, a, cl.key) for a in (cl.arm, base))
    return None if arm is None or b is None or b <= 0 else 100.0 * (1.0 - arm / b)


def page_means(
    rows: Sequence[dict[str, Any]], condition: str, arm: str, base: str, metric: str
) -> list[tuple[float, float]]:
    """Per page, (baseline mean, scheme mean) of `metric` over the trials both loaded
    validly: the pairing of `analysis.paired_gains`, pages in its order."""
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in an.latest_per_cell(rows):
        if an.condition_of(r) == condition:
            by[(an.arm_of(r), an.item_of(r))][int(r.get("trial") or 0)] = r
    out = []
    for (a, item), trials in by.items():
        if a != arm:
            continue
        b = by.get((base, item), {})
        pairs = [
            (float(b[t][metric]), float(r[metric]))
            for t, r in trials.items()
            if t in b and an.is_valid(r, metric) and an.is_valid(b[t], metric)
        ]
        if pairs:
            out.append(
                (float(np.mean([p[0] for p in pairs])), float(np.mean([p[1] for p in pairs])))
            )
    return out


def ratio_gain(
    pages: Sequence[tuple[float, float]],
    n_boot: int = an.DEFAULT_BOOT,
    seed: int = an.DEFAULT_SEED,
) -> an.CI:
    """100 · (1 − mean(scheme)/mean(baseline)) over pages, with a 95% percentile
    bootstrap that resamples pages (as `analysis` does for the mean of per-page gains)."""
    if not pages:
        return an.NAN_CI
    base = np.asarray([p[0] for p in pages])
    arm = np.asarray([p[1] for p in pages])
    point = float(100.0 * (1.0 - arm.mean() / base.mean()))
    if len(pages) == 1:
        return an.CI(point, point, point, 1)
    idx = np.random.default_rng(seed).integers(0, len(pages), size=(n_boot, len(pages)))
    boot = 100.0 * (1.0 - arm[idx].mean(axis=1) / base[idx].mean(axis=1))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return an.CI(point, float(lo), float(hi), len(pages))


def _score(c: Campaign, cl: Claim, rows: list[dict[str, Any]]) -> Score:
    base = str(c.analysis.get("baseline", "all-hbc"))
    metric = str(c.analysis.get("metric", "plt_ms"))
    paper, share, note, unit = _paper(c, cl), None, "", "%"
    ours = an.NAN_CI
    if cl.measure in ("gain", "ratio"):
        gains = an.paired_gains(rows, metric=metric, baseline=base)
        g = gains.get((cl.condition, cl.arm))
        share = g.ideal_share if g is not None else None
        if cl.measure == "gain":
            ours = g.gain_pct if g is not None else an.NAN_CI
        else:
            ours = ratio_gain(page_means(rows, cl.condition, cl.arm, base, cl.key))
            if g is not None:
                note = f"per-page mean {g.gain_pct.fmt(1, '%')}"
    elif cl.measure == "mean":
        m = an.means(rows, [cl.key]).get((cl.condition, cl.arm, cl.key))
        ours, unit = (m.value if m is not None else an.NAN_CI), "ms"
    else:
        stat = c.analysis.get("stats", {}).get(cl.key) or c.analysis.get("stat")
        vals = an.stat_samples(rows, stat).get((cl.condition, cl.arm), []) if stat else []
        q = an.percentile(vals, 50 if cl.measure == "p50" else 90)
        ours = an.CI(q, q, q, 1) if vals else an.NAN_CI
        unit = "B" if cl.key.endswith("_bytes") else "ms"
    return Score(cl, paper, ours, share, verdict(paper, ours, unit), note, unit)


RowsOf = Callable[[str], list[dict[str, Any]]]


def scorecard(rows_of: RowsOf, directory: Path | None = None) -> list[Score]:
    """Every claim scored on `rows_of(campaign)` (the rows of one campaign)."""
    d = directory or repo_root() / "experiments"
    campaigns: dict[str, Campaign | None] = {}
    rows: dict[str, list[dict[str, Any]]] = {}
    out = []
    for cl in CLAIMS:
        if cl.campaign not in campaigns:
            try:
                campaigns[cl.campaign] = load_campaign(
                    d / f"{cl.campaign}.yaml", check_channels=False
                )
            except (CampaignError, OSError):
                campaigns[cl.campaign] = None
            rows[cl.campaign] = rows_of(cl.campaign)
        c = campaigns[cl.campaign]
        if c is None:
            continue
        out.append(_score(c, cl, rows[cl.campaign]))
    return out


def store_scorecard(store_path: str | Path | None) -> list[Score]:
    """The scorecard of the rows in a results store (e.g. `publish.published_store()`)."""
    return scorecard(lambda name: store.load_rows(name, store=store_path))


# ---------------------------------------------------------------- rendering


def fmt_value(v: float | None, unit: str) -> str:
    """A paper value or our point estimate as the scorecard shows it."""
    if v is None or math.isnan(v):
        return "—"
    return f"{v:.1f}%" if unit == "%" else f"{v:.0f} {unit}"


def fmt_ours(s: Score) -> str:
    """Ours with its 95% CI ("18.4% [14.1, 22.9]"; a percentile has none)."""
    if math.isnan(s.ours.mean):
        return "not run"
    text = fmt_value(s.ours.mean, s.unit)
    if s.ours.n >= 2 and s.unit == "%":
        text += f" [{s.ours.lo:.1f}, {s.ours.hi:.1f}]"
    elif s.ours.n >= 2:
        text += f" [{s.ours.lo:.0f}, {s.ours.hi:.0f}]"
    return text


def fmt_share(s: Score) -> str:
    return "—" if s.ideal_share is None else f"{100 * s.ideal_share:.0f}%"


COLUMNS = ["figure", "what", "paper", "ours [95% CI]", "of ideal", "verdict", "why"]


def table_rows(scores: Sequence[Score]) -> list[list[str]]:
    """The scorecard as rows of strings under COLUMNS ("why" without its link)."""
    out = []
    for s in scores:
        why = "; ".join(x for x in (s.reason(), s.note) if x)
        out.append(
            [
                s.claim.figure,
                s.label,
                fmt_value(s.paper, s.unit),
                fmt_ours(s),
                fmt_share(s),
                s.verdict,
                why,
            ]
        )
    return out


def tally(scores: Sequence[Score]) -> str:
    """ "18 reproduced, 5 within CI, 7 differ (of 30 paper numbers)"."""
    n = {v: sum(1 for s in scores if s.verdict == v) for v in (REPRODUCED, WITHIN_CI, DIFFERS)}
    text = f"{n[REPRODUCED]} reproduced, {n[WITHIN_CI]} within CI, {n[DIFFERS]} differ"
    return text + f" (of {len(scores)} paper numbers)"


RULE = (
    "Verdict: reproduced = ours within 2 points (a percentage) or 10% (a time or size) of "
    "the paper's; within CI = further, but the paper's value inside our 95% CI; differs = "
    "outside it. Of ideal = the scheme's gain as a share of the ideal scheme's (one link "
    "with the LLC's delay and the HBC's rate)."
)


def scorecard_markdown(scores: Sequence[Score]) -> str:
    """The scorecard as a Markdown table; each verdict links to the section that measures it."""
    lines = [
        f"**Scorecard: {tally(scores)}.** {RULE}",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for s, row in zip(scores, table_rows(scores), strict=True):
        row[5] = f"[{row[5]}](#{s.claim.section})"
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    return "\n".join(lines)
