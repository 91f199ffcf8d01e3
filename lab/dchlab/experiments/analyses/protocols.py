"""`analysis.by_protocol: true`: each scheme's gain under every protocol of the campaign's
arms, side by side (issue 39, fig3_h3: dchannel under h3 beside h2).

Arms that differ only in `protocol:` (same scheme and agent flags) are one scheme measured
under two protocols. Per protocol, the gains are paired per (page, trial) against the
baseline *of the same protocol* and the share of the ideal is that protocol's ideal's,
with the same helper as the gain table (analysis.paired_gains); an h2 and an h3 load of
one (page, trial) share the testbed seed (runner.pair_units), so the two columns see the
same trace sub-sequences.
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign, Scheme
from dchlab.experiments.tables import Table, num


def _twin_key(s: Scheme) -> tuple[Any, ...]:
    return (s.scheme, s.agent_args, s.client_args, s.gateway_args)


def scheme_names(c: Campaign) -> dict[str, tuple[str, str]]:
    """arm label -> (the scheme's name across protocols, the arm's protocol). The name is
    the label of its first arm in file order (e.g. `dchannel` for `dchannel-h3`)."""
    first: dict[tuple[Any, ...], str] = {}
    out: dict[str, tuple[str, str]] = {}
    for s in c.schemes:
        name = first.setdefault(_twin_key(s), s.label)
        out[s.label] = (name, c.protocol_of(s))
    return out


def gains_by_protocol(
    c: Campaign, rows: list[dict[str, Any]], metric: str
) -> dict[str, dict[tuple[str, str], an.Gain]]:
    """protocol -> {(condition, scheme name): Gain against the baseline of that protocol}."""
    names = scheme_names(c)
    base = names[c.analysis.get("baseline", "all-hbc")][0]
    ideal = names["ideal"][0] if "ideal" in names else None
    out: dict[str, dict[tuple[str, str], an.Gain]] = {}
    for proto in dict.fromkeys(p for _, p in names.values()):
        sub = [
            {**r, "arm": names[r["arm"]][0]}
            for r in rows
            if r.get("arm") in names and names[r["arm"]][1] == proto
        ]
        out[proto] = an.paired_gains(sub, metric=metric, baseline=base, ideal=ideal)
    return out


def protocol_table(c: Campaign, rows: list[dict[str, Any]], metric: str) -> Table:
    """Per condition and scheme, its gain, share of the ideal and LLC bytes under each
    protocol (each against the baseline of its own protocol)."""
    g = gains_by_protocol(c, rows, metric)
    protos = list(g)
    names = scheme_names(c)
    base = names[c.analysis.get("baseline", "all-hbc")][0]
    cols = ["condition", "scheme"]
    for p in protos:
        cols += [f"{p} gain % [CI]", f"{p} of ideal", f"{p} LLC bytes %", f"{p} pages / pairs"]
    t = Table(
        f"PLT gain against {base} of the same protocol, per protocol (mean over pages, 95% "
        "bootstrap CI over pages)",
        cols,
    )
    schemes = [n for n in dict.fromkeys(n for n, _ in names.values()) if n != base]
    for cond in c.conditions:
        for s in schemes:
            cells: list[str] = []
            for p in protos:
                x = g[p].get((cond.name, s))
                if x is None:
                    cells += ["—"] * 4
                    continue
                share = "—" if x.ideal_share is None else f"{100 * x.ideal_share:.0f}%"
                cells += [
                    x.gain_pct.fmt(1, "%"),
                    share,
                    num(x.llc_bytes_pct),
                    f"{x.pages} / {x.pairs}",
                ]
            if any(v != "—" for v in cells):
                t.rows.append([cond.name, s, *cells])
    return t
