"""Issue 40's target for the real-time policy, as tables of the `realtime` analysis
(registers nothing): the new policy against Algorithm 1, and which schemes bring the
p95 under the app's bound where all-hbc is above it.

Per app, condition and new arm (each arm whose testbed scheme is one of `NEW_ARMS`,
with any parameters) against the arm labelled `ALGORITHM1`,
over each arm's valid sessions (latest row per cell):
  p95        the mean of the sessions' p95 (the app's METRIC column: input-to-display
             for cloud gaming, audio delay for a video call), 95% percentile-bootstrap
             CI over sessions (dchlab.experiments.analysis.bootstrap_mean);
  reduction  1 - p95(new) / p95(Algorithm 1), in %, with a 95% bootstrap CI
             (`reduction`): sessions are paired by trial index (one trial = one
             testbed seed and trace segment under every scheme,
             dchlab.workloads.realtime.run). When >= 2 trials have a valid session
             under both arms the estimate and its CI use those pairs only, resampled
             together ("paired, n"); otherwise every valid session, each arm
             resampled independently ("unpaired, n/m"; one session each, of one
             trial: "paired, 1", without a CI);
  freezes    per minute of each session (freezes / (duration_s / 60)), mean and CI;
  bitrate    delivered Mbit/s of each session (bitrate_mbps: the video's RTP payload
             received, retransmissions included), mean and CI; beside it, not judged,
             the Mbit/s the player saw (shown_mbps: the encoded bytes of the frames it
             displayed, per second; sessions measured before it existed have none).

Verdict (`verdict`): "met" when all three hold:
  1. the reduction's point estimate is >= TARGET_PCT (20%);
  2. freezes are not higher: the new arm's freezes/min CI lower bound <= Algorithm 1's
     CI upper bound (the CIs overlap, or the new arm's lies below);
  3. bitrate is not lower: the new arm's bitrate CI upper bound >= Algorithm 1's CI
     lower bound (the CIs overlap, or the new arm's lies above).
Otherwise "not met: " and each failed clause; "—" when a clause has nothing to judge
(an arm without a valid session or without the column).

The bound (`bound_table`): per condition where all-hbc's mean p95 is above the app's
BOUND_MS (96 ms for cloud gaming, NSDI'23 §1), the schemes whose mean p95 is under it
("CI under" when the CI's upper bound is under it too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Rows
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table

#: Algorithm 1 (NSDI'23 §4): the scheme the new policy is held against.
ALGORITHM1 = "dchannel"
#: The real-time policy's testbed schemes (crates/dchannel-core/src/policy/realtime.rs):
#: alone and duplicating input packets on both channels.
NEW_ARMS = ("realtime", "realtime-dup")
#: The issue's target: the new policy's p95 at least this much below Algorithm 1's (%).
TARGET_PCT = 20.0

#: (app, condition, arm) -> that cell's rows (latest per cell).
Cells = Mapping[tuple[str, str, str], Rows]


@dataclass(frozen=True)
class Reduction:
    """1 - new / base in % with its 95% bootstrap CI, and how sessions were used."""

    ci: an.CI
    how: str  # "paired, n" or "unpaired, n/m"


def valid(rows: Rows) -> Rows:
    """The valid sessions of `rows`."""
    return [r for r in rows if r.get("valid")]


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _trial(row: dict[str, Any]) -> int | None:
    t = _num(row.get("trial"))
    return None if t is None else int(t)


def per_session(rows: Rows, col: str) -> list[tuple[int | None, float]]:
    """[(trial, value of `col`)] of the rows that have it."""
    out = []
    for r in rows:
        v = _num(r.get(col))
        if v is not None:
            out.append((_trial(r), v))
    return out


def freezes_per_min(rows: Rows) -> list[tuple[int | None, float]]:
    """[(trial, freezes per minute)] of the rows with freezes and a duration."""
    out = []
    for r in rows:
        n, d = _num(r.get("freezes")), _num(r.get("duration_s"))
        if n is not None and d:
            out.append((_trial(r), 60.0 * n / d))
    return out


def _pairs(
    new: Sequence[tuple[int | None, float]], base: Sequence[tuple[int | None, float]]
) -> list[tuple[float, float]]:
    """The (new, base) values of the trials both have (once each)."""
    a = {t: v for t, v in new if t is not None}
    b = {t: v for t, v in base if t is not None}
    return [(a[t], b[t]) for t in sorted(a.keys() & b.keys())]


def reduction(
    new: Sequence[tuple[int | None, float]],
    base: Sequence[tuple[int | None, float]],
    n_boot: int = an.DEFAULT_BOOT,
    seed: int = an.DEFAULT_SEED,
) -> Reduction | None:
    """100 * (1 - mean(new) / mean(base)) with its 95% percentile-bootstrap CI (module
    docstring: paired by trial when >= 2 trials pair, else each arm resampled
    independently); None when an arm is empty or the base's mean is not > 0."""
    pairs = _pairs(new, base)
    rng = np.random.default_rng(seed)
    if len(pairs) >= 2:
        x = np.array([p[0] for p in pairs])
        y = np.array([p[1] for p in pairs])
        how = f"paired, {len(pairs)}"
        idx = rng.integers(0, len(pairs), size=(n_boot, len(pairs)))
        xs, ys = x[idx].mean(axis=1), y[idx].mean(axis=1)
    else:
        x = np.array([v for _, v in new])
        y = np.array([v for _, v in base])
        # one session each, of one trial: a pair, with nothing to resample
        one_pair = len(pairs) == 1 and x.size == y.size == 1
        how = "paired, 1" if one_pair else f"unpaired, {x.size}/{y.size}"
        if x.size == 0 or y.size == 0:
            return None
        xs = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
        ys = y[rng.integers(0, y.size, size=(n_boot, y.size))].mean(axis=1)
    if y.mean() <= 0:
        return None
    point = 100.0 * (1.0 - x.mean() / y.mean())
    n = min(x.size, y.size)
    if n < 2:
        return Reduction(an.CI(point, point, point, n), how)
    ok = ys > 0  # a resample whose base mean is 0 has no ratio
    if not ok.any():
        return Reduction(an.CI(point, point, point, 1), how)
    lo, hi = np.percentile(100.0 * (1.0 - xs[ok] / ys[ok]), [2.5, 97.5])
    return Reduction(an.CI(float(point), float(lo), float(hi), n), how)


