"""The analysis registry: what a campaign's `analysis: {kind: K}` computes from its rows.

An analysis kind is a small class (one file per kind in this package) derived from
`Analysis`, registered under its name with `@register`; its docstring says what it
computes. Every module in this package is imported on first lookup, so adding an
analysis kind means adding a file here, nothing else in this package (campaign files
are checked against this registry by the campaign parser, and the report draws each kind with
`report._PLOTTERS`).

Besides one file per kind, the package holds what several kinds share: `paired.py`
(the paired-gain kinds gain, sweep, plt and reorder) with the optional tables it adds
(`versus.py`, `hindsight.py`, `llc_usage.py`, `page_metrics.py`, `protocols.py` and
`protocol_why.py` with `transport_facts.py`), `item_gains.py`
(the per-item gain table of bulk and app), and `realtime_target.py` with
`realtime_why.py` (issue 40's target of the realtime kind and its measured reason).
They register nothing.

`summarize` (dchlab.experiments.summary) counts the loads and calls
`get_analysis(kind).analyze(campaign, rows, reruns)`, which returns `Findings`: the
tables in the order they are shown, the data the kind's plot needs and notes for the
reader. The statistics come from dchlab.experiments.analysis; a kind arranges them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dchlab.experiments.tables import Table
from dchlab.plugins import Registry

if TYPE_CHECKING:  # the campaign parser imports this registry to check `analysis.kind`
    from dchlab.experiments.campaign import Campaign

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Findings:
    """What an analysis kind found in a campaign's rows."""

    tables: list[Table]
    plot: dict[str, Any] = field(default_factory=dict)  # for report.plot_<kind>
    notes: list[str] = field(default_factory=list)  # after the paper's notes


class Analysis:
    """Base class of the analysis kinds."""

    #: the name campaign files use (`analysis.kind`), set by @register.
    kind = "base"
    #: compares the schemes with `analysis.baseline`, which must be one of them (the
    #: campaign parser checks it for the kinds that do).
    uses_baseline = True
    #: reads the agents' decision logs from the rows' stats: the runner must have the
    #: agents write them (RunConfig / RunSpec `decision_logs`).
    needs_decision_logs = False

    def analyze(self, c: Campaign, rows: Rows, reruns: dict[str, Rows]) -> Findings:
        """The tables, plot data and notes of campaign `c` from its `rows` (every row,
        runner failures included) and its reruns' rows by rerun name."""
        raise NotImplementedError


@dataclass(frozen=True)
class Entry:
    factory: Callable[[], Analysis]
    help: str


_REGISTRY: Registry[Entry] = Registry(__name__)


def register(name: str, *, help: str) -> Callable[[type[Analysis]], type[Analysis]]:
    """Class decorator: register an Analysis subclass as analysis kind `name`."""

    def deco(cls: type[Analysis]) -> type[Analysis]:
        cls.kind = name
        _REGISTRY.add(name, Entry(cls, help))
        return cls

    return deco


def known_analyses() -> dict[str, str]:
    """{analysis kind: one-line help}, sorted by kind."""
    return {n: e.help for n, e in _REGISTRY.entries().items()}


def get_analysis(kind: str) -> Analysis:
    """The Analysis registered as `kind`; ValueError listing the known kinds if none is."""
    entry = _REGISTRY.get(kind)
    if entry is None:
        raise ValueError(
            f"unknown analysis kind {kind!r}; known kinds: {', '.join(known_analyses())}"
        )
    return entry.factory()
