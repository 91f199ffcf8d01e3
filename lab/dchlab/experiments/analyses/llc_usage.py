"""`analysis.llc_usage: true`: what crossed the LLC per page load, up and down
(HotMobile'21 Table 1), a table after the paired gains."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign
from dchlab.experiments.tables import Table, num, paper_value

#: The columns `with_llc_usage` adds: kB up and down, and those as Mbit/s over the load.
LLC_USAGE = ["llc_up_kb", "llc_down_kb", "llc_up_mbit", "llc_down_mbit"]


def with_llc_usage(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of loads whose stats carry the LLC link's counters, each with LLC_USAGE added:
    kB that crossed the LLC link up and down during the load (the emulator's
    `links.llc.{uplink,downlink}.bytes_out`, the same counter for every scheme, agents,
    proxy or MPTCP) and those bytes as a mean rate over the load (bits / PLT).
    HotMobile'21 Table 1 reports bytes per page over URLLC and mean rates up / down.
    Only the newest measurement of each cell and valid loads, as everywhere else."""
    out = []
    for r in an.latest_per_cell(rows):
        if not an.is_valid(r, "plt_ms"):
            continue
        llc = an.stats_of(r).get("links", {}).get("llc", {})
        up = (llc.get("uplink") or {}).get("bytes_out")
        down = (llc.get("downlink") or {}).get("bytes_out")
        plt = r.get("plt_ms")
        if not isinstance(up, int | float) or not isinstance(down, int | float):
            continue
        if not isinstance(plt, int | float) or math.isnan(plt) or plt <= 0:
            continue
        out.append(
            dict(
                r,
                llc_up_kb=up / 1000.0,
                llc_down_kb=down / 1000.0,
                llc_up_mbit=up * 8 / (plt * 1000.0),  # bits per ms / 1000 = Mbit/s
                llc_down_mbit=down * 8 / (plt * 1000.0),
            )
        )
    return out


def llc_usage_table(c: Campaign, rows: list[dict[str, Any]]) -> Table:
    """What crossed the LLC per page load, up and down (HotMobile'21 Table 1): kB and the
    mean rate over the load (mean over pages of each page's mean, 95% CI over pages), the
    p90 of the rate over loads, and the paper's mean rates where it gives them
    (`paper.values[condition][scheme].llc_up_mbit / llc_down_mbit`)."""
    usage = with_llc_usage(rows)
    m = an.means(usage, LLC_USAGE)
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
            found = [m.get((cond.name, sch.label, x)) for x in LLC_USAGE]
            got = [g for g in found if g is not None]
            if len(got) < len(found):  # all four come from the same rows: none or all
                continue
            mine = [
                r for r in usage if an.condition_of(r) == cond.name and an.arm_of(r) == sch.label
            ]
            p90 = [an.percentile([float(r[k]) for r in mine], 90) for k in LLC_USAGE[2:]]
            paper = [paper_value(c, cond.name, sch.label, k) for k in LLC_USAGE[2:]]
            t.rows.append(
                [
                    cond.name,
                    sch.label,
                    got[0].value.fmt(1),
                    got[1].value.fmt(1),
                    got[2].value.fmt(2),
                    got[3].value.fmt(2),
                    f"{num(p90[0], 2)} / {num(p90[1], 2)}",
                    f"{num(paper[0], 2)} / {num(paper[1], 2)}",
                    str(got[0].loads),
                ]
            )
    return t
