"""The HTML report: one self-contained page, our numbers beside the paper's.

For every campaign file under experiments/ (and every other campaign found in the
store): the description, the tables from `summary`, a matplotlib plot inlined as a
base64 PNG (paper values as black crosses), the provenance of the rows behind it
(code revisions, corpus, channel profiles and trace offsets, Chromium and kernel
versions, host, time span) and the exact command that reruns it.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import io
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from dchlab.experiments import scorecard as sc
from dchlab.experiments import store
from dchlab.experiments.analysis import latest_per_cell, unpaired
from dchlab.experiments.campaign import Campaign, CampaignError, load_campaign
from dchlab.experiments.summary import (
    Summary,
    cautions,
    cost_text,
    exclusion_text,
    summarize,
)
from dchlab.paths import repo_root

log = logging.getLogger(__name__)


def default_output() -> Path:
    return repo_root() / "reports" / "index.html"


# ---------------------------------------------------------------- plots


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _finite(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def plot_gain_bars(s: Summary) -> str | None:
    pts = s.plot.get("points") or []
    if not pts:
        return None
    conds = list(dict.fromkeys(p["condition"] for p in pts))
    arms = list(dict.fromkeys(p["arm"] for p in pts))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(conds) * max(1, len(arms)) / 3), 3.8))
    width = 0.8 / len(arms)
    for j, arm in enumerate(arms):
        xs, ys, lo, hi, px, py = [], [], [], [], [], []
        for i, cond in enumerate(conds):
            for p in pts:
                if p["condition"] == cond and p["arm"] == arm:
                    g = p["gain_pct"]
                    x = i - 0.4 + width * (j + 0.5)
                    if _finite(g.mean):
                        xs.append(x)
                        ys.append(g.mean)
                        lo.append(g.mean - g.lo)
                        hi.append(g.hi - g.mean)
                    if p.get("paper_pct") is not None:
                        px.append(x)
                        py.append(p["paper_pct"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=arm)
        if px:
            ax.plot(px, py, "kx", markersize=8, mew=2, label="paper")
    _dedupe_legend(ax)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(range(len(conds)), conds)
    what = {"irt_ms": "IRT", "total_ms": "completion time"}.get(
        str(s.campaign.analysis.get("metric", "plt_ms")), "PLT"
    )
    ax.set_ylabel(f"{what} gain vs {s.campaign.analysis.get('baseline', 'all-hbc')} (%)")
    ax.set_title(s.campaign.name)
    return _png(fig)


def _dedupe_legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lbl in zip(handles, labels, strict=True):
        seen.setdefault(lbl, h)
    ax.legend(list(seen.values()), list(seen), fontsize=7, ncol=3)


#: An arm whose mean is more than this many times the smallest arm's gets its own panel,
#: so that one slow scheme (all-llc's 10 s) does not flatten the others into slivers.
OWN_PANEL_RATIO = 3.0


def panels_by_scale(means: dict[str, float], ratio: float = OWN_PANEL_RATIO) -> list[list[str]]:
    """Arms grouped into panels of comparable scale, in their order: the arms within
    `ratio` of the smallest mean, then (if any) the slower ones in a panel of their own."""
    finite = [v for v in means.values() if _finite(v) and v > 0]
    if not finite:
        return [list(means)]
    floor = min(finite)
    near = [a for a, v in means.items() if not (_finite(v) and v > ratio * floor)]
    far = [a for a in means if a not in near]
    return [near, far] if far else [near]


def plot_plt_bars(s: Summary) -> str | None:
    """Mean PLT per scheme (baseline included) with CIs; the paper's PLTs as crosses.
    A scheme far slower than the others is drawn in its own panel, on its own scale."""
    from dchlab.experiments.summary import paper_value

    means = s.plot.get("means") or {}
    if not means:
        return None
    c = s.campaign
    metric = str(c.analysis.get("metric", "plt_ms"))
    conds = [cd.name for cd in c.conditions if any(k[0] == cd.name for k in means)]
    arms = [sch.label for sch in c.schemes]
    worst = {
        arm: max(
            (m.value.mean for k, m in means.items() if k[1] == arm and _finite(m.value.mean)),
            default=math.nan,
        )
        for arm in arms
    }
    panels = panels_by_scale(worst)
    sizes = [max(1, len(p)) for p in panels]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(max(6.0, 1.4 * len(conds) * len(arms) / 3), 3.8),
        squeeze=False,
        gridspec_kw={"width_ratios": sizes},
    )
    for ax, panel in zip(axes[0], panels, strict=True):
        width = 0.8 / len(panel)
        for j, arm in enumerate(panel):
            xs, ys, lo, hi, px, py = [], [], [], [], [], []
            for i, cond in enumerate(conds):
                x = i - 0.4 + width * (j + 0.5)
                got = means.get((cond, arm, metric))
                if got is not None and _finite(got.value.mean):
                    xs.append(x)
                    ys.append(got.value.mean)
                    lo.append(got.value.mean - got.value.lo)
                    hi.append(got.value.hi - got.value.mean)
                pv = paper_value(c, cond, arm, "plt_ms")
                if pv is not None:
                    px.append(x)
                    py.append(pv)
            color = f"C{arms.index(arm)}"
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=arm, color=color)
            if px:
                ax.plot(px, py, "kx", markersize=8, mew=2, label="paper")
        _dedupe_legend(ax)
        ax.set_xticks(range(len(conds)), conds, fontsize=8)
    axes[0][0].set_ylabel("mean page load time (ms)")
    if len(panels) > 1:
        axes[0][-1].set_title("own scale", fontsize=8)
    fig.suptitle(c.name)
    return _png(fig)


def plot_sweep(s: Summary) -> str | None:
    pts = [p for p in s.plot.get("points") or [] if "value" in (p.get("x") or {})]
    if not pts:
        return plot_gain_bars(s)
    sweeps = list(dict.fromkeys(str(p["x"].get("sweep", "")) for p in pts))
    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.2 * len(sweeps), 3.6), squeeze=False)
    for ax, sweep in zip(axes[0], sweeps, strict=True):
        sub = [p for p in pts if str(p["x"].get("sweep", "")) == sweep]
        for arm in dict.fromkeys(p["arm"] for p in sub):
            line = sorted((p for p in sub if p["arm"] == arm), key=lambda p: float(p["x"]["value"]))
            xs = [float(p["x"]["value"]) for p in line]
            ys = [p["gain_pct"].mean for p in line]
            lo = [p["gain_pct"].lo for p in line]
            hi = [p["gain_pct"].hi for p in line]
            (h,) = ax.plot(xs, ys, "o-", label=arm)
            ax.fill_between(xs, lo, hi, alpha=0.2, color=h.get_color())
            paper = [
                (float(p["x"]["value"]), p["paper_pct"])
                for p in line
                if p.get("paper_pct") is not None
            ]
            if paper:
                ax.plot(*zip(*paper, strict=True), "x", color=h.get_color(), markersize=9, mew=2)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel(sweep)
        ax.set_ylabel("PLT gain (%)")
        ax.legend(fontsize=7)
    fig.suptitle(f"{s.campaign.name} (x = paper)")
    return _png(fig)


def plot_phases(s: Summary) -> str | None:
    means, metrics = s.plot.get("means") or {}, s.plot.get("metrics") or []
    if not means:
        return None
    c = s.campaign
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(c.schemes)
    for j, sch in enumerate(c.schemes):
        for cond in c.conditions[:1]:
            xs, ys, err, px, py = [], [], [], [], []
            for i, m in enumerate(metrics):
                got = means.get((cond.name, sch.label, m))
                x = i - 0.4 + width * (j + 0.5)
                if got and _finite(got.value.mean):
                    xs.append(x)
                    ys.append(got.value.mean)
                    err.append([got.value.mean - got.value.lo, got.value.hi - got.value.mean])
                from dchlab.experiments.summary import paper_value

                pv = paper_value(c, cond.name, sch.label, m)
                if pv is not None:
                    px.append(x)
                    py.append(pv)
            yerr = list(zip(*err, strict=True)) if err else None
            ax.bar(xs, ys, width, yerr=yerr, capsize=2, label=sch.label)
            if px:
                ax.plot(px, py, "kx", markersize=8, mew=2, label="paper")
    ax.set_xticks(range(len(metrics)), [m.removesuffix("_ms") for m in metrics])
    ax.set_ylabel("ms")
    _dedupe_legend(ax)
    ax.set_title(c.name)
    return _png(fig)


def plot_bulk(s: Summary) -> str | None:
    pts = s.plot.get("points") or []
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for arm in dict.fromkeys(p["arm"] for p in pts):
        line = sorted((p for p in pts if p["arm"] == arm), key=lambda p: p["size"])
        xs = [p["size"] for p in line]
        (h,) = ax.plot(xs, [p["gain_pct"].mean for p in line], "o-", label=arm)
        ax.fill_between(
            xs,
            [p["gain_pct"].lo for p in line],
            [p["gain_pct"].hi for p in line],
            alpha=0.2,
            color=h.get_color(),
        )
    ax.set_xscale("log")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("file size (bytes)")
    ax.set_ylabel("completion time gain (%)")
    return _titled_png(fig, ax, s)


def _titled_png(fig: Any, ax: Any, s: Summary) -> str:
    """A one-panel plot finished the report's way: legend, the campaign as title."""
    ax.legend(fontsize=7)
    ax.set_title(s.campaign.name)
    return _png(fig)


