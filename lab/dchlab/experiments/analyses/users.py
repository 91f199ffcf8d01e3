"""Analysis kind `users`: the paired gains of `sweep` over conditions that vary the
number of devices sharing one URLLC channel (issue 41), read per Mbit/s of URLLC.

Each condition says `x: {sweep: devices, value: N, llc_mbit: C, scenario: S, rule: R}`
(rule: the LLC sharing rule; N = 1 conditions are every rule's single-device
reference). After the gain table: per scheme, scenario, rule and C the gain at each N
with N / C users per Mbit/s and the share of the N = 1 gain it keeps; then where the
gain falls to half of the N = 1 gain: the smallest measured N / C whose gain's 95 % CI
lies at or below half the N = 1 mean gain (a mean below half with a CI above it is
noise, not a halving; not reached: the largest N / C measured, marked ">"), and beside
it the smallest N / C whose mean alone is below half (a point estimate, for when the
CIs are too wide to establish the halving).

The gain table also says what the machine did: all-hbc's mean PLT against N = 1's
(all-hbc puts nothing on the LLC and every device has its own HBC, so a slower all-hbc
at larger N is this machine's CPU, not the shared channel) and the rows' mean load
average (`host_load1`). Where all-hbc slows, the gain is measured on a loaded machine:
docs/results.md "URLLC shared by N devices" says where that starts and stops the study.
A point where all-hbc is more than `machine_limit` times slower than alone (the
analysis field; default 1.5) measures the machine, not the shared channel: it is
listed, marked "machine", but not searched for the halving, and "N measured" stops
before it (the issue's "say where the machine becomes the limit, and stop there").

Every point is judged against N = 1 **on its own pages**: when N = 1 was measured on
more pages than a point (a campaign extended with `--pages` for some conditions only),
the reference gain, its half and all-hbc's slowdown are those of N = 1's rows on the
point's pages (those with a valid pair of loads), shown in "N = 1 on its pages" (a point with pages N = 1 lacks is
compared with the whole N = 1); the halving table's "N = 1 gain %" is N = 1's gain
over all its pages.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import register
from dchlab.experiments.analyses.sweep import Sweep
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, compared_arms

Rows = list[dict[str, Any]]


def _coords(x: dict[str, Any]) -> tuple[str, float, int, str] | None:
    try:
        return str(x["scenario"]), float(x["llc_mbit"]), int(x["value"]), str(x.get("rule", "none"))
    except (KeyError, TypeError, ValueError):
        return None


#: Beyond this all-hbc slowdown against N = 1 a point measures the machine (module doc).
MACHINE_LIMIT = 1.5


def _mean_load(rows: Rows) -> dict[str, float]:
    """Mean `host_load1` per condition over the rows that have it."""
    loads: dict[str, list[float]] = {}
    for r in rows:
        v = r.get("host_load1")
        if isinstance(v, int | float) and v == v:
            loads.setdefault(str(r.get("condition")), []).append(float(v))
    return {k: sum(v) / len(v) for k, v in loads.items()}


def _paired_pages(rows: Rows, metric: str, baseline: str) -> dict[tuple[str, str], frozenset[str]]:
    """{(condition, arm): the pages (workload items) its gain counts}: an.page_gains' pages,
    those with at least one trial where both the arm's and the baseline's loads are valid."""
    out: dict[tuple[str, str], frozenset[str]] = {}
    for cond, arms in an.by_condition(rows).items():
        base = arms.get(baseline)
        for arm, items in arms.items():
            if base is not None and arm != baseline:
                out[(cond, arm)] = frozenset(an.page_gains(items, base, metric))
    return out


class _Reference:
    """N = 1's gain on the pages of the point it is compared with (module doc)."""

    def __init__(self, rows: Rows, metric: str, baseline: str) -> None:
        self._rows, self._metric, self._baseline = rows, metric, baseline
        self._pages = _paired_pages(rows, metric, baseline)
        self._memo: dict[tuple[str, str, frozenset[str]], an.Gain | None] = {}

    def on_pages_of(self, ref_name: str, arm: str, ref: an.Gain, point: str) -> an.Gain | None:
        pages = self._pages.get((point, arm))
        if not pages or pages >= self._pages.get((ref_name, arm), frozenset()):
            return ref  # the point has every page N = 1 has (or no rows): the whole reference
        key = (ref_name, arm, pages)
        if key not in self._memo:
            sub = [r for r in self._rows
                   if r.get("condition") == ref_name and str(r.get("item")) in pages]  # fmt: skip
            self._memo[key] = an.paired_gains(sub, metric=self._metric,
                                              baseline=self._baseline).get((ref_name, arm))  # fmt: skip
        return self._memo[key]


