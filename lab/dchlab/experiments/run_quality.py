"""Run-quality rules: what a reader must know about how a campaign's loads were taken
before trusting its tables.

Loads excluded as invalid, counted by kind of reason; measurements taken while the
machine was busy with other work; arms measured hours apart from the baseline loads
they are paired with; what the measurements cost in machine time.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Summary


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
        total = (an.stats_of(r).get("timing") or {}).get("load", {}).get("total")
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


def counts(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(loads, invalid loads, runner failures): the newest measurement of each cell
    counts once; a row with `error` set is a failure, not a load."""
    failed = sum(1 for r in rows if r.get("error"))
    meas = an.latest_per_cell(rows)
    invalid = sum(1 for r in meas if r.get("valid") is False)
    return len(meas), invalid, failed
