"""Paired statistics, as in the paper (NSDI'23 §6.1 "Methodology").

For every page (workload item) and trial, every scheme ran over the same trace
sub-sequence, so schemes are compared *within* a (page, trial) pair:

    gain_ms(page)  = mean over trials t of  (base[page, t] - arm[page, t])
    gain_pct(page) = 100 * gain_ms(page) / mean over the same t of base[page, t]
    headline       = mean over pages of gain_ms(page)   (and of gain_pct(page))

A positive gain means the scheme is faster than the baseline (`all-hbc`). The 95%
confidence interval is a percentile bootstrap that resamples *pages* with
replacement (seeded, so a report is reproducible). A (page, trial) pair is used
only when both loads are valid; invalid loads are counted and reported, never
averaged in, and rows that record a runner failure (`error` set) are not loads.

Also: the share of bytes carried on the LLC, the share of the `ideal` scheme's gain
each scheme captures, plain means with CIs (Table 2 phases, Table 4 PLTs) and the
distribution of per-packet statistics taken from the rows' `stats`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

DEFAULT_BOOT = 2000
DEFAULT_SEED = 20230417  # NSDI'23 opening day; any fixed value makes reports reproducible


@dataclass(frozen=True)
class CI:
    mean: float
    lo: float
    hi: float
    n: int  # number of resampled units (pages, trials)

    def fmt(self, digits: int = 1, unit: str = "") -> str:
        if math.isnan(self.mean):
            return "n/a"
        if self.n < 2:
            return f"{self.mean:.{digits}f}{unit}"
        return f"{self.mean:.{digits}f}{unit} [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"


NAN_CI = CI(math.nan, math.nan, math.nan, 0)


@dataclass(frozen=True)
class Gain:
    """One scheme against the baseline under one condition."""

    condition: str
    arm: str
    baseline: str
    gain_ms: CI
    gain_pct: CI
    base_mean_ms: float  # mean over pages of the baseline's page means (paired trials)
    arm_mean_ms: float
    pages: int  # pages with at least one valid pair
    pairs: int  # (page, trial) pairs used
    invalid_arm: int  # invalid loads of this scheme (excluded)
    invalid_base: int  # invalid loads of the baseline (excluded)
    llc_bytes_pct: float  # share of all bytes carried on the LLC by this scheme, %
    ideal_share: float | None = None  # gain_ms / ideal's gain_ms


def _bootstrap(values: Sequence[float], stat: str, n_boot: int, seed: int) -> CI:
    """`stat` ("mean" or "median") of the values with a 95% percentile-bootstrap
    interval (resampling the values); NaN and None are left out."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if x.size == 0:
        return NAN_CI
    point = float(x.mean() if stat == "mean" else np.median(x))
    if x.size == 1:
        return CI(point, point, point, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    resampled = x[idx].mean(axis=1) if stat == "mean" else np.median(x[idx], axis=1)
    lo, hi = np.percentile(resampled, [2.5, 97.5])
    return CI(point, float(lo), float(hi), int(x.size))


def bootstrap_mean(
    values: Sequence[float], n_boot: int = DEFAULT_BOOT, seed: int = DEFAULT_SEED
) -> CI:
    """Mean with a 95% percentile-bootstrap interval (resampling the values)."""
    return _bootstrap(values, "mean", n_boot, seed)


def bootstrap_median(
    values: Sequence[float], n_boot: int = DEFAULT_BOOT, seed: int = DEFAULT_SEED
) -> CI:
    """Median (in CI.mean) with a 95% percentile-bootstrap interval."""
    return _bootstrap(values, "median", n_boot, seed)


# ---------------------------------------------------------------- row handling


def arm_of(row: dict[str, Any]) -> str:
    return str(row.get("arm") or row.get("scheme"))


def item_of(row: dict[str, Any]) -> str:
    return str(row.get("item") or row.get("page") or row.get("url") or "")


def condition_of(row: dict[str, Any]) -> str:
    cond = row.get("condition")
    return str(cond) if cond else f"{row.get('hbc')} + {row.get('llc')}"


def is_measurement(row: dict[str, Any]) -> bool:
    return not row.get("error")


def is_valid(row: dict[str, Any], metric: str) -> bool:
    v = row.get(metric)
    return bool(row.get("valid", True)) and v is not None and not _isnan(v)


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def latest_per_cell(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep, per cell, the newest measurement; drop runner-failure rows.

    Rows without a cell (appended by `dch pageload` outside a campaign) are all kept.
    """
    best: dict[str, dict[str, Any]] = {}
    loose: list[dict[str, Any]] = []
    for r in rows:
        if not is_measurement(r):
            continue
        cell = r.get("cell")
        if not cell:
            loose.append(r)
            continue
        old = best.get(cell)
        if old is None or str(r.get("ts") or "") >= str(old.get("ts") or ""):
            best[cell] = r
    return loose + list(best.values())


def stats_of(row: dict[str, Any]) -> dict[str, Any]:
    s = row.get("stats")
    if isinstance(s, str):
        try:
            s = json.loads(s)
        except ValueError:
            return {}
    return s if isinstance(s, dict) else {}


# ---------------------------------------------------------------- paired gains


def llc_bytes_pct(rows: Iterable[dict[str, Any]]) -> float:
    """100 * Σ bytes_llc / Σ (bytes_hbc + bytes_llc) over rows that report both."""
    llc = tot = 0.0
    for r in rows:
        h, l_ = r.get("bytes_hbc"), r.get("bytes_llc")
        if h is None or l_ is None:
            continue
        llc += float(l_)
        tot += float(h) + float(l_)
    return 100.0 * llc / tot if tot > 0 else math.nan


def by_condition(
    rows: Iterable[dict[str, Any]],
) -> dict[str, dict[str, dict[str, dict[int, dict[str, Any]]]]]:
    """condition -> arm -> item -> trial -> row, newest row per cell."""
    table: dict[str, dict[str, dict[str, dict[int, dict[str, Any]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for r in latest_per_cell(rows):
        table[condition_of(r)][arm_of(r)][item_of(r)][int(r.get("trial") or 0)] = r
    return table


def _epoch_s(ts: Any) -> float | None:
    if isinstance(ts, datetime):
        return ts.timestamp()
    try:
        return datetime.fromisoformat(str(ts)).timestamp() if ts is not None else None
    except ValueError:
        return None


def pairing_gaps(rows: Iterable[dict[str, Any]], baseline: str) -> dict[str, float]:
    """Per arm, the median time in seconds between each of its loads and the baseline
    load it is paired with (the pairing of `paired_gains`: same condition, item and
    trial); arms with no pairs or no timestamps are left out."""
    gaps: dict[str, list[float]] = defaultdict(list)
    for arms in by_condition(rows).values():
        base = arms.get(baseline, {})
        for arm, items in arms.items():
            if arm == baseline:
                continue
            for item, trials in items.items():
                for trial, r in trials.items():
                    t = _epoch_s(r.get("ts"))
                    b = _epoch_s(base.get(item, {}).get(trial, {}).get("ts"))
                    if t is not None and b is not None:
                        gaps[arm].append(abs(t - b))
    return {arm: float(np.median(g)) for arm, g in gaps.items()}


@dataclass(frozen=True)
class PageGain:
    """One scheme against the baseline on one page, over the trials both loaded validly."""

    gain_ms: float  # mean over trials of baseline - scheme
    gain_pct: float  # 100 * gain_ms / base_ms
    base_ms: float  # mean of the baseline's paired loads
    arm_ms: float
    pairs: int


def page_gains(
    items: dict[str, dict[int, dict[str, Any]]],
    base: dict[str, dict[int, dict[str, Any]]],
    metric: str,
) -> dict[str, PageGain]:
    """Per page (item): the paired gain of `items` over `base` (pairs = same trial)."""
    out: dict[str, PageGain] = {}
    for item, trials in items.items():
        b_trials = base.get(item, {})
        diffs, bases, arms_v = [], [], []
        for t, r in trials.items():
            b = b_trials.get(t)
            if b is None or not is_valid(r, metric) or not is_valid(b, metric):
                continue
            bv, av = float(b[metric]), float(r[metric])
            diffs.append(bv - av)
            bases.append(bv)
            arms_v.append(av)
        if not diffs:
            continue
        g, mb = float(np.mean(diffs)), float(np.mean(bases))
        out[item] = PageGain(
            g, 100.0 * g / mb if mb > 0 else math.nan, mb, float(np.mean(arms_v)), len(diffs)
        )
    return out


def paired_gains(
    rows: Iterable[dict[str, Any]],
    metric: str = "plt_ms",
    baseline: str = "all-hbc",
    ideal: str | None = "ideal",
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict[tuple[str, str], Gain]:
    """Gain of every scheme over `baseline`, per condition: {(condition, arm): Gain}."""
    out: dict[tuple[str, str], Gain] = {}
    for cond, arms in by_condition(rows).items():
        base = arms.get(baseline)
        if base is None:
            continue
        for arm, items in arms.items():
            if arm == baseline:
                continue
            pages = list(page_gains(items, base, metric).values())
            arm_rows = [r for trials in items.values() for r in trials.values()]
            inv_arm = sum(1 for r in arm_rows if not is_valid(r, metric))
            inv_base = sum(
                1 for item in items for r in base.get(item, {}).values() if not is_valid(r, metric)
            )
            out[(cond, arm)] = Gain(
                condition=cond,
                arm=arm,
                baseline=baseline,
                gain_ms=bootstrap_mean([p.gain_ms for p in pages], n_boot, seed),
                gain_pct=bootstrap_mean([p.gain_pct for p in pages], n_boot, seed),
                base_mean_ms=float(np.mean([p.base_ms for p in pages])) if pages else math.nan,
                arm_mean_ms=float(np.mean([p.arm_ms for p in pages])) if pages else math.nan,
                pages=len(pages),
                pairs=sum(p.pairs for p in pages),
                invalid_arm=inv_arm,
                invalid_base=inv_base,
                llc_bytes_pct=llc_bytes_pct(r for r in arm_rows if is_valid(r, metric)),
            )
    if ideal:
        for key, gain in list(out.items()):
            ig = out.get((key[0], ideal))
            if ig is None or not ig.gain_ms.mean > 0 or math.isnan(gain.gain_ms.mean):
                continue
            out[key] = _with_share(gain, gain.gain_ms.mean / ig.gain_ms.mean)
    return out


def _with_share(g: Gain, share: float) -> Gain:
    from dataclasses import replace

    return replace(g, ideal_share=share)


# ---------------------------------------------------------------- plain means


@dataclass(frozen=True)
class Mean:
    condition: str
    arm: str
    metric: str
    value: CI
    loads: int
    invalid: int


def means(
    rows: Iterable[dict[str, Any]],
    metrics: Sequence[str],
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict[tuple[str, str, str], Mean]:
    """Mean of each metric per (condition, arm): over items of the item's mean over valid loads.

    With one item (curl on one page) this is the mean over trials, and the CI
    resamples trials; with several, it resamples items.
    """
    rows = latest_per_cell(rows)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(condition_of(r), arm_of(r))].append(r)
    out: dict[tuple[str, str, str], Mean] = {}
    for (cond, arm), rs in groups.items():
        for m in metrics:
            valid = [r for r in rs if is_valid(r, m)]
            by_item: dict[str, list[float]] = defaultdict(list)
            for r in valid:
                by_item[item_of(r)].append(float(r[m]))
            if len(by_item) == 1:
                units = next(iter(by_item.values()))
            else:
                units = [float(np.mean(v)) for v in by_item.values()]
            out[(cond, arm, m)] = Mean(
                cond, arm, m, bootstrap_mean(units, n_boot, seed), len(rs), len(rs) - len(valid)
            )
    return out


def stat_samples(
    rows: Iterable[dict[str, Any]], key: str | Sequence[str]
) -> dict[tuple[str, str], list[float]]:
    """Values of `stats[key]` per (condition, arm); `key` is a dotted path (or several,
    pooled), the value a number or a list of numbers. Rows of valid loads only."""
    keys = [key] if isinstance(key, str) else list(key)
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in latest_per_cell(rows):
        if r.get("valid") is False:
            continue
        s = stats_of(r)
        for k in keys:
            v: Any = s
            for part in k.split("."):
                v = v.get(part) if isinstance(v, dict) else None
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[(condition_of(r), arm_of(r))].append(float(v))
            elif isinstance(v, list):
                out[(condition_of(r), arm_of(r))].extend(
                    float(x) for x in v if isinstance(x, int | float) and not isinstance(x, bool)
                )
    return dict(out)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def unpaired(rows: Iterable[dict[str, Any]]) -> list[str]:
    """(condition, item, trial) groups whose schemes saw *different* trace offsets.

    The paired design needs one offset per (condition, page, trial); a mismatch means
    the comparison is not paired (a bug in the workload layer or mixed code versions).
    """
    offsets: dict[tuple[str, str, int], set[float]] = defaultdict(set)
    for r in latest_per_cell(rows):
        off = r.get("trace_offset_ms")
        if off is not None:
            offsets[(condition_of(r), item_of(r), int(r.get("trial") or 0))].add(float(off))
    return [f"{c}|{i}|t{t}: {sorted(v)}" for (c, i, t), v in sorted(offsets.items()) if len(v) > 1]