def users_tables(
    c: Campaign,
    gains: dict[tuple[str, str], an.Gain],
    rows: Rows | None = None,
    metric: str = "plt_ms",
) -> list[Table]:
    """The gain-per-users table and the halving table (module doc)."""
    per = Table("Gain against users per Mbit/s of URLLC (N devices share C Mbit/s)",
                ["scheme", "scenario", "rule", "C Mbit/s", "N", "users per Mbit/s",
                 "gain % [CI]", "N = 1 on its pages", "of the N = 1 gain",
                 "all-hbc PLT / N = 1's", "load average"])  # fmt: skip
    load = _mean_load(rows or [])
    baseline = c.analysis.get("baseline", "all-hbc")
    references = _Reference(rows or [], metric, baseline)
    limit = float(c.analysis.get("machine_limit", MACHINE_LIMIT))
    half = Table("Users per Mbit/s at which the gain falls to half of one device's",
                 ["scheme", "scenario", "rule", "C Mbit/s", "N = 1 gain %", "half reached at",
                  "N measured", "mean below half at"])  # fmt: skip
    conds = [(cond.name, xy) for cond in c.conditions if (xy := _coords(cond.x)) is not None]
    for arm in compared_arms(c, baseline):
        single = {(s, mb): (name, gains[(name, arm)]) for name, (s, mb, n, _) in conds
                  if n == 1 and (name, arm) in gains}  # fmt: skip
        groups: dict[tuple[str, str, float], list[tuple[int, str, an.Gain]]] = {}
        for name, (s, mb, n, rule) in conds:
            if (name, arm) in gains and n > 1:
                groups.setdefault((s, rule, mb), []).append((n, name, gains[(name, arm)]))
        for (s, rule, mb), points in sorted(groups.items()):
            ref_name, ref = single.get((s, mb), ("", None))
            series = ([(1, ref_name, ref)] if ref else []) + sorted(points, key=lambda p: p[0])
            whole = ref.gain_pct.mean if ref else None
            reached = None
            below: float | None = None
            measured: list[int] = []
            stopped = False
            for n, name, g in series:
                own = references.on_pages_of(ref_name, arm, ref, name) if ref else None
                base = own.gain_pct.mean if own else None
                kept = g.gain_pct.mean / base if base else None
                slower = g.base_mean_ms / own.base_mean_ms if own and own.base_mean_ms > 0 else None
                stopped = stopped or (slower is not None and slower > limit)
                per.rows.append([arm, s, rule, f"{mb:g}", str(n), f"{n / mb:.2f}",
                                 g.gain_pct.fmt(1, "%"),
                                 "—" if base is None else f"{base:.1f}%",
                                 "—" if kept is None else f"{100 * kept:.0f}%",
                                 "—" if slower is None or slower != slower
                                 else f"{slower:.2f}" + (" machine" if stopped else ""),
                                 f"{load[name]:.1f}" if name in load else "—"])  # fmt: skip
                if stopped:
                    continue  # the machine's limit from here on, not the channel's: listed, not judged
                measured.append(n)
                if below is None and base and base > 0 and g.gain_pct.mean < base / 2:
                    below = n / mb
                if reached is None and base and base > 0 and g.gain_pct.hi <= base / 2:
                    reached = n / mb
            top = max(measured, default=0) / mb
            shown = ("—" if not whole or whole <= 0 else f"{reached:.2f}" if reached is not None
                     else f"> {top:.2f} (not reached)")  # fmt: skip
            half.rows.append([arm, s, rule, f"{mb:g}", "—" if whole is None else f"{whole:.1f}",
                              shown, ", ".join(str(n) for n in measured),
                              "—" if not whole or whole <= 0 else "not below" if below is None
                              else f"{below:.2f}"])  # fmt: skip
    return [per, half]


@register("users", help="paired PLT gains over N devices sharing one URLLC channel, per Mbit/s")
class Users(Sweep):
    """The sweep's tables and plot, then the users-per-Mbit/s tables."""

    def around_gains(self, c: Campaign, rows: Rows, metric: str) -> tuple[list[Table], list[Table]]:
        gains = an.paired_gains(rows, metric=metric, baseline=c.analysis.get("baseline", "all-hbc"))
        return [], users_tables(c, gains, rows, metric)
