"""What a campaign's summary is made of (`Table`, `Summary`) and the cells every
analysis kind writes alike: numbers with a dash for "none", the paper's value of a
cell, the schemes compared with the baseline.

The analysis kinds (dchlab.experiments.analyses) fill tables; `summarize`
(dchlab.experiments.summary) puts them into a Summary; the HTML report, the Markdown
of docs/results.md and the terminal print them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dchlab.experiments.campaign import Campaign


@dataclass
class Table:
    """A titled table of plain strings, one list per row under `columns`."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class Summary:
    """One campaign's result: its tables, the data its plot needs, and how many loads
    it counted, excluded as invalid and lost to runner failures."""

    campaign: Campaign
    tables: list[Table]
    plot: dict[str, Any]  # kind-specific data for report.plot_*
    loads: int
    invalid: int
    failed: int
    notes: list[str] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)  # invalid loads by kind of reason
    expected_only: int = 0  # valid loads whose only failures were the page's expected-missing


def paper_value(c: Campaign, cond: str, arm: str, metric: str) -> float | None:
    """The paper's value of `metric` for (condition, scheme) from the campaign's `paper`
    block: `values[cond][arm][metric]`, or `values[cond][arm]` when `metric` is the
    block's `metric`; None when the paper gives none."""
    vals = c.paper.get("values", {}).get(cond, {})
    v = vals.get(arm)
    if isinstance(v, dict):
        got = v.get(metric)
        return float(got) if got is not None else None
    if v is not None and metric == c.paper.get("metric"):
        return float(v)
    return None


def num(v: float | None, digits: int = 1, unit: str = "") -> str:
    """`v` with `digits` decimals and `unit`; "—" for None or NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}{unit}"


def compared_arms(c: Campaign, baseline: str | None) -> list[str]:
    """The campaign's scheme labels other than the baseline, in the campaign's order."""
    return [s.label for s in c.schemes if s.label != baseline]
