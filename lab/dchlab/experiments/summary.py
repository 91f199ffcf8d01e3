"""Per-campaign result tables: our numbers beside the paper's, one function per analysis kind.

`summarize(campaign, rows)` returns a `Summary` (tables of plain strings for the HTML
report and the terminal, plus the numbers the plots need). The statistics come from
`analysis`; this module only arranges them.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign, Condition
from dchlab.units import format_size


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class Summary:
    campaign: Campaign
    tables: list[Table]
    plot: dict[str, Any]  # kind-specific data for report.plot_*
    loads: int
    invalid: int
    failed: int
    notes: list[str] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)  # invalid loads by kind of reason
    expected_only: int = 0  # valid loads whose only failures were the page's expected-missing


def reason_kind(reason: str) -> str:
    """An invalid_reason without its particulars, for counting ("2 unexpected failed
    resources (first: https://x/y)" -> "unexpected failed resources")."""
    # The particulars run to the next ";" or the end: a URL may hold parentheses, and
    # the reason may be cut off before its closing one.
    r = re.sub(r"\s*\((first|and)\b[^;]*", "", reason or "unknown").split(";")[0]
    r = re.sub(r"^\d+\s+", "", r)
    r = re.sub(r"\d+(\.\d+)?", "N", r)
    return r.strip()[:80] or "unknown"


def exclusions(rows: list[dict[str, Any]]) -> tuple[dict[str, int], int]:
    """(invalid loads per reason kind, most common first; valid loads that failed only
    requests the corpus records as missing) over the latest measurement of each cell."""
    meas = an.latest_per_cell(rows)
    kinds = Counter(
        reason_kind(str(r.get("invalid_reason") or "")) for r in meas if r.get("valid") is False
    )
    expected_only = sum(
        1 for r in meas if r.get("valid") is True and (r.get("resources_failed") or 0) > 0
    )
    return dict(kinds.most_common()), expected_only


def exclusion_text(s: Summary) -> str:
    """One sentence: how many loads were excluded and why."""
    out = f"{s.invalid} of {s.loads} loads excluded as invalid"
    if s.excluded:
        out += " (" + ", ".join(f"{n} {k}" for k, n in s.excluded.items()) + ")"
    if s.expected_only:
        out += (
            f"; {s.expected_only} valid loads failed only requests their corpus records as "
            "missing (the page as saved)"
        )
    return out


#: A page-load campaign alone keeps the 1-minute load average near 2 per core (4.3 on
#: 2 cores, measured 2026-11-22: Chromium, agents, emulators, servers); above this many
#: per core, something else was running.
BUSY_LOAD_PER_CPU = 3.0


def busy_text(rows: list[dict[str, Any]]) -> str:
    """How many measurements were taken on a machine busy with other work (rows carry
    `host_load1`, `host_cpus`; see BUSY_LOAD_PER_CPU); empty when none or unknown.
    Agent-based schemes lose their gains under CPU contention (docs/results.md), so a
    reader must know."""
    meas = [r for r in an.latest_per_cell(rows) if r.get("host_load1") is not None]
    busy = [
        r
        for r in meas
        if float(r["host_load1"]) > BUSY_LOAD_PER_CPU * float(r.get("host_cpus") or 1)
    ]
    if not busy:
        return ""
    peak = max(float(r["host_load1"]) for r in busy)
    return (
        f"{len(busy)} of {len(meas)} measurements were taken while the machine's load "
        f"average exceeded {BUSY_LOAD_PER_CPU:g} per core (up to {peak:.1f}): other work "
        "was running, and CPU contention slows the agent-based schemes more than the "
        "baseline (docs/results.md)"
    )


#: A campaign measures each cell's schemes back to back (one start time per page and
#: trial), so a scheme and its baseline pair up minutes apart at most; an arm added to a
#: campaign later pairs with baseline loads of another hour or day. Over hours this VM's
#: speed drifts (docs/results.md, "Stability": the same loads 6-10% faster 2.7 h later),
#: and a paired gain then carries the drift.
PAIR_GAP_S = 30 * 60.0


def _duration(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def pairing_gap_text(rows: list[dict[str, Any]], baseline: str) -> str:
    """Which arms were measured far in time from the baseline loads they are compared
    with (see PAIR_GAP_S); empty when every arm ran beside its baseline."""
    far = {a: g for a, g in an.pairing_gaps(rows, baseline).items() if g > PAIR_GAP_S}
    if not far:
        return ""
    listed = ", ".join(f"{a} ({_duration(g)})" for a, g in sorted(far.items()))
    return (
        f"{len(far)} arm{'s' if len(far) > 1 else ''} ran apart from the {baseline} loads "
        f"they are paired with (median gap: {listed}): the machine's speed drifts over "
        "hours, so their gains carry that drift besides the scheme's effect; compare arms "
        "measured in one run (docs/results.md)"
    )


def cautions(c: Campaign, rows: list[dict[str, Any]]) -> list[str]:
    """The sentences a reader must see before a campaign's tables (busy machine, arms
    measured apart from their baseline); empty when there is nothing to warn about."""
    found = [busy_text(rows), pairing_gap_text(rows, c.analysis.get("baseline", "all-hbc"))]
    return [t for t in found if t]


def cost_text(rows: list[dict[str, Any]]) -> str:
    """What the measurements cost: the machine time (sum of each load's wall time from
    its testbed's start to its teardown, `stats.timing.load.total`) and the mean per
    load beside the mean PLT; empty when the rows do not record it."""
    meas = an.latest_per_cell(rows)
    totals, plts = [], []
    for r in meas:
        st = r.get("stats")
        if isinstance(st, str):
            try:
                st = json.loads(st)
            except ValueError:
                continue
        total = ((st or {}).get("timing") or {}).get("load", {}).get("total")
        if isinstance(total, int | float):
            totals.append(float(total))
            if isinstance(r.get("plt_ms"), int | float):
                plts.append(float(r["plt_ms"]))
    if not totals:
        return ""
    minutes = sum(totals) / 60_000
    span = f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"
    text = (
        f"machine time {span} for {len(totals)} loads ({sum(totals) / len(totals) / 1000:.2f} s "
        "per load"
    )
    if plts:
        text += f", of which a mean PLT of {sum(plts) / len(plts) / 1000:.2f} s"
    return text + ")"


def paper_value(c: Campaign, cond: str, arm: str, metric: str) -> float | None:
    vals = c.paper.get("values", {}).get(cond, {})
    v = vals.get(arm)
    if isinstance(v, dict):
        got = v.get(metric)
        return float(got) if got is not None else None
    if v is not None and metric == c.paper.get("metric"):
        return float(v)
    return None


def _num(v: float | None, digits: int = 1, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}{unit}"


def _arms(c: Campaign, baseline: str | None) -> list[str]:
    return [s.label for s in c.schemes if s.label != baseline]


def _best_of(
    c: Campaign, gains: dict[tuple[str, str], an.Gain]
) -> dict[tuple[str, str], tuple[str, an.Gain]]:
    """analysis.best_of: per condition, the member arm with the largest mean gain."""
    out: dict[tuple[str, str], tuple[str, an.Gain]] = {}
    for label, members in c.analysis.get("best_of", {}).items():
        for cond in c.conditions:
            cands = [(m, gains[(cond.name, m)]) for m in members if (cond.name, m) in gains]
            cands = [x for x in cands if not math.isnan(x[1].gain_ms.mean)]
            if cands:
                out[(cond.name, label)] = max(cands, key=lambda x: x[1].gain_pct.mean)
    return out


def _gain_rows(
    c: Campaign, gains: dict[tuple[str, str], an.Gain]
) -> tuple[Table, list[dict[str, Any]]]:
    t = Table(
        "PLT gain against "
        + c.analysis["baseline"]
        + " (positive = faster; mean over pages, 95% bootstrap CI over pages)",
        [
            "condition",
            "scheme",
            "gain % [CI]",
            "paper %",
            "gain ms [CI]",
            "paper ms",
            "LLC bytes %",
            "paper LLC %",
            "of ideal",
            "pages / pairs",
            "invalid (scheme / base)",
        ],
    )
    points: list[dict[str, Any]] = []
    best = _best_of(c, gains)
    for cond in c.conditions:
        arms: list[tuple[str, str, an.Gain]] = [
            (a, a, gains[(cond.name, a)])
            for a in _arms(c, c.analysis["baseline"])
            if (cond.name, a) in gains
        ]
        arms += [
            (lbl, f"{lbl} (= {m})", g) for (cn, lbl), (m, g) in best.items() if cn == cond.name
        ]
        ideal = gains.get((cond.name, "ideal"))
        for key, shown, g in arms:
            pp = paper_value(c, cond.name, key, "gain_pct")
            t.rows.append(
                [
                    cond.name,
                    shown,
                    g.gain_pct.fmt(1, "%"),
                    _paper_vs_bound(pp, ideal),
                    g.gain_ms.fmt(0),
                    _num(paper_value(c, cond.name, key, "gain_ms"), 0),
                    _num(g.llc_bytes_pct),
                    _num(paper_value(c, cond.name, key, "llc_bytes_pct")),
                    "—" if g.ideal_share is None else f"{100 * g.ideal_share:.0f}%",
                    f"{g.pages} / {g.pairs}",
                    f"{g.invalid_arm} / {g.invalid_base}",
                ]
            )
            points.append(
                {
                    "condition": cond.name,
                    "x": cond.x,
                    "arm": key,
                    "gain_pct": g.gain_pct,
                    "gain_ms": g.gain_ms,
                    "paper_pct": pp,
                }
            )
    return t, points


def _paper_vs_bound(paper_pct: float | None, ideal: an.Gain | None) -> str:
    """The paper's gain, marked when it lies above the upper end of our ideal scheme's
    CI: no policy can reach it on this emulation, pages and machine (issue 18)."""
    text = _num(paper_pct)
    hi = ideal.gain_pct.hi if ideal is not None else math.nan
    if paper_pct is not None and not math.isnan(hi) and paper_pct > hi:
        text += f" (above our ideal bound, {hi:.1f}%)"
    return text


def _counts(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    failed = sum(1 for r in rows if r.get("error"))
    meas = an.latest_per_cell(rows)
    invalid = sum(1 for r in meas if r.get("valid") is False)
    return len(meas), invalid, failed


#: The stability target of issue 18: headline gains move by at most this many points.
STABLE_POINTS = 2.0


#: The cells _moves gives each row of the rerun tables, after the tables' own first columns.
MOVE_COLUMNS = ["condition", "scheme", "first gain %", "second gain %", "moved (points)"]


def _moves(
    c: Campaign, first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> Iterator[list[str]]:
    """The table cells of every (condition, arm) both runs measured, on the pages both
    loaded: MOVE_COLUMNS (the move with its 95% CI over pages) and the trials per page
    and run for a CI of ±STABLE_POINTS."""
    metric = c.analysis.get("metric", "plt_ms")
    base = c.analysis.get("baseline", "all-hbc")
    pages = {str(r.get("item")) for r in first} & {str(r.get("item")) for r in second}
    first = [r for r in first if str(r.get("item")) in pages]
    second = [r for r in second if str(r.get("item")) in pages]
    ga = an.paired_gains(first, metric=metric, baseline=base)
    gb = an.paired_gains(second, metric=metric, baseline=base)
    moves = an.rerun_moves(first, second, metric=metric, baseline=base)
    for cond in c.conditions:
        for arm in _arms(c, base):
            a, b, m = (
                ga.get((cond.name, arm)),
                gb.get((cond.name, arm)),
                moves.get((cond.name, arm)),
            )
            if a is None or b is None or m is None:
                continue
            move, trials = m
            half = (move.hi - move.lo) / 2
            # the CI's half-width shrinks as 1/sqrt(trials) (pairing by page removed the
            # between-page part), so ±2 needs trials * (half / 2)^2 trials per page in
            # each run (trials: the effective number, analysis.rerun_moves)
            need = (
                "—"
                if math.isnan(half)
                else str(max(1, math.ceil(trials * (half / STABLE_POINTS) ** 2)))
            )
            yield [
                cond.name,
                arm,
                a.gain_pct.fmt(1, "%"),
                b.gain_pct.fmt(1, "%"),
                move.fmt(1),
                need,
            ]


def _rerun_table(
    c: Campaign, rows: list[dict[str, Any]], reruns: dict[str, list[dict[str, Any]]]
) -> Table:
    """Each rerun's headline gains beside the original's on the same pages: how far they
    moved with another seed (trace offsets), day and machine state (issue 18)."""
    base = c.analysis.get("baseline", "all-hbc")
    t = Table(
        "Reruns (dch run --name): gain against "
        + base
        + " on the rerun's pages, original beside rerun (95% CI over pages; the move"
        " paired per page)",
        [
            "rerun",
            "condition",
            "scheme",
            f"{c.name} gain %",
            "rerun gain %",
            "moved (points)",
            f"trials/page for ±{STABLE_POINTS:g}",
        ],
    )
    for name, rr in sorted(reruns.items()):
        pages = {str(r.get("item")) for r in rr}
        t.rows += [[f"{name} ({len(pages)} pages)", *cells] for cells in _moves(c, rows, rr)]
    return t


def _offsets_of(rows: list[dict[str, Any]]) -> str:
    """How a rerun's loads chose their trace offsets (rows before the column: random)."""
    modes = sorted({str(r.get("offsets") or "random") for r in rows})
    return "/".join(modes)


def _shared_stretches(
    ra: list[dict[str, Any]], rb: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The loads of two latin runs on the (condition, page, trace offset) stretches both
    measured, and how many such stretches there are per condition (the most of any).

    With latin offsets a (page, offset) is one stretch of one network, so two runs agree
    only on the stretches they share: a run of 5 trials against one of 10 would otherwise
    compare each page on 5 stretches with the same page on 10, a different sample."""

    def key(r: dict[str, Any]) -> tuple[str, str, Any]:
        return (an.condition_of(r), an.item_of(r), r.get("trace_offset_ms"))

    shared = {key(r) for r in ra} & {key(r) for r in rb}
    per_cond = Counter(k[0] for k in shared)
    n = max(per_cond.values(), default=0)
    return [r for r in ra if key(r) in shared], [r for r in rb if key(r) in shared], n


def _rerun_pairs_table(c: Campaign, reruns: dict[str, list[dict[str, Any]]]) -> Table | None:
    """Reruns on the same pages, with offsets chosen the same way, set against each other
    (the stability check of issue 18: two seeds, two days; with latin offsets the same
    network sample), or None when no two reruns share pages and offsets mode."""
    base = c.analysis.get("baseline", "all-hbc")
    t = Table(
        "Rerun pairs on the same pages: gain against "
        + base
        + " in each (95% CI over pages), and how far the second moved from the first"
        " (paired per page, 95% CI over pages)",
        ["first", "second", *MOVE_COLUMNS, f"trials/page for ±{STABLE_POINTS:g}"],
    )
    names = sorted(reruns)
    for i, a_name in enumerate(names):
        for b_name in names[i + 1 :]:
            ra, rb = reruns[a_name], reruns[b_name]
            if {str(r.get("item")) for r in ra} != {str(r.get("item")) for r in rb}:
                continue
            if _offsets_of(ra) != _offsets_of(rb):
                continue
            first = f"{a_name} ({_offsets_of(ra)}, seed {ra[0].get('seed')})"
            second = f"{b_name} ({_offsets_of(rb)}, seed {rb[0].get('seed')})"
            if _offsets_of(ra) == "latin":
                ra, rb, shared = _shared_stretches(ra, rb)
                second += f"; {shared} (page, stretch) pairs in common"
            t.rows += [[first, second, *cells] for cells in _moves(c, ra, rb)]
    return t if t.rows else None


def _measured(
    c: Campaign, gains: dict[tuple[str, str], an.Gain], base: str
) -> Iterator[tuple[Condition, str, an.Gain]]:
    """(condition, arm, gain) of every measured cell, in the campaign's order."""
    for cond in c.conditions:
        for arm in _arms(c, base):
            g = gains.get((cond.name, arm))
            if g is not None:
                yield cond, arm, g


def summarize(
    c: Campaign,
    rows: list[dict[str, Any]],
    reruns: dict[str, list[dict[str, Any]]] | None = None,
) -> Summary:
    kind = c.analysis["kind"]
    loads, invalid, failed = _counts(rows)
    base = c.analysis.get("baseline", "all-hbc")
    metric = c.analysis.get("metric", "plt_ms")
    s = Summary(c, [], {"kind": kind}, loads, invalid, failed, list(c.paper.get("notes", [])))
    s.excluded, s.expected_only = exclusions(rows)
    if kind in ("gain", "sweep", "reorder", "plt"):
        gains = an.paired_gains(rows, metric=metric, baseline=base)
        t, points = _gain_rows(c, gains)
        s.plot["points"] = points
        if kind == "plt":
            s.tables.append(_plt_table(c, rows, metric))
            s.plot["means"] = an.means(rows, [metric])
        s.tables.append(t)
        if kind == "reorder":
            s.tables.append(_stats_table(c, rows))
        if c.analysis.get("versus"):
            s.tables.append(_versus_table(c, rows, gains, metric))
        if c.analysis.get("hindsight"):
            s.tables.append(_hindsight_table(c, rows, gains, metric))
        if reruns:
            s.tables.append(_rerun_table(c, rows, reruns))
            pairs = _rerun_pairs_table(c, reruns)
            if pairs is not None:
                s.tables.append(pairs)
        if any(r.get("fcp_ms") is not None for r in rows):
            s.tables.append(_page_metrics_table(c, rows))
        if c.analysis.get("llc_usage"):
            s.tables.append(_llc_usage_table(c, rows))
    elif kind == "phases":
        metrics = list(
            c.analysis.get("metrics", ["dns_ms", "connect_ms", "tls_ms", "transfer_ms", "total_ms"])
        )
        m = an.means(rows, metrics)
        t = Table(
            "Mean phase times in ms, ours [95% CI over trials] / paper",
            ["condition", "scheme", *[x.removesuffix("_ms") for x in metrics], "loads (invalid)"],
        )
        for cond in c.conditions:
            for sch in c.schemes:
                cells = []
                got = None
                for x in metrics:
                    got = m.get((cond.name, sch.label, x))
                    ours = got.value.fmt(0) if got else "—"
                    cells.append(f"{ours} / {_num(paper_value(c, cond.name, sch.label, x), 0)}")
                g0 = m.get((cond.name, sch.label, metrics[0]))
                cnt = f"{g0.loads} ({g0.invalid})" if g0 else "0"
                t.rows.append([cond.name, sch.label, *cells, cnt])
        s.tables.append(t)
        s.plot.update(means=m, metrics=metrics)
    elif kind == "bulk":
        metric = c.analysis.get("metric", "total_ms")
        t = _item_gain_table(
            f"Completion time gain against {base} per file size (95% CI over trials)",
            "size",
            [f"{base} ms", "scheme ms", "gain % [CI]", "gain ms [CI]"],
        )
        points = []
        for size in c.workload.sizes:
            item = format_size(size)
            sub = [r for r in rows if an.item_of(r) == item]
            # one item: resample trials, i.e. treat each trial as its own "page"
            per_trial = [dict(r, item=f"{item}#{r.get('trial')}") for r in sub]
            gains = an.paired_gains(per_trial, metric=metric, baseline=base)
            for cond, arm, g in _measured(c, gains, base):
                cells = [
                    _num(g.base_mean_ms, 0),
                    _num(g.arm_mean_ms, 0),
                    g.gain_pct.fmt(1, "%"),
                    g.gain_ms.fmt(0),
                ]
                t.rows.append(_item_gain_row(cond, item, arm, g, cells))
                points.append(
                    {"condition": cond.name, "size": size, "arm": arm, "gain_pct": g.gain_pct}
                )
        s.tables.append(t)
        s.plot["points"] = points
    elif kind == "app":
        t, points = _app_table(c, rows, metric if metric != "plt_ms" else "irt_ms")
        s.tables.append(t)
        s.plot["points"] = points
    elif kind == "reward-error":
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
                        _num(an.percentile(vals, 50)),
                        _num(an.percentile(vals, 90)),
                        _num(paper_value(c, cond.name, sch.label, "reward_error_p90_ms")),
                    ]
                )
        if not t.rows and loads:
            s.notes.append(
                f"No row carries {shown} in its stats: the agents' decision log is not in the results yet."
            )
        s.tables.append(t)
        s.plot["samples"] = samples
    elif kind == "heatmap":
        metrics = list(c.analysis.get("metrics") or [metric])
        s.plot["metrics"] = metrics
        for m in metrics:
            t, by_cell = _better_single_table(c, rows, m)
            s.tables.append(t)
            s.plot.setdefault("cells", {})[m] = by_cell
    return s


def _better_single_table(
    c: Campaign, rows: list[dict[str, Any]], metric: str
) -> tuple[Table, dict[tuple[str, str, str], an.BetterSingleGain]]:
    """IANS' comparison: each scheme against the better single network of its
    scenario (`analysis.singles`), median improvement over pages with a 95% CI.
    Returns the table and {(network A, network B, scheme): gain} for the heatmap."""
    singles = list(c.analysis.get("singles") or [])
    gains = an.better_single_gains(rows, singles, metric=metric)
    t = Table(
        f"{metric}: median improvement over the better single network (positive = faster; "
        "95% bootstrap CI over pages)",
        ["scenario", "network A (LLC)", "network B (HBC)", "better single", "scheme",
         "improvement % [CI]", "pages"],
    )  # fmt: skip
    cells: dict[tuple[str, str, str], an.BetterSingleGain] = {}
    for cond in c.conditions:
        a, b = str(cond.x.get("a", cond.llc)), str(cond.x.get("b", cond.hbc))
        for sch in c.schemes:
            g = gains.get((cond.name, sch.label))
            if g is None:
                continue
            cells[(a, b, sch.label)] = g
            t.rows.append(
                [cond.name, a, b, g.better, sch.label, g.improvement_pct.fmt(1, "%"), str(g.pages)]
            )
    return t, cells


def _plt_table(c: Campaign, rows: list[dict[str, Any]], metric: str) -> Table:
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
                    _num(paper_value(c, cond.name, sch.label, "plt_ms"), 0),
                    f"{got.loads} ({got.invalid})",
                ]
            )
    return t


PAGE_METRICS = ["plt_ms", "fcp_ms", "lcp_ms", "speed_index_ms", "atf_ms"]


def _page_metrics_table(c: Campaign, rows: list[dict[str, Any]]) -> Table:
    """PLT beside the paint and visual metrics (docs/formats.md, "Page metrics")."""
    m = an.means(rows, PAGE_METRICS)
    t = Table(
        "Page metrics in ms (mean over pages of each page's mean; 95% CI over pages)",
        ["condition", "scheme", "PLT", "FCP", "LCP", "Speed Index", "ATF", "loads (invalid)"],
    )
    for cond in c.conditions:
        for sch in c.schemes:
            got = [m.get((cond.name, sch.label, x)) for x in PAGE_METRICS]
            if got[0] is None:
                continue
            cells = [g.value.fmt(0) if g else "—" for g in got]
            t.rows.append([cond.name, sch.label, *cells, f"{got[0].loads} ({got[0].invalid})"])
    return t


def _hindsight_table(
    c: Campaign, rows: list[dict[str, Any]], gains: dict[tuple[str, str], an.Gain], metric: str
) -> Table:
    """analysis.hindsight: on each page the best of the listed schemes, chosen after the
    fact, beside the ideal: an optimistic bound on what choosing among them gives."""
    arms = list(c.analysis["hindsight"])
    base = c.analysis.get("baseline", "all-hbc")
    best = an.hindsight_best(rows, arms, metric=metric, baseline=base)
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


def _versus_table(
    c: Campaign, rows: list[dict[str, Any]], gains: dict[tuple[str, str], an.Gain], metric: str
) -> Table:
    """A candidate policy against a reference (issue 19: a new policy against Algorithm 1),
    cell by cell: both gains over the baseline, their paired difference in points, the
    share of the ideal's gain each takes, the LLC's share of bytes each uses, and whether
    the candidate is more than 2% slower than the baseline (mean gain < -2%)."""
    cand, ref = c.analysis["versus"]["candidate"], c.analysis["versus"]["reference"]
    base = c.analysis["baseline"]
    diffs = an.gain_differences(rows, cand, ref, metric=metric, baseline=base)
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
                f"{_num(gc.llc_bytes_pct if gc else None)} / {_num(gr.llc_bytes_pct if gr else None)}",
                slower,
                str(d[1]) if d else "—",
            ]
        )
    return t


