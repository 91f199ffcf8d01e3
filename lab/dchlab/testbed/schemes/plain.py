"""Plain single-channel routing, no agent: ue's default route is one link."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dchlab.testbed import addressing as A
from dchlab.testbed.schemes import Scheme, register

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed


@register("hbc-only", help="no agent: ue routes everything over the HBC link")
@register("llc-only", help="no agent: ue routes everything over the LLC link")
class PlainScheme(Scheme):
    kind = "plain"

    def setup(self, tb: Testbed) -> None:
        link = A.HBC if self.name == "hbc-only" else A.LLC
        tb.ip(
            "ue",
            ["route", "add", "default", "dev", link.name, "src", link.near],
            f"default route via {link.name} on ue",
        )
