"""The N-device testbed (issue 41 item 4, experiments/urllc_share.yaml) against llcsim
at the same (C, N, rule): what both can measure.

Testbed rows (scheme dchannel): the measured device's share of packets on the LLC,
`pkts_llc / (pkts_llc + pkts_hbc)`, and the shared LLC link's delay beyond its base
(`stats.links.llc.{uplink,downlink}.delay_ms` p50 / p99 minus the base; it includes
the packet's own transmission). llcsim: the users' mean `llc_frac` over page loads
and the cell's wait p50 / p99 (means over seeds). The testbed's `x.rule` names map to
llcsim's rules: none -> none, token-bucket -> share; other rules have no counterpart.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dchlab.experiments.analysis import bootstrap_mean

#: The testbed campaign's rule names (x.rule) that llcsim simulates, as llcsim names them.
RULE_NAMES = {"none": "none", "token-bucket": "share"}


@dataclass(frozen=True)
class Point:
    """One (C, N, rule) of either side: means over its rows."""

    llc_frac: float
    delay_p50_ms: float  # testbed: mean of up and down link delay beyond the base
    delay_p99_ms: float
    rows: int


def _mean(values: list[float]) -> float:
    return statistics.mean(values) if values else float("nan")


def testbed_points(
    rows: Iterable[Mapping[str, Any]], base_ms: float
) -> dict[tuple[float, int, str], Point]:
    """The testbed's dchannel rows by (C Mbit/s, devices, llcsim rule)."""
    acc: dict[tuple[float, int, str], tuple[list[float], list[float], list[float]]] = {}
    for r in rows:
        if r.get("scheme") != "dchannel":
            continue
        x = json.loads(r["x"]) if isinstance(r["x"], str) else r["x"]
        rule = RULE_NAMES.get(str(x.get("rule")))
        if rule is None or r.get("devices") is None:
            continue
        key = (float(x["llc_mbit"]), int(r["devices"]), rule)
        frac, p50, p99 = acc.setdefault(key, ([], [], []))
        llc, hbc = r.get("pkts_llc"), r.get("pkts_hbc")
        if llc is not None and hbc is not None and llc + hbc > 0:
            frac.append(llc / (llc + hbc))
        stats = json.loads(r["stats"]) if isinstance(r["stats"], str) else r["stats"]
        link = (stats or {}).get("links", {}).get("llc")
        if link:
            delays = [link[d]["delay_ms"] for d in ("uplink", "downlink")]
            p50.append(_mean([d["p50"] - base_ms for d in delays]))
            p99.append(_mean([d["p99"] - base_ms for d in delays]))
    return {k: Point(_mean(f), _mean(a), _mean(b), len(f)) for k, (f, a, b) in acc.items()}


def sim_points(
    cells: Iterable[Mapping[str, Any]], pages: Iterable[Mapping[str, Any]]
) -> dict[tuple[float, int, str], Point]:
    """llcsim's grid by (C Mbit/s, users, rule): mean llc_frac of its page loads and the
    cells' mean wait p50 / p99."""
    fracs: dict[tuple[float, int, str], list[float]] = {}
    for p in pages:
        fracs.setdefault((float(p["capacity_mbit"]), int(p["users"]), p["rule"]), []).append(
            float(p["llc_frac"])
        )
    waits: dict[tuple[float, int, str], tuple[list[float], list[float]]] = {}
    for c in cells:
        key = (float(c["capacity_mbit"]), int(c["users"]), c["rule"])
        p50, p99 = waits.setdefault(key, ([], []))
        if c["wait_p50_ms"] is not None:
            p50.append(float(c["wait_p50_ms"]))
            p99.append(float(c["wait_p99_ms"]))
    return {
        k: Point(_mean(fracs.get(k, [])), _mean(a), _mean(b), len(fracs.get(k, [])))
        for k, (a, b) in waits.items()
    }


