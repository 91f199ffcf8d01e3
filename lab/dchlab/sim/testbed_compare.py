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