def _llc_usage_table(c: Campaign, rows: list[dict[str, Any]]) -> Table:
    """What crossed the LLC per page load, up and down (HotMobile'21 Table 1): kB and the
    mean rate over the load (mean over pages of each page's mean, 95% CI over pages), the
    p90 of the rate over loads, and the paper's mean rates where it gives them
    (`paper.values[condition][scheme].llc_up_mbit / llc_down_mbit`)."""
    usage = an.with_llc_usage(rows)
    m = an.means(usage, an.LLC_USAGE)
    t = Table(
        "LLC use per page load (link counters; mean over pages, 95% CI over pages), ours / paper",
        [
            "condition",
            "scheme",
            "kB up",
            "kB down",
            "Mbit/s up",
            "Mbit/s down",
            "p90 Mbit/s up / down",
            "paper Mbit/s up / down",
            "loads",
        ],
    )
    for cond in c.conditions:
        for sch in c.schemes:
            found = [m.get((cond.name, sch.label, x)) for x in an.LLC_USAGE]
            got = [g for g in found if g is not None]
            if len(got) < len(found):  # all four come from the same rows: none or all
                continue
            mine = [
                r for r in usage if an.condition_of(r) == cond.name and an.arm_of(r) == sch.label
            ]
            p90 = [an.percentile([float(r[k]) for r in mine], 90) for k in an.LLC_USAGE[2:]]
            paper = [paper_value(c, cond.name, sch.label, k) for k in an.LLC_USAGE[2:]]
            t.rows.append(
                [
                    cond.name,
                    sch.label,
                    got[0].value.fmt(1),
                    got[1].value.fmt(1),
                    got[2].value.fmt(2),
                    got[3].value.fmt(2),
                    f"{_num(p90[0], 2)} / {_num(p90[1], 2)}",
                    f"{_num(paper[0], 2)} / {_num(paper[1], 2)}",
                    str(got[0].loads),
                ]
            )
    return t