# ------------------------------------------------- per background load (dch sim compare-testbed)
#
# The testbed's rows of a study without the sharing rules (urllc_share-partial: rule none
# throughout) differ in what the other N-1 devices do, which the row's
# `stats.background.think` names: "exp:30" (3GPP2 reading time), "fixed:0" (back to back),
# "idle" (no background user), absent when N = 1. llcsim's users are all alike, and its
# grid has one mean think time (`think_s`, exponential): a testbed load kind is set
# against the grid with the same mean think; idle devices and a lone device against
# llcsim's N = 1 (only the measured device sends).

#: The load kind of rows without background users (N = 1).
ALONE = "alone"
#: The load kind whose background devices send nothing (issue 41's "idle but one" check).
IDLE = "idle"


def think_mean_s(kind: str) -> float | None:
    """Mean think time (s) of a testbed background-load spec ("exp:30" -> 30.0, "fixed:0"
    -> 0.0); None for `alone` and `idle`, which have no background pages."""
    if kind in (ALONE, IDLE):
        return None
    dist, sep, value = kind.partition(":")
    try:
        mean = float(value)
    except ValueError:
        mean = -1.0
    if not sep or dist not in ("exp", "fixed") or mean < 0:
        raise ValueError(
            f"background think {kind!r}: expected exp:<s> or fixed:<s> (s >= 0), {IDLE!r} or {ALONE!r}"
        )
    return mean


@dataclass(frozen=True)
class Estimate:
    """A mean over the testbed's loads with its 95 % bootstrap interval."""

    mean: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class BedPoint:
    """The measured device at one (scenario, C, N, load kind) of the testbed."""

    llc_frac: Estimate
    delay_p50_ms: Estimate  # shared LLC link, release - arrival, beyond the base
    delay_p99_ms: Estimate
    tx_ms: float  # mean over loads of the link's mean packet's transmission time at C


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _estimate(values: list[float]) -> Estimate:
    if not values:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    ci = bootstrap_mean(values)
    return Estimate(ci.mean, ci.lo, ci.hi, ci.n)


def load_kind(row: Mapping[str, Any]) -> str:
    """The row's background load: its `stats.background.think`, or `alone` without one."""
    background = (_json(row.get("stats")) or {}).get("background") or {}
    think = background.get("think")
    return str(think) if think else ALONE


def link_delay_beyond_base(llc: Mapping[str, Any], q: str, base_ms: float) -> float:
    """The shared LLC link's delay percentile `q` ("p50", "p99") beyond `base_ms`, both
    directions pooled by weighting each direction's percentile with its packets (the
    link reports the directions apart; llcsim's wait is one histogram of both)."""
    dirs = [llc[d] for d in ("uplink", "downlink")]
    pkts = [float(d.get("pkts_in") or 0) for d in dirs]
    if sum(pkts) == 0:
        return float("nan")
    return sum(w * (d["delay_ms"][q] - base_ms) for w, d in zip(pkts, dirs, strict=True)) / sum(
        pkts
    )


def link_mean_tx_ms(llc: Mapping[str, Any], capacity_mbit: float) -> float:
    """Transmission time (ms) of the link's mean packet (both directions) at C: the part
    of the testbed's link delay that llcsim's wait (queueing only) does not hold."""
    pkts = sum(float(llc[d].get("pkts_in") or 0) for d in ("uplink", "downlink"))
    size = sum(float(llc[d].get("bytes_in") or 0) for d in ("uplink", "downlink"))
    return size * 8 / pkts / (capacity_mbit * 1e3) if pkts else float("nan")


def row_rule(row: Mapping[str, Any]) -> str | None:
    """The llcsim rule a testbed row ran under: its testbed's `llc_share`
    (`stats.llc_share`; absent in rows from before the rules: none), mapped by
    RULE_NAMES; None for a rule llcsim does not simulate (probe, priority)."""
    applied = (_json(row.get("stats")) or {}).get("llc_share") or "none"
    return RULE_NAMES.get(str(applied))


