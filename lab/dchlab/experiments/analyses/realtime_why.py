"""The measured reason when the real-time policy misses issue 40's target
(realtime_target), as tables and notes of the `realtime` analysis (registers nothing).

Where the target is not met, per condition, from the rows alone:
  what the LLC carried (`carried_table`), per scheme over its valid sessions: the LLC's
    share of the bytes per direction (uplink = device -> server, downlink = server ->
    device; the emulated links' bytes, stats.links.<ch>.<dir>.bytes_in, else the ue's
    interface counters), the LLC's mean rate per direction (bytes over the link's
    run, stats.links.llc.duration_s) against its capacity (the condition's LLC when it
    is a built-in channel, dchlab.traces.builtin: urllc = 2 Mbit/s), the delivered
    video bitrate and how many times the LLC's capacity it is, the median key and
    delta frame (frame_bytes_key_p50, frame_bytes_delta_p50) and how long each takes
    to cross the LLC at its capacity (bytes * 8 / rate), and the packets per session
    the agents sent on the LLC by decision class (stats.agents.*.decisions "llc:*");
  where the time goes (`parts_table`): per part of input-to-display
    (dchlab.workloads.realtime.latency_parts, path order) the mean over sessions of
    the session's p50 and p95 of that part (row columns i2d_parts_p50_ms /
    i2d_parts_p95_ms, else stats.realtime.input_to_display_parts) under Algorithm 1
    and the new arm, and the difference (new - Algorithm 1); a part neither arm's
    rows have is left out. Percentiles do not add:
    the parts' p95s do not sum to the whole's. Rows without those parts (recorded
    before they were measured, or a video call) fall back to the downlink video's
    frame-delay parts (stats.realtime.video_down.parts_median_ms / parts_p95_ms,
    dchlab.workloads.realtime.summary.PARTS);
  why (`reason_table`), one row per miss: the verdict, the LLC's shares, the video
    against its capacity, a median key frame's time on it, and the parts whose p95
    differs most, or what is missing to tell.
A column the rows do not have is shown as "—" or left out, never guessed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses import Rows
from dchlab.experiments.analyses.realtime_target import ALGORITHM1, Cells, Judged, valid
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.store import decode_json
from dchlab.experiments.tables import Table, num
from dchlab.traces.profiles import builtin
from dchlab.workloads.realtime import latency_parts, summary

DIRS = ("uplink", "downlink")
#: How many parts the reason table names (the largest p95 differences).
TOP_PARTS = 3


def _dict(v: Any) -> dict[str, Any]:
    v = decode_json(v)
    return v if isinstance(v, dict) else {}


def link_bytes(row: dict[str, Any]) -> dict[tuple[str, str], float]:
    """{(channel, direction): bytes} of the session (module docstring)."""
    stats = an.stats_of(row)
    links, ue = _dict(stats.get("links")), _dict(_dict(stats.get("interfaces")).get("ue"))
    out: dict[tuple[str, str], float] = {}
    for ch in ("hbc", "llc"):
        link = _dict(links.get(ch))
        for d, counter in zip(DIRS, ("tx_bytes", "rx_bytes"), strict=True):
            got = _dict(link.get(d)).get("bytes_in")
            if got is None:
                got = _dict(ue.get(ch)).get(counter)
            if got is not None:
                out[(ch, d)] = float(got)
    return out


def llc_capacity_mbps(llc: str) -> float | None:
    """The LLC's rate per direction (Mbit/s) when `llc` is a built-in channel, else None."""
    try:
        fixed = builtin(llc)
    except ValueError:
        return None
    return None if fixed is None else fixed.rate_mbit


def _sessions_mean(rows: Rows, col: str) -> float | None:
    """The mean of column `col` over the `rows` that have a number in it."""
    vals = [float(r[col]) for r in rows if r.get(col) is not None]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else None