def plot_cdf(s: Summary) -> str | None:
    samples: dict[tuple[str, str], list[float]] = s.plot.get("samples") or {}
    if not samples:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (cond, arm), vals in sorted(samples.items()):
        xs = sorted(vals)
        ax.step(
            xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=f"{cond} {arm}"
        )
    ax.set_xlabel(s.plot.get("xlabel") or "reward estimation error (ms)")
    ax.set_ylabel("CDF")
    return _titled_png(fig, ax, s)


def plot_heatmap(s: Summary) -> str | None:
    """One heatmap per (metric, scheme): rows network A, columns network B, colour the
    median improvement over the better single network (annotated; blank: not run)."""
    cells_by_metric = s.plot.get("cells") or {}
    panels = [
        (m, arm)
        for m, cells in cells_by_metric.items()
        for arm in dict.fromkeys(k[2] for k in cells)
    ]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    for ax, (m, arm) in zip(axes[0], panels, strict=True):
        cells = {k[:2]: g for k, g in cells_by_metric[m].items() if k[2] == arm}
        rows_a = list(dict.fromkeys(k[0] for k in cells))
        cols_b = list(dict.fromkeys(k[1] for k in cells))
        grid = np.full((len(rows_a), len(cols_b)), np.nan)
        for (a, b), g in cells.items():
            grid[rows_a.index(a), cols_b.index(b)] = g.improvement_pct.mean
        lim = max(5.0, float(np.nanmax(np.abs(grid)))) if np.isfinite(grid).any() else 5.0
        im = ax.imshow(grid, cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(cols_b)), cols_b, rotation=60, fontsize=6)
        ax.set_yticks(range(len(rows_a)), rows_a, fontsize=6)
        ax.set_xlabel("network B (HBC)")
        ax.set_ylabel("network A (LLC)")
        ax.set_title(f"{arm}: {m}", fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.7, label="% vs better single")
    fig.suptitle(f"{s.campaign.name}: median improvement over the better single network")
    return _png(fig)


