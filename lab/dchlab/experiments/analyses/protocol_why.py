"""`analysis.by_protocol`, part two: per condition and scheme, how much the gain under
each later protocol (h3) differs from the first (h2), with a 95% CI of the difference,
and for every difference over `THRESHOLD_POINTS` a "why" line of what the paired loads
measured (issue 39 item 5: handshake round trips, ACK frequency, pacing, reordering).

The difference is paired as the gains are (analysis.paired_gains): per page, the
scheme's gain against the baseline of the same protocol, under h3 minus under h2 (each
the mean over the trials where the scheme's and the baseline's loads are valid), then
the mean over the pages that have both, with a percentile bootstrap over those pages.

The why line compares medians over the same pages (each page: the mean over its valid
trials) of the transport facts (transport_facts.py) of four arms: the scheme and the
baseline, each under both protocols, as "h2 → h3". It reports what was measured and
says what these rows did not record; it does not claim which fact caused the
difference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dchlab.experiments import analysis as an
from dchlab.experiments.analyses.protocols import gains_by_protocol, scheme_names
from dchlab.experiments.analyses.transport_facts import CHANNELS, transport_facts
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num

#: Gain differences (percentage points) beyond which a why line is written (issue 39).
THRESHOLD_POINTS = 5.0

Items = dict[str, dict[int, dict[str, Any]]]  # item -> trial -> row


def gain_difference(
    arm: tuple[Items, Items], base: tuple[Items, Items], metric: str
) -> tuple[an.CI, list[str]]:
    """The paired difference of gains (points), later protocol minus first, and the
    pages it is over. `arm` and `base`: (first protocol's rows, later protocol's rows)."""
    first = an.page_gains(arm[0], base[0], metric)
    later = an.page_gains(arm[1], base[1], metric)
    pages = sorted(set(first) & set(later))
    return an.bootstrap_mean([later[p].gain_pct - first[p].gain_pct for p in pages]), pages


def median_facts(items: Items, pages: list[str], metric: str) -> dict[str, Any]:
    """Per fact, the median over `pages` of the page's mean over its valid loads (None
    when no page has it); `handshake_scope` is the narrowest scope any load had."""
    per_page: dict[str, list[float]] = {}
    scopes: set[str] = set()
    for p in pages:
        loads = [transport_facts(r, metric) for r in items.get(p, {}).values() if an.is_valid(r, metric)]  # fmt: skip
        for f in loads:
            if f["handshake_scope"]:
                scopes.add(f["handshake_scope"])
        names = {k for f in loads for k in f if k != "handshake_scope"}
        for k in names:
            vals = [f[k] for f in loads if f.get(k) is not None]
            if vals:
                per_page.setdefault(k, []).append(float(np.mean(vals)))
    out: dict[str, Any] = {k: float(np.median(v)) for k, v in per_page.items()}
    out["handshake_scope"] = (
        "main document" if "main document" in scopes else ("per connection" if scopes else None)
    )
    return out


def _pair(a: dict[str, Any], b: dict[str, Any], key: str, digits: int = 0) -> str | None:
    """`x → y`: one fact under the two protocols under the two protocols; None when either lacks it."""
    x, y = a.get(key), b.get(key)
    if x is None or y is None:
        return None
    return f"{num(x, digits)} → {num(y, digits)}"


def why_line(scheme: str, base: str, facts: dict[tuple[str, int], dict[str, Any]]) -> str:
    """One line of what was measured: `facts[(arm, i)]` are the median facts of arm
    "scheme" or "base" under the first (i = 0) and the later (i = 1) protocol."""
    s0, s1, b0, b1 = facts[("scheme", 0)], facts[("scheme", 1)], facts[("base", 0)], facts[("base", 1)]  # fmt: skip
    parts: list[str] = []
    missing: list[str] = []
    plt_s, plt_b = _pair(s0, s1, "plt_ms"), _pair(b0, b1, "plt_ms")
    parts.append(f"PLT {scheme} {plt_s or '—'} ms, {base} {plt_b or '—'} ms")
    hs = _pair(s0, s1, "handshake_ms")
    if hs is not None:
        scope = s0.get("handshake_scope") if s0.get("handshake_scope") == s1.get("handshake_scope") else None  # fmt: skip
        what = (
            "handshake per connection"
            if scope == "per connection"
            else "main document's connect + TLS"
        )
        text = f"{what} {scheme} {hs} ms"
        conns = _pair(s0, s1, "handshakes", 1)
        text += f" ({conns} connections/load)" if conns else ""
        hb, rtts = _pair(b0, b1, "handshake_ms"), _pair(b0, b1, "handshake_rtts", 1)
        if hb is not None:
            text += f", {base} {hb} ms" + (f" = {rtts} HBC RTTs" if rtts else "")
        parts.append(text)
        if scope != "per connection":
            missing.append("handshakes per connection")
    else:
        missing.append("handshakes")
    acks = [
        f"{d} {ch.upper()} {v}"
        for d in ("up", "down")
        for ch in CHANNELS
        if (v := _pair(s0, s1, f"ack_{d}_{ch}")) is not None
    ]
    if acks:
        parts.append(f"ACK-like packets/load of {scheme}: " + ", ".join(acks))
    else:
        missing.append("ACK-like packet classes")
        pkts = [
            f"{ch.upper()} {v}"
            for ch in CHANNELS
            if (v := _pair(s0, s1, f"pkts_up_{ch}")) is not None
        ]
        if pkts:
            parts.append(f"uplink packets/load of {scheme} (mostly ACKs): " + ", ".join(pkts))
    burst = _pair(s0, s1, "hbc_burst_pkts", 1)
    if burst is not None:
        bb = _pair(b0, b1, "hbc_burst_pkts", 1)
        parts.append(f"HBC downlink burst {scheme} {burst} packets" + (f", {base} {bb}" if bb else ""))  # fmt: skip
    else:
        missing.append("HBC bursts (pacing)")
    held = _pair(s0, s1, "reorder_held")
    if held is not None:
        text = f"reorder holds {held}/load"
        if (t := _pair(s0, s1, "reorder_timeouts")) is not None:
            text += f", timeout releases {t}"
        if (m := _pair(s0, s1, "reorder_max_kb", 1)) is not None:
            text += f", peak {m} KB"
        parts.append(text)
    else:
        missing.append("reorder buffer")
    line = "; ".join(parts)
    return line + (f"; not recorded in these rows: {', '.join(missing)}" if missing else "")


def why_table(c: Campaign, rows: list[dict[str, Any]], metric: str) -> Table:
    """Per condition and scheme, the gain under each protocol, the paired difference of
    the later protocol's from the first's and, beyond THRESHOLD_POINTS, the why line."""
    names = scheme_names(c)
    gains = gains_by_protocol(c, rows, metric)
    protos = list(gains)
    base = names[c.analysis.get("baseline", "all-hbc")][0]
    label = {(n, p): lbl for lbl, (n, p) in names.items()}
    t = Table(
        f"Gain under each protocol and the difference from {protos[0]} (points; paired per "
        f"page, 95% bootstrap CI over pages); beyond {THRESHOLD_POINTS:.0f} points, what the "
        f"loads measured: medians over those pages, {protos[0]} → later protocol",
        ["condition", "scheme", "protocols", f"{protos[0]} gain % [CI]", "later gain % [CI]",
         "difference, points [CI]", "pages", "why (measured)"],
    )  # fmt: skip
    table = an.by_condition(rows)
    schemes = [n for n in dict.fromkeys(n for n, _ in names.values()) if n != base]
    for cond in c.conditions:
        arms = table.get(cond.name, {})
        for s in schemes:
            for p in protos[1:]:
                keys = [(s, protos[0]), (s, p), (base, protos[0]), (base, p)]
                if any(k not in label or label[k] not in arms for k in keys):
                    continue
                a0, a1, b0, b1 = (arms[label[k]] for k in keys)
                diff, pages = gain_difference((a0, a1), (b0, b1), metric)
                if not pages:
                    continue
                g0, g1 = gains[protos[0]].get((cond.name, s)), gains[p].get((cond.name, s))
                why = "—"
                if not math.isnan(diff.mean) and abs(diff.mean) > THRESHOLD_POINTS:
                    facts = {
                        (who, i): median_facts(items, pages, metric)
                        for who, pair in (("scheme", (a0, a1)), ("base", (b0, b1)))
                        for i, items in enumerate(pair)
                    }
                    why = why_line(s, base, facts)
                t.rows.append(
                    [
                        cond.name,
                        s,
                        f"{protos[0]} / {p}",
                        g0.gain_pct.fmt(1, "%") if g0 else "—",
                        g1.gain_pct.fmt(1, "%") if g1 else "—",
                        diff.fmt(1),
                        str(len(pages)),
                        why,
                    ]
                )
    return t