def carried(rows: Rows) -> dict[str, Any]:
    """What the LLC carried over `rows` (valid sessions of one scheme): shares (%) and
    rates (Mbit/s) per direction, video bitrate, frame sizes, LLC packets by class."""
    tot: Counter[tuple[str, str]] = Counter()
    llc_s = 0.0
    classes: Counter[str] = Counter()
    for r in rows:
        tot.update(link_bytes(r))
        stats = an.stats_of(r)
        llc_s += float(_dict(_dict(stats.get("links")).get("llc")).get("duration_s") or 0)
        for agent in _dict(stats.get("agents")).values():
            for k, n in _dict(_dict(agent).get("decisions")).items():
                ch, _, cls = str(k).partition(":")
                if ch == "llc":
                    classes[cls or "?"] += int(n)
    out: dict[str, Any] = {}
    for d in DIRS:
        both = tot[("hbc", d)] + tot[("llc", d)]
        out[f"share_{d}"] = 100 * tot[("llc", d)] / both if both else None
        out[f"rate_{d}"] = (
            8 * tot[("llc", d)] / llc_s / 1e6 if llc_s and ("llc", d) in tot else None
        )
    out["video_mbps"] = _sessions_mean(rows, "bitrate_mbps")
    out["key_b"] = _sessions_mean(rows, "frame_bytes_key_p50")
    out["delta_b"] = _sessions_mean(rows, "frame_bytes_delta_p50")
    out["classes"] = {k: n / len(rows) for k, n in classes.items()} if rows else {}
    return out


def _on_llc_ms(size_b: float | None, cap: float | None) -> float | None:
    """How long `size_b` bytes take to cross a `cap` Mbit/s channel (ms)."""
    return None if size_b is None or not cap else 8 * size_b / (cap * 1e6) * 1000


def _classes(classes: dict[str, float]) -> str:
    if not classes:
        return "—"
    top = sorted(classes.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.0f}" for k, v in top)


def carried_table(c: Campaign, app: str, conditions: Iterable[str], cells: Cells) -> Table:
    """What the LLC carried under each scheme in `conditions` (module docstring)."""
    t = Table(
        f"{app}: what the LLC carried (valid sessions; uplink = device -> server)",
        ["condition", "scheme", "sessions", "LLC % bytes up", "LLC % bytes down",
         "LLC Mbit/s up", "LLC Mbit/s down", "LLC capacity Mbit/s", "video Mbit/s",
         "video / LLC capacity", "key frame B (p50)", "key frame on LLC ms",
         "delta frame B (p50)", "delta frame on LLC ms", "LLC packets/session by class"],
    )  # fmt: skip
    llc_of = {x.name: x.llc for x in c.conditions}
    for cond in conditions:
        cap = llc_capacity_mbps(llc_of.get(cond, ""))
        for s in c.schemes:
            rows = valid(cells.get((app, cond, s.label), []))
            if not rows:
                continue
            k = carried(rows)
            v = k["video_mbps"]
            t.rows.append(
                [
                    cond, s.label, str(len(rows)), num(k["share_uplink"]),
                    num(k["share_downlink"]), num(k["rate_uplink"], 2),
                    num(k["rate_downlink"], 2), num(cap, 1), num(v, 2),
                    "—" if v is None or not cap else f"{v / cap:.1f}x",
                    num(k["key_b"], 0), num(_on_llc_ms(k["key_b"], cap), 0),
                    num(k["delta_b"], 0), num(_on_llc_ms(k["delta_b"], cap), 0),
                    _classes(k["classes"]),
                ]
            )  # fmt: skip
    return t


def i2d_parts(row: dict[str, Any], q: str) -> dict[str, float] | None:
    """The session's input-to-display parts at `q` ("p50" | "p95"), ms; None if absent."""
    got = _dict(row.get(f"i2d_parts_{q}_ms"))
    if not got:
        rt = _dict(an.stats_of(row).get("realtime"))
        got = _dict(_dict(rt.get("input_to_display_parts")).get(f"{q}_ms"))
    parts = {k: float(v) for k, v in got.items() if v is not None}
    return parts or None