_PLOTTERS = {
    "gain": plot_gain_bars,
    "reorder": plot_gain_bars,
    "plt": plot_plt_bars,
    "sweep": plot_sweep,
    "users": plot_sweep,
    "phases": plot_phases,
    "bulk": plot_bulk,
    "reward-error": plot_cdf,
    "realtime": plot_cdf,
    "app": plot_gain_bars,
    "heatmap": plot_heatmap,
}


# ---------------------------------------------------------------- provenance


def provenance(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """What the rows behind a section were made with (distinct values, most frequent first)."""
    meas = latest_per_cell(rows)
    if not meas:
        return []

    def distinct(key: str, limit: int = 6) -> str:
        counts: dict[str, int] = {}
        for r in meas:
            v = r.get(key)
            if v is None:
                continue
            counts[str(v)] = counts.get(str(v), 0) + 1
        items = sorted(counts.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{k} ({n})" if len(items) > 1 else k for k, n in items[:limit])
        more = f", … {len(items) - limit} more" if len(items) > limit else ""
        return (shown + more) or "—"

    ts = [r["ts"] for r in meas if r.get("ts") is not None]
    dirty = sum(1 for r in meas if r.get("code_dirty"))
    out = [
        ("rows (measurements)", str(len(meas))),
        (
            "code revision",
            distinct("code_rev") + (f"; {dirty} rows from a dirty tree" if dirty else ""),
        ),
        ("corpus", distinct("corpus")),
        ("HBC", distinct("hbc")),
        ("LLC", distinct("llc")),
        ("trace offsets (ms)", distinct("trace_offset_ms", 8)),
        ("seeds", distinct("seed")),
        ("congestion control", distinct("cc")),
        ("Chromium", distinct("chromium_version")),
        ("kernel", distinct("kernel_version")),
        ("host", distinct("hostname")),
        ("time span (UTC)", f"{min(ts)} … {max(ts)}" if ts else "—"),
    ]
    test_rows = sum(1 for r in meas if r.get("test_data"))
    if test_rows:
        out.insert(0, ("TEST DATA", f"{test_rows} rows are labelled test data, not measurements"))
    return out


@functools.lru_cache(maxsize=256)
def _profile_summary(spec: str, seed: int) -> dict[str, Any]:
    from dchlab.traces.profiles import profile_summary

    return profile_summary(spec, seed)


def channel_summaries(c: Campaign) -> list[dict[str, Any]]:
    """Profile summaries (mean RTT, rates, loss, trace period) of the campaign's channel specs."""
    out, seen = [], set()
    for cond in c.conditions:
        for role, spec in (("HBC", cond.hbc), ("LLC", cond.llc)):
            if spec in seen:
                continue
            seen.add(spec)
            try:
                ps = _profile_summary(spec, c.seed)
            except Exception as e:  # a missing trace file must not sink the whole report
                out.append({"role": role, "spec": spec, "summary": f"unavailable: {e}"})
                continue
            keep = (
                "description",
                "mean_rtt_ms",
                "up_mbit",
                "down_mbit",
                "rtt_p50",
                "rtt_p95",
                "cov",
            )
            text = ", ".join(f"{k}={ps[k]}" for k in keep if ps.get(k) not in (None, ""))
            out.append({"role": role, "spec": spec, "summary": text})
    return out


# ---------------------------------------------------------------- page

_TEMPLATE = jinja2.Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>dchannel — results beside the NSDI'23 paper</title>
<style>
body{font-family:system-ui,sans-serif;max-width:1840px;margin:2em auto;padding:0 1em;color:#222}
h2{border-bottom:2px solid #ccc;padding-top:1em} table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right} th{background:#f3f3f3}
td:first-child,td:nth-child(2){text-align:left} code{background:#f3f3f3;padding:1px 4px}
.warn{background:#fff3cd;padding:.5em;border-left:4px solid #e0a800} .muted{color:#777}
img{max-width:100%} .prov td{text-align:left}
.top{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start} .card table{font-size:12px}
.card td{padding:1px 5px;white-space:nowrap} .card td.why{text-align:left;font-size:11px;white-space:normal;min-width:22em;max-width:30em}
.card{flex:1 1 0;min-width:0} .featured{flex:0 0 28em;max-width:28em;overflow-x:auto} .featured table{font-size:11px} tr.differs td:nth-child(6) a{color:#a33} tr.reproduced td:nth-child(6) a{color:#262}
</style></head><body>
<h1>dchannel — our numbers beside the NSDI'23 paper</h1>
{% if card %}<div class="top"><div class="card" id="scorecard">
<p><b>Scorecard: {{ card_tally }}</b>, from <code>{{ card_source }}</code>. <span class="muted">{{ card_rule }}</span></p>
<table><tr>{% for c in card_columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in card %}<tr class="{{ r.cls }}">{% for v in r.cells %}<td>{{ v }}</td>{% endfor %}<td><a href="#{{ r.campaign }}">{{ r.verdict }}</a></td><td class="why">{{ r.why }}{% if r.why %} <a href="{{ r.doc }}">§</a>{% endif %}</td></tr>{% endfor %}
</table></div>
{% for s in featured %}<div class="featured"><h3>This run: {{ s.name }}</h3>
{% if s.png %}<img alt="{{ s.name }} plot" src="data:image/png;base64,{{ s.png }}">{% endif %}
{% for t in s.tables[:2] %}<table><caption>{{ t.title }}</caption>
<tr>{% for c in t.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in t.rows %}<tr>{% for v in r %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>{% endfor %}<p class="muted">{{ s.counts }}</p></div>{% endfor %}
</div>{% endif %}
<p class="muted">Generated {{ generated }} from <code>{{ store_path }}</code>.
Gains are paired: per page and trial every scheme ran over the same trace sub-sequence;
the headline is the mean over pages of each page's mean difference against the baseline,
with a 95% percentile-bootstrap CI resampling pages (seed {{ boot_seed }}). Invalid loads
(failed resources, certificate errors, timeouts) are counted and excluded, never averaged.</p>
<ul>{% for s in sections %}<li><a href="#{{ s.name }}">{{ s.name }}</a> — {{ s.status }}</li>{% endfor %}</ul>
{% for s in sections %}
<h2 id="{{ s.name }}">{{ s.name }}{% if s.source %} <span class="muted">({{ s.source }})</span>{% endif %}</h2>
<p>{{ s.description }}</p>
{% if s.warning %}<p class="warn">{{ s.warning }}</p>{% endif %}
<p>Rerun: <code>{{ s.rerun }}</code>{% if s.rerun_quick %} &nbsp; quick subset: <code>{{ s.rerun_quick }}</code>{% endif %}</p>
{% if s.counts %}<p>{{ s.counts }}</p>{% endif %}
{% if s.png %}<img alt="{{ s.name }} plot" src="data:image/png;base64,{{ s.png }}">{% endif %}
{% for t in s.tables %}<table><caption>{{ t.title }}</caption>
<tr>{% for c in t.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in t.rows %}<tr>{% for v in r %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>{% endfor %}
{% if s.notes %}<p><b>Paper:</b></p><ul>{% for n in s.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
{% if s.channels %}<table class="prov"><caption>Channels</caption><tr><th>role</th><th>spec</th><th>profile</th></tr>
{% for ch in s.channels %}<tr><td>{{ ch.role }}</td><td>{{ ch.spec }}</td><td>{{ ch.summary }}</td></tr>{% endfor %}</table>{% endif %}
{% if s.provenance %}<table class="prov"><caption>Provenance of these rows</caption>
{% for k, v in s.provenance %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>{% endif %}
{% endfor %}
</body></html>
""",
    autoescape=True,
)


#: The paper's order; other campaign files follow alphabetically.
PAPER_ORDER = [
    "demo",
    "table2",
    "fig3",
    "fig5_table3",
    "fig6",
    "fig7",
    "table4",
    "table5",
    "fig8",
    "fig9",
    "fig10",
    "fig11",
]


def campaign_files(directory: Path | None = None) -> list[Path]:
    d = directory or repo_root() / "experiments"
    rank = {n: i for i, n in enumerate(PAPER_ORDER)}
    return sorted(d.glob("*.yaml"), key=lambda p: (rank.get(p.stem, len(rank)), p.stem))


def section(
    c: Campaign,
    rows: list[dict[str, Any]],
    with_channels: bool = True,
    reruns: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    q = c.quick()
    sec: dict[str, Any] = {
        "name": c.name,
        "source": c.paper.get("source", ""),
        "description": c.description,
        "rerun": c.rerun_command(),
        "rerun_quick": q.rerun_command() if c.quick_spec else "",
        # profile summaries read whole traces (seconds per scenario): only for run campaigns
        "channels": channel_summaries(c) if with_channels and rows else [],
        "tables": [],
        "notes": list(c.paper.get("notes", [])),
        "provenance": provenance(rows),
    }
    if not rows:
        sec.update(status="not run yet", warning=f"No results yet. Run `{sec['rerun']}`.")
        return sec
    s = summarize(c, rows, reruns)
    bad = unpaired(rows)
    if bad:
        sec["warning"] = (
            f"{len(bad)} (condition, page, trial) groups are not paired — their schemes saw "
            f"different trace offsets: {'; '.join(bad[:3])}"
        )
    sec["tables"] = s.tables
    sec["notes"] = s.notes
    sec["counts"] = (
        f"{s.loads} measurements ({s.invalid} invalid, excluded), {s.failed} failed runs (not "
        f"measurements). {exclusion_text(s)}."
    )
    cost = cost_text(rows)
    if cost:
        sec["counts"] += f" {cost[0].upper()}{cost[1:]}."
    for caution in cautions(c, rows):
        sec["counts"] += f" {caution[0].upper()}{caution[1:]}."
    sec["status"] = f"{s.loads} measurements"
    if s.failed and not s.loads:
        errs = sorted({str(r.get("error")) for r in rows if r.get("error")})[:3]
        sec["warning"] = "Every run failed: " + "; ".join(errs)
    try:
        sec["png"] = _PLOTTERS[s.plot["kind"]](s)
    except Exception as e:  # a plot bug must not hide the tables
        log.warning("plot for %s failed: %s", c.name, e)
        sec["warning"] = f"plot failed: {e}"
    return sec


def scorecard_rows(scores: Sequence[sc.Score], out_path: Path) -> list[dict[str, Any]]:
    """The scorecard's rows for the page: cells, the verdict linking to the campaign's
    section, the reason linking to the docs/results.md section that measures it."""
    import os

    docs = Path(os.path.relpath(repo_root() / "docs" / "results.md", out_path.parent))
    return [
        {
            "cells": cells[:5],
            "verdict": cells[5],
            "why": cells[6],
            "cls": s.verdict.replace(" ", "-"),
            "campaign": s.claim.campaign,
            "doc": f"{docs.as_posix()}#{s.claim.section}",
        }
        for s, cells in zip(scores, sc.table_rows(scores), strict=True)
    ]


def build_report(
    store_path: str | Path | None = None,
    out: str | Path | None = None,
    files: Sequence[Path] | None = None,
    with_channels: bool = True,
    source: str | None = None,
    scores: Sequence[sc.Score] | None = None,
    featured: Sequence[str] = (),
    only_run: bool = False,
    scores_source: str | None = None,
) -> Path:
    """Write the HTML report; returns its path. `source` names where the rows came
    from when that is not the store file itself (e.g. the published Parquet files).

    The page opens on the scorecard (`scores`, by default computed from the same
    store); the sections of the campaigns named in `featured` (the demo's) are shown
    beside it as well as in their place. `only_run` leaves out the campaigns the store
    has no rows of (the demo's report: its store holds the demo alone); `scores_source`
    names where `scores` came from when not from this store."""
    from dchlab.experiments.analysis import DEFAULT_SEED

    out_path = Path(out) if out else default_output()
    if scores is None:
        scores = sc.store_scorecard(store_path)
    sections: list[dict[str, Any]] = []
    seen: set[str] = set()
    for f in files if files is not None else campaign_files():
        try:
            c = load_campaign(f, check_channels=False)
        except CampaignError as e:
            sections.append(
                {"name": f.stem, "status": "invalid file", "warning": str(e), "tables": []}
            )
            continue
        seen.add(c.name)
        reruns = store.reruns_of(c.name, store_path)
        seen.update(reruns)  # shown beside their original, with its definition
        rows = store.load_rows(c.name, store=store_path)
        sections.append(section(c, rows, with_channels, reruns))
        for name, rr in sorted(reruns.items()):
            sections.append(section(c.as_rerun(name, rr), rr, with_channels=False))
    for name in store.campaigns(store_path):
        if name not in seen and not only_run:
            orphan: dict[str, Any] = {
                "name": name,
                "status": "in the store, no campaign file",
                "warning": "Rows of a campaign with no file under experiments/; see `dch results --campaign "
                + name
                + "`.",
                "tables": [],
                "provenance": provenance(store.load_rows(name, store=store_path)),
            }
            sections.append(orphan)
    if only_run:
        sections = [s for s in sections if s.get("status") != "not run yet"]
    page = _TEMPLATE.render(
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        store_path=source or store.resolve_path(store_path),
        boot_seed=DEFAULT_SEED,
        sections=sections,
        featured=[s for s in sections if s["name"] in featured and s.get("tables")],
        card=scorecard_rows(scores, out_path),
        card_tally=sc.tally(scores),
        card_source=scores_source or source or store.resolve_path(store_path),
        card_rule=sc.RULE,
        card_columns=sc.COLUMNS,
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(page)
    tmp.replace(out_path)
    return out_path
