"""The workload registry: what a campaign's `workload: {kind: K, ...}` measures.

A workload kind is a small class (one file per kind in this package) derived from
`WorkloadKind` and registered under its name with `@register`, as the testbed's
schemes are (dchlab.testbed.schemes). Every module in this package is imported on
first lookup, so a new workload is its own file here and nothing else: the campaign
parser, the planner and the runner ask the kind, never compare workload strings.

What a kind answers, in the order a campaign uses it:
  1. `fields`            — the `workload:` keys it accepts besides kind and timeout_s;
  2. `parse(v, d, ...)`   — the validated Workload of a campaign file's mapping;
  3. `items(wl)`          — the item keys of a campaign (pages, URL labels, sizes);
  4. `group_items(wl, i)` — the cells one call measures for item `i` (a session: all
                            its pages, in one browser);
  5. `measure(run, wl, items, pool)` — one row per item, in item order, under `run`;
  6. `item_is_page`, `corpus_column` — which provenance columns its rows carry;
     `pages_flag` — whether `dch run --pages N` applies.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

from dchlab.errors import EXIT_UNAVAILABLE, UserError

if TYPE_CHECKING:
    from dchlab.experiments.campaign import Workload
    from dchlab.experiments.campaign_check import Validator
    from dchlab.run_config import RunConfig
    from dchlab.workloads.pool import TestbedPool


class WorkloadUnavailable(UserError, RuntimeError):
    """A campaign's workload cannot run here (e.g. its corpus cannot be opened)."""

    exit_code = EXIT_UNAVAILABLE


class WorkloadKind:
    """Base class of the workload kinds (see the module docstring)."""

    #: the `kind:` of a campaign file
    name = ""
    #: `workload:` keys besides kind and timeout_s
    fields: frozenset[str] = frozenset()
    #: rows carry the item as `page` (a page load, an app interaction)
    item_is_page = False
    #: rows carry the workload's corpus as `corpus`
    corpus_column = False
    #: `dch run --pages N` (a rerun on the first N pages) applies
    pages_flag = False

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        """The Workload of a validated `workload:` mapping `d` (fields checked)."""
        raise NotImplementedError

    def items(self, wl: Workload) -> list[str]:
        """The item keys of the workload: what a cell measures besides scheme and trial."""
        raise NotImplementedError

    def group_items(self, wl: Workload, item: str) -> list[str] | None:
        """The cells one measurement of `item` covers (None: just the item)."""
        return None

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        """One row per item, in item order, measured under `run`. `pool`: the
        dispatcher's testbed pool (told which run follows this call's items)."""
        raise NotImplementedError


_REGISTRY: dict[str, WorkloadKind] = {}


def register(cls: type[WorkloadKind]) -> type[WorkloadKind]:
    """Class decorator: register a WorkloadKind under its `name`."""
    _REGISTRY[cls.name] = cls()
    return cls


@functools.cache
def _kinds() -> dict[str, WorkloadKind]:
    """The registry once this package's modules are imported (each registers its kind)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return _REGISTRY


def workload_kinds() -> list[str]:
    """The registered kinds' names, in the order campaign errors list them."""
    return list(_kinds())


def get_kind(name: str) -> WorkloadKind:
    """The kind registered as `name` (KeyError if none)."""
    return _kinds()[name]


def corpus_page_names(corpus: str, limit: int | None = None) -> list[str]:
    """Page names of a corpus (a directory, `synthetic[:SEED]` or `tp5n`), in manifest
    order; WorkloadUnavailable (exit 3) names why it cannot be opened."""
    from dchlab.pages import CorpusError, open_corpus

    try:
        names = [p.name for p in open_corpus(corpus).pages]
    except (CorpusError, OSError) as e:
        raise WorkloadUnavailable(f"corpus {corpus!r}: {e}") from e
    return names[:limit] if limit else names