def frame_parts(row: dict[str, Any], q: str) -> dict[str, float] | None:
    """The session's downlink frame-delay parts at `q` ("p50" | "p95"), ms; None if absent."""
    down = _dict(_dict(an.stats_of(row).get("realtime")).get("video_down"))
    got = _dict(down.get("parts_median_ms" if q == "p50" else "parts_p95_ms"))
    parts = {k: float(v) for k, v in got.items() if v is not None}
    return parts or None


#: A parts source: (name, per-row getter, part order, the whole's column pattern).
Source = tuple[str, Callable[[dict[str, Any], str], dict[str, float] | None], tuple[str, ...], str]
#: The parts' sources, best first.
SOURCES: tuple[Source, ...] = (
    ("input-to-display", i2d_parts, latency_parts.PARTS, "input_to_display_{q}_ms"),
    ("downlink frame delay", frame_parts, summary.PARTS, "frame_delay_{q}_ms"),
)  # fmt: skip
MISSING = (
    "the rows of {arms} have no input-to-display parts (i2d_parts_p50_ms, "
    "i2d_parts_p95_ms, stats.realtime.input_to_display_parts: {why}); {fallback}"
)

#: Why a row lacks the input-to-display parts, per app.
WHY_MISSING = {
    "cloud-gaming": "recorded before they were measured, commit 747b0b2",
    "video-call": "a video call has no inputs",
}


def _part_means(
    rows: Rows, get: Callable[..., dict[str, float] | None], q: str
) -> dict[str, float]:
    """Per part, the mean over `rows` (that have parts) of the session's `q` value."""
    got = [p for p in (get(r, q) for r in rows) if p]
    keys = {k for p in got for k in p}
    return {k: float(np.mean([p[k] for p in got if k in p])) for k in keys}


def _with_parts(rows: Rows, get: Callable[..., dict[str, float] | None]) -> Rows:
    return [r for r in rows if get(r, "p50") or get(r, "p95")]


def _pick_source(new: Rows, base: Rows) -> tuple[Source | None, Rows, Rows]:
    """The first of SOURCES both arms have parts of, and the sessions that have them."""
    for src in SOURCES:
        n_new, n_base = _with_parts(new, src[1]), _with_parts(base, src[1])
        if n_new and n_base:
            return src, n_new, n_base
    return None, [], []


def parts_table(
    c: Campaign, app: str, judged: Iterable[Judged], cells: Cells
) -> tuple[Table | None, dict[tuple[str, str], str]]:
    """Where the time goes, new arm against Algorithm 1, for each judgement in
    `judged` (module docstring), and per (condition, arm) without input-to-display
    parts what is missing (MISSING)."""
    t = Table(
        f"{app}: where the time goes, the real-time policy against Algorithm 1 (ms, mean "
        "over sessions of each part's session p50 / p95; difference = new - Algorithm 1)",
        ["condition", "scheme", "latency", "sessions with parts (new / Alg. 1)", "part",
         "p50 Alg. 1", "p50 new", "p50 diff", "p95 Alg. 1", "p95 new", "p95 diff"],
    )  # fmt: skip
    missing: dict[tuple[str, str], str] = {}
    for j in judged:
        new = valid(cells.get((app, j.condition, j.arm), []))
        base = valid(cells.get((app, j.condition, ALGORITHM1), []))
        picked, n_new, n_base = _pick_source(new, base)
        if picked is not SOURCES[0]:
            lacking = [
                a for a, rs in ((j.arm, new), (ALGORITHM1, base)) if not _with_parts(rs, i2d_parts)
            ]
            missing[(j.condition, j.arm)] = (
                MISSING.format(
                    arms=" and ".join(lacking),
                    why=WHY_MISSING.get(app, WHY_MISSING["cloud-gaming"]),
                    fallback=f"the {SOURCES[1][0]}'s parts instead" if picked else
                    f"and no {SOURCES[1][0]} parts either (stats.realtime.video_down."
                    "parts_median_ms, parts_p95_ms): no part compared",
                )
            )  # fmt: skip
        if picked is None:
            continue
        name, get, order, whole_col = picked
        means = {
            (arm, q): _part_means(rs, get, q)
            for arm, rs in ((j.arm, n_new), (ALGORITHM1, n_base))
            for q in ("p50", "p95")
        }
        head = [j.condition, j.arm, name, f"{len(n_new)} / {len(n_base)}"]
        for part in order:
            if not any(part in m for m in means.values()):
                continue  # measured under neither arm: not a row of dashes
            cols: list[str] = []
            for q in ("p50", "p95"):
                b, n = means[(ALGORITHM1, q)].get(part), means[(j.arm, q)].get(part)
                diff = None if b is None or n is None else n - b
                cols += [num(b), num(n), "—" if diff is None else f"{diff:+.1f}"]
            t.rows.append([*head, part, *cols])
        cols = []
        for q in ("p50", "p95"):
            col = whole_col.format(q=q)
            b = _sessions_mean(n_base, col)
            n = _sessions_mean(n_new, col)
            diff = None if b is None or n is None else n - b
            cols += [num(b), num(n), "—" if diff is None else f"{diff:+.1f}"]
        t.rows.append([*head, "whole", *cols])
    return (t if t.rows else None), missing


