"""Analysis kind `realtime`: what each scheme does to a real-time app (issue 40;
`realtime` workload, items = apps).

Per app, condition and scheme: sessions (valid / invalid), input-to-display latency
p50 / p95 / p99 over every input of the valid sessions pooled (cloud gaming; the
video call's audio delay instead), the mean of the sessions' p95 with a 95% bootstrap
CI over sessions, whether that p95 is under the app's bound (`BOUND_MS`), the
sessions whose connection was lost (`connection_lost_s`: their latencies cover only
what was displayed before, and the dark rest is one freeze), freezes per minute,
delivered frame rate and bitrate (session means; "Mbit/s" is the video's RTP payload
received, retransmissions included, "Mbit/s shown" the encoded bytes of
the frames the player displayed, per second), the LLC's share of the
bytes, and the share of the ideal scheme's reduction (against `analysis.baseline`)
the scheme captures, of the pooled p50 and of the mean session p95. The ideal (URLLC
delay at eMBB rate) bounds the median, not the tail: its congestion controller, seeing
the LLC's constant delay instead of the HBC's varying one, sends faster and meets the
HBC trace's low-rate windows with more queued (a share of the p95 above 100% says that,
not a scheme better than ideal). Plotted as CDFs
of the pooled samples.

Then, per app, issue 40's target (realtime_target: the real-time policy against
Algorithm 1, its rule there; which schemes bring the p95 under the bound where the
baseline is above it) and, where the target is missed, the measured reason
(realtime_why: what the LLC carried, where the time goes), with a row per miss.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Analysis, Findings, Rows, register
from dchlab.experiments.analyses import realtime_target as target
from dchlab.experiments.analyses import realtime_why as why
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num

#: Per app, the latency bound the p95 is held against (ms): cloud gaming "requires at
#: most 96 ms to ensure normal experience" (NSDI'23 §1); one-way mouth-to-ear delay up
#: to 150 ms keeps most voice applications unaffected (ITU-T G.114 §3).
BOUND_MS = {"cloud-gaming": 96.0, "video-call": 150.0}
#: Per app: the per-sample statistic (stats dotted path) and the per-session p95 column.
METRIC = {
    "cloud-gaming": ("realtime.samples.input_to_display_ms", "input_to_display_p95_ms"),
    "video-call": ("realtime.samples.audio_delay_ms", "audio_delay_p95_ms"),
}


def _mean(rows: Rows, col: str) -> float | None:
    vals = [float(r[col]) for r in rows if r.get(col) is not None]
    return float(np.mean(vals)) if vals else None


def ideal_share(base: float | None, arm: float | None, ideal: float | None) -> float | None:
    """(base - arm) / (base - ideal): the share of the ideal's reduction of the p95 the
    scheme captures (None without a baseline, an ideal or an ideal gain)."""
    if base is None or arm is None or ideal is None or base - ideal <= 0:
        return None
    return (base - arm) / (base - ideal)


@register(
    "realtime", help="input-to-display / audio delay percentiles, freezes, bitrate per scheme"
)
class Realtime(Analysis):
    """One table per app; the pooled samples are the plot's CDFs."""

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        base = c.analysis.get("baseline", "all-hbc")
        latest = [r for r in an.latest_per_cell(rows) if r.get("workload") == "realtime"]
        cells: dict[tuple[str, str, str], Rows] = defaultdict(list)
        for r in latest:
            cells[(an.item_of(r), an.condition_of(r), an.arm_of(r))].append(r)
        tables, samples = [], {}
        for app in c.workload.apps:
            stat, p95_col = METRIC[app]
            bound = BOUND_MS[app]
            what = "input-to-display" if app == "cloud-gaming" else "audio delay"
            t = Table(
                f"{app}: {what} (ms, every sample of the valid sessions pooled; mean of "
                f"the sessions' p95 with a 95% bootstrap CI over sessions)",
                ["condition", "scheme", "sessions (invalid)", "lost", "p50", "p95", "p99",
                 "session p95 [CI]", f"p95 < {bound:.0f}", "freezes/min", "fps",
                 "Mbit/s", "Mbit/s shown", "LLC bytes %", "share of ideal p50",
                 "share of ideal p95"],
            )  # fmt: skip
            for cond in c.conditions:
                pooled_of: dict[str, list[float]] = {}
                p50s: dict[str, float | None] = {}
                p95s: dict[str, float | None] = {}
                for sch in c.schemes:
                    valid = [
                        r for r in cells.get((app, cond.name, sch.label), []) if r.get("valid")
                    ]
                    pooled = an.stat_samples(valid, stat).get((cond.name, sch.label), [])
                    pooled_of[sch.label] = pooled
                    p50s[sch.label] = an.percentile(pooled, 50) if pooled else None
                    p95s[sch.label] = _mean(valid, p95_col)
                for sch in c.schemes:
                    rs = cells.get((app, cond.name, sch.label), [])
                    if not rs:
                        continue
                    valid = [r for r in rs if r.get("valid")]
                    vals = pooled_of[sch.label]
                    samples[(f"{app} {cond.name}", sch.label)] = vals
                    ci = an.bootstrap_mean(
                        [float(r[p95_col]) for r in valid if r.get(p95_col) is not None]
                    )
                    minutes = sum(float(r.get("duration_s") or 0) for r in valid) / 60
                    freezes = sum(int(r.get("freezes") or 0) for r in valid)
                    shares = [
                        ideal_share(m.get(base), m.get(sch.label), m.get("ideal"))
                        for m in (p50s, p95s)
                    ]
                    t.rows.append(
                        [
                            cond.name,
                            sch.label,
                            f"{len(valid)} ({len(rs) - len(valid)})",
                            str(sum(r.get("connection_lost_s") is not None for r in valid)),
                            num(an.percentile(vals, 50)),
                            num(an.percentile(vals, 95)),
                            num(an.percentile(vals, 99)),
                            ci.fmt(),
                            "—" if math.isnan(ci.mean) else ("yes" if ci.mean < bound else "no"),
                            num(freezes / minutes if minutes else None, 2),
                            num(_mean(valid, "fps_delivered")),
                            num(_mean(valid, "bitrate_mbps"), 2),
                            num(_mean(valid, "shown_mbps"), 2),
                            num(an.llc_bytes_pct(valid)),
                            *(
                                "—"
                                if share is None or sch.label in (base, "ideal")
                                else f"{100 * share:.0f}%"
                                for share in shares
                            ),
                        ]
                    )
            tables.append(t)
            goal, judged = target.target_table(c, app, p95_col, cells)
            bound_t = target.bound_table(c, app, p95_col, bound, cells, base)
            tables += [x for x in (goal, bound_t) if x.rows]
            missed = [j for j in judged if j.verdict.startswith("not met")]
            if missed:
                conds = list(dict.fromkeys(j.condition for j in missed))
                tables.append(why.carried_table(c, app, conds, cells))
                parts, missing = why.parts_table(c, app, missed, cells)
                tables += [parts] if parts is not None else []
                tables.append(why.reason_table(c, app, missed, cells, parts, missing))
        return Findings(tables, {"samples": samples, "xlabel": "latency (ms)"})