def testbed_by_load(
    rows: Iterable[Mapping[str, Any]], scenario: str, base_ms: float, rule: str = "none"
) -> dict[tuple[float, int, str], BedPoint]:
    """The measured device's dchannel rows of `scenario` run under llcsim's `rule`
    (row_rule) by (C Mbit/s, devices, load kind): its share of packets on the LLC
    (`pkts_llc / (pkts_llc + pkts_hbc)`) and the shared LLC link's delay p50 / p99 beyond
    the base (`stats.links.llc`; the link carries every device's LLC packets, over the run
    from link start to teardown)."""
    acc: dict[tuple[float, int, str], tuple[list[float], list[float], list[float], list[float]]]
    acc = {}
    for r in rows:
        if r.get("scheme") != "dchannel" or r.get("error") or r.get("valid") is False:
            continue
        x = _json(r.get("x")) or {}
        if x.get("scenario", r.get("hbc")) != scenario or r.get("devices") is None:
            continue
        if row_rule(r) != rule:
            continue  # another sharing rule's rows (experiments/urllc_share.yaml has four)
        c = float(x["llc_mbit"])
        key = (c, int(r["devices"]), load_kind(r))
        frac, p50, p99, tx = acc.setdefault(key, ([], [], [], []))
        llc, hbc = r.get("pkts_llc"), r.get("pkts_hbc")
        if llc is not None and hbc is not None and llc + hbc > 0:
            frac.append(llc / (llc + hbc))
        link = ((_json(r.get("stats")) or {}).get("links") or {}).get("llc")
        if link:
            p50.append(link_delay_beyond_base(link, "p50", base_ms))
            p99.append(link_delay_beyond_base(link, "p99", base_ms))
            tx.append(link_mean_tx_ms(link, c))
    return {
        k: BedPoint(_estimate(f), _estimate(a), _estimate(b), _mean(t))
        for k, (f, a, b, t) in acc.items()
    }


@dataclass(frozen=True)
class SimPoint:
    """llcsim at one (C, N, rule) of a grid: means over its page loads and cells."""

    llc_frac: Estimate  # mean over every user's page loads, 95 % bootstrap CI over them
    wait_p50_ms: float  # the cell-wide LLC queueing wait, mean over seeds
    wait_p95_ms: float
    wait_p99_ms: float
    cells: int  # with an LLC packet


def sim_by_point(
    cells: Iterable[Mapping[str, Any]], pages: Iterable[Mapping[str, Any]], rule: str
) -> dict[tuple[float, int], SimPoint]:
    """A grid's cells and page loads of `rule` by (C Mbit/s, users)."""
    fracs: dict[tuple[float, int], list[float]] = {}
    for p in pages:
        if p["rule"] == rule:
            key = (float(p["capacity_mbit"]), int(p["users"]))
            fracs.setdefault(key, []).append(float(p["llc_frac"]))
    waits: dict[tuple[float, int], tuple[list[float], list[float], list[float]]] = {}
    for c in cells:
        if c["rule"] != rule:
            continue
        p50, p95, p99 = waits.setdefault((float(c["capacity_mbit"]), int(c["users"])), ([], [], []))
        if c["wait_p50_ms"] is not None:  # no LLC packet in the cell: no wait
            p50.append(float(c["wait_p50_ms"]))
            p95.append(float(c["wait_p95_ms"]))
            p99.append(float(c["wait_p99_ms"]))
    return {
        k: SimPoint(_estimate(fracs.get(k, [])), _mean(a), _mean(b), _mean(d), len(a))
        for k, (a, b, d) in waits.items()
    }


def sim_users(devices: int, kind: str) -> int:
    """llcsim's N for a testbed point: every device sends, except idle ones."""
    return 1 if kind == IDLE else devices


def pick_grid(kind: str, think_s_of_grid: Mapping[str, float]) -> str | None:
    """The grid (name -> its mean think time) a testbed load kind is set against: the
    one with the kind's mean think; for `alone` / `idle` (one sender, whose own think
    time is the only one left) the one with the longest think, the testbed's measured
    device loading once. None when no grid fits."""
    mean = think_mean_s(kind)
    if mean is None:
        return max(think_s_of_grid, key=lambda g: think_s_of_grid[g], default=None)
    return next((g for g, t in think_s_of_grid.items() if t == mean), None)