def _ci(values: Sequence[tuple[int | None, float]]) -> an.CI:
    return an.bootstrap_mean([v for _, v in values])


def _fmt_or_dash(ci: an.CI) -> str:
    """`ci` formatted to 2 decimals, or — when no session has the column."""
    return "—" if math.isnan(ci.mean) else ci.fmt(2)


def verdict(
    red: Reduction | None, freezes: tuple[an.CI, an.CI], bitrate: tuple[an.CI, an.CI]
) -> str:
    """The module docstring's rule on the reduction and the (new, Algorithm 1) CIs of
    freezes per minute and bitrate."""
    (f_new, f_base), (b_new, b_base) = freezes, bitrate
    if red is None or any(math.isnan(c.mean) for c in (f_new, f_base, b_new, b_base)):
        return "—"
    failed = []
    if red.ci.mean < TARGET_PCT:
        failed.append(f"p95 reduction {red.ci.mean:.1f}% < {TARGET_PCT:.0f}%")
    if f_new.lo > f_base.hi:
        failed.append(f"more freezes ({f_new.mean:.2f} vs {f_base.mean:.2f}/min)")
    if b_new.hi < b_base.lo:
        failed.append(f"lower bitrate ({b_new.mean:.2f} vs {b_base.mean:.2f} Mbit/s)")
    return "met" if not failed else "not met: " + "; ".join(failed)


@dataclass(frozen=True)
class Judged:
    """One new arm against Algorithm 1 in one (app, condition) cell."""

    app: str
    condition: str
    arm: str
    verdict: str
    row: list[str]