def largest_p95_diffs(t: Table, cond: str, arm: str, k: int = TOP_PARTS) -> list[str]:
    """The `k` parts of `parts_table`'s rows for (cond, arm) whose p95 differs most,
    as "part +x.x ms" (the whole left out)."""
    got = []
    for r in t.rows:
        if r[0] == cond and r[1] == arm and r[4] != "whole" and r[10] != "—":
            got.append((abs(float(r[10])), f"{r[4]} {r[10]} ms"))
    return [s for _, s in sorted(got, reverse=True)[:k]]


def reason_table(
    c: Campaign,
    app: str,
    missed: Iterable[Judged],
    cells: Cells,
    parts: Table | None,
    missing: dict[tuple[str, str], str],
) -> Table:
    """One row per missed target: the verdict, what the LLC carried (its share of the
    bytes per direction under both arms, the video against its capacity, a median key
    frame's time on it) and the TOP_PARTS parts whose p95 differs most, or what is
    missing to tell (`parts_table`'s `missing`)."""
    t = Table(
        f"{app}: why the target was missed (measured; the tables above have the numbers)",
        ["condition", "scheme", "verdict", "what the LLC carried", "where the time goes"],
    )
    llc_of = {x.name: x.llc for x in c.conditions}
    for j in missed:
        cap = llc_capacity_mbps(llc_of.get(j.condition, ""))
        new = carried(valid(cells.get((app, j.condition, j.arm), [])))
        base = carried(valid(cells.get((app, j.condition, ALGORITHM1), [])))
        bits = [
            f"{num(new['share_downlink'])}% of the downlink bytes under {j.arm} "
            f"({num(base['share_downlink'])}% under {ALGORITHM1}), "
            f"{num(new['share_uplink'])}% of the uplink ({num(base['share_uplink'])}%)"
        ]
        v = new["video_mbps"]
        if v is not None and cap:
            bits.append(f"the video ({v:.2f} Mbit/s) is {v / cap:.1f}x its {cap:g} Mbit/s")
        key_ms = _on_llc_ms(new["key_b"], cap)
        if key_ms is not None:
            bits.append(f"a median key frame ({new['key_b']:.0f} B) takes {key_ms:.0f} ms on it")
        diffs = largest_p95_diffs(parts, j.condition, j.arm) if parts is not None else []
        time_went = "p95 parts differing most (new - Alg. 1): " + ", ".join(diffs) if diffs else ""
        lack = missing.get((j.condition, j.arm))
        time_went = "; ".join(x for x in (time_went, lack) if x) or "—"
        t.rows.append([j.condition, j.arm, j.verdict, "; ".join(bits), time_went])
    return t