@dataclass(frozen=True)
class Comparison:
    """One line of `dch sim compare-testbed`: a testbed point, a grid point, or both."""

    capacity_mbit: float
    devices: int
    kind: str
    bed: BedPoint | None
    grid: str | None
    sim: SimPoint | None


def compare(
    bed: Mapping[tuple[float, int, str], BedPoint],
    grids: Mapping[str, Mapping[tuple[float, int], SimPoint]],
    think_s_of_grid: Mapping[str, float],
    sim_only: bool = False,
) -> list[Comparison]:
    """Every testbed point with its llcsim counterpart (None when no grid has it),
    ordered by C, load kind, N. With `sim_only`, also the grid's other N at the C and
    background load (of a think time) of a testbed point, without a testbed side (an N
    the testbed has at that C under another load, e.g. N = 1 alone, is not repeated)."""
    measured = {(c, n) for c, n, _ in bed}
    out = {}
    for c, n, kind in bed:
        name = pick_grid(kind, think_s_of_grid)
        sim = grids[name].get((c, sim_users(n, kind))) if name is not None else None
        out[(c, n, kind)] = Comparison(c, n, kind, bed[(c, n, kind)], name, sim)
        if sim_only and name is not None and think_mean_s(kind) is not None:
            for (gc, gn), point in grids[name].items():
                if gc == c and (c, gn) not in measured:
                    out[(c, gn, kind)] = Comparison(c, gn, kind, None, name, point)
    return [out[k] for k in sorted(out, key=lambda k: (k[0], k[2] != ALONE, k[2], k[1]))]


def _ci(e: Estimate | None) -> str:
    if e is None or e.n == 0:
        return "-"
    if e.n == 1:
        return f"{e.mean:.2f}"
    return f"{e.mean:.2f} [{e.lo:.2f}, {e.hi:.2f}]"


def _diff(sim: float, bed: Estimate | None) -> str:
    return "-" if bed is None or bed.n == 0 else f"{sim - bed.mean:+.2f}"


def table(rows: Iterable[Comparison]) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the comparison: per point the testbed's mean [95 % CI] over
    its loads, llcsim's value and llcsim minus the testbed's mean ("-": no such side)."""
    head = ["C Mbit/s", "N", "background", "loads", "LLC share: testbed", "llcsim", "sim loads", "diff",
            "p50 ms: testbed", "llcsim", "diff", "p99 ms: testbed", "llcsim p95", "llcsim p99",
            "diff p99", "testbed tx ms", "grid"]  # fmt: skip
    out = []
    for r in rows:
        b, s = r.bed, r.sim
        frac, p50, p99 = (b.llc_frac, b.delay_p50_ms, b.delay_p99_ms) if b else (None, None, None)
        left = [f"{r.capacity_mbit:g}", str(r.devices), r.kind, str(frac.n) if frac else "-"]
        if s is None:
            sim = ["-"] * 8
        else:
            sim = [
                _ci(s.llc_frac),
                str(s.llc_frac.n),
                _diff(s.llc_frac.mean, frac),
                f"{s.wait_p50_ms:.2f}",
                _diff(s.wait_p50_ms, p50),
                f"{s.wait_p95_ms:.2f}",
                f"{s.wait_p99_ms:.2f}",
                _diff(s.wait_p99_ms, p99),
            ]
        where = "-" if r.grid is None else f"{r.grid} N={sim_users(r.devices, r.kind)}"
        tx = f"{b.tx_ms:.2f}" if b else "-"
        share_cols = [_ci(frac), sim[0], sim[1], sim[2]]
        p50_cols = [_ci(p50), sim[3], sim[4]]
        p99_cols = [_ci(p99), sim[5], sim[6], sim[7]]
        out.append([*left, *share_cols, *p50_cols, *p99_cols, tx, where])
    return head, out