def _stats_table(c: Campaign, rows: list[dict[str, Any]]) -> Table:
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
                ours = _num(an.percentile(vals, 50), 0) if vals else "—"
                cells.append(f"{ours} / {_num(paper_value(c, cond.name, sch.label, name), 0)}")
            if any(not x.startswith("— / —") for x in cells):
                t.rows.append([cond.name, sch.label, *cells])
    return t


def _item_gain_table(title: str, item: str, gain_columns: list[str]) -> Table:
    """A paired-gain table per (condition, item, scheme): `gain_columns`, then the pairs
    and the invalid loads (scheme / baseline) each gain rests on."""
    return Table(title, ["condition", item, "scheme", *gain_columns, "pairs", "invalid"])


def _item_gain_row(
    cond: Condition, item: str, arm: str, g: an.Gain, gain_cells: list[str]
) -> list[str]:
    """A row of an _item_gain_table: `gain_cells` under its gain_columns."""
    return [cond.name, item, arm, *gain_cells, str(g.pairs), f"{g.invalid_arm} / {g.invalid_base}"]


def _app_table(
    c: Campaign, rows: list[dict[str, Any]], metric: str
) -> tuple[Table, list[dict[str, Any]]]:
    """Interaction response time gain per interaction (items = app profiles) and overall."""
    base = c.analysis.get("baseline", "all-hbc")
    t = _item_gain_table(
        f"Interaction response time ({metric}) gain against {base}: mean over apps, 95% CI over apps",
        "interaction",
        ["gain % [CI]", "paper %", "gain ms [CI]"],
    )
    groups = [*c.workload.interactions, "all"]
    points: list[dict[str, Any]] = []
    for inter in groups:
        sub = rows if inter == "all" else [r for r in rows if an.item_of(r).endswith("/" + inter)]
        gains = an.paired_gains(sub, metric=metric, baseline=base)
        key = "gain_pct" if inter == "all" else f"{inter}_gain_pct"
        for cond, arm, g in _measured(c, gains, base):
            cells = [
                g.gain_pct.fmt(1, "%"),
                _num(paper_value(c, cond.name, arm, key)),
                g.gain_ms.fmt(0),
            ]
            t.rows.append(_item_gain_row(cond, inter, arm, g, cells))
            label = inter if len(c.conditions) == 1 else f"{cond.name} {inter}"
            points.append(
                {
                    "condition": label,
                    "x": {},
                    "arm": arm,
                    "gain_pct": g.gain_pct,
                    "gain_ms": g.gain_ms,
                    "paper_pct": paper_value(c, cond.name, arm, key),
                }
            )
    return t, points
