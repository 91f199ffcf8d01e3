"""Paired-gain tables per (condition, item, scheme), for the kinds whose items are not
pages: file sizes (`bulk`) and app interactions (`app`)."""

from __future__ import annotations

from collections.abc import Iterator

from dchlab.experiments import analysis as an
from dchlab.experiments.campaign import Campaign, Condition
from dchlab.experiments.tables import Table, compared_arms


def measured(
    c: Campaign, gains: dict[tuple[str, str], an.Gain], base: str
) -> Iterator[tuple[Condition, str, an.Gain]]:
    """(condition, arm, gain) of every measured cell, in the campaign's order."""
    for cond in c.conditions:
        for arm in compared_arms(c, base):
            g = gains.get((cond.name, arm))
            if g is not None:
                yield cond, arm, g


def item_gain_table(title: str, item: str, gain_columns: list[str]) -> Table:
    """A paired-gain table per (condition, item, scheme): `gain_columns`, then the pairs
    and the invalid loads (scheme / baseline) each gain rests on."""
    return Table(title, ["condition", item, "scheme", *gain_columns, "pairs", "invalid"])


def item_gain_row(
    cond: Condition, item: str, arm: str, g: an.Gain, gain_cells: list[str]
) -> list[str]:
    """A row of an item_gain_table: `gain_cells` under its gain_columns."""
    return [cond.name, item, arm, *gain_cells, str(g.pairs), f"{g.invalid_arm} / {g.invalid_base}"]