def judge(app: str, cond: str, arm: str, p95_col: str, cells: Cells) -> Judged | None:
    """The new `arm` against ALGORITHM1 under `cond` (None when either has no rows)."""
    new_rows, base_rows = cells.get((app, cond, arm)), cells.get((app, cond, ALGORITHM1))
    if not new_rows or not base_rows:
        return None
    new, base = valid(new_rows), valid(base_rows)
    p_new, p_base = per_session(new, p95_col), per_session(base, p95_col)
    red = reduction(p_new, p_base)
    fr = (_ci(freezes_per_min(new)), _ci(freezes_per_min(base)))
    br = (_ci(per_session(new, "bitrate_mbps")), _ci(per_session(base, "bitrate_mbps")))
    v = verdict(red, fr, br)
    shown = (_ci(per_session(new, "shown_mbps")), _ci(per_session(base, "shown_mbps")))
    row = [
        cond, arm, f"{len(p_new)} / {len(p_base)}", _ci(p_new).fmt(), _ci(p_base).fmt(),
        "—" if red is None else red.ci.fmt(unit="%"), "—" if red is None else red.how,
        fr[0].fmt(2), fr[1].fmt(2), br[0].fmt(2), br[1].fmt(2),
        _fmt_or_dash(shown[0]), _fmt_or_dash(shown[1]), v,
    ]  # fmt: skip
    return Judged(app, cond, arm, v, row)


def target_table(c: Campaign, app: str, p95_col: str, cells: Cells) -> tuple[Table, list[Judged]]:
    """The target table of `app` (module docstring) and each comparison's judgement."""
    what = "input-to-display" if app == "cloud-gaming" else "audio delay"
    t = Table(
        f"{app}: the target, the real-time policy against Algorithm 1 ({ALGORITHM1}): "
        f"{what} p95 (ms, mean of the sessions' p95, 95% CI) at least {TARGET_PCT:.0f}% "
        "lower with freezes not higher and bitrate not lower (CIs overlapping or better)",
        ["condition", "scheme", "sessions (new / Alg. 1)", "p95 new", "p95 Alg. 1",
         "reduction [CI]", "sessions used", "freezes/min new", "freezes/min Alg. 1",
         "Mbit/s new", "Mbit/s Alg. 1", "Mbit/s shown new", "Mbit/s shown Alg. 1",
         "verdict"],
    )  # fmt: skip
    judged = []
    new_arms = [s.label for s in c.schemes if s.scheme.partition(":")[0] in NEW_ARMS]
    for cond in c.conditions:
        for arm in new_arms:
            j = judge(app, cond.name, arm, p95_col, cells)
            if j is not None:
                t.rows.append(j.row)
                judged.append(j)
    return t, judged


def bound_table(
    c: Campaign, app: str, p95_col: str, bound: float, cells: Cells, base: str = "all-hbc"
) -> Table:
    """Per condition: `base`'s mean p95 and, where it is above `bound`, the schemes whose
    mean p95 is under it (module docstring)."""
    t = Table(
        f"{app}: which schemes bring the p95 under {bound:.0f} ms where {base} is above it",
        ["condition", f"{base} p95 [CI]", "schemes under the bound (p95 [CI])"],
    )
    for cond in c.conditions:
        b = _ci(per_session(valid(cells.get((app, cond.name, base), [])), p95_col))
        if math.isnan(b.mean):
            continue
        if b.mean <= bound:
            t.rows.append([cond.name, b.fmt(), f"— ({base} is not above {bound:.0f} ms)"])
            continue
        under = []
        for s in c.schemes:
            ci = _ci(per_session(valid(cells.get((app, cond.name, s.label), [])), p95_col))
            if s.label != base and not math.isnan(ci.mean) and ci.mean < bound:
                under.append(f"{s.label} {ci.fmt()}" + (" (CI under)" if ci.hi < bound else ""))
        t.rows.append([cond.name, b.fmt(), ", ".join(under) or "none"])
    return t
