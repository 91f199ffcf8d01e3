"""`ideal`: one emulated link with the LLC's delay and the HBC's capacity — the bound
no steering between the two channels can beat. No agent; ue routes over it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dchlab.testbed import addressing as A
from dchlab.testbed.channels import ideal_profile, write_profile
from dchlab.testbed.schemes import Scheme, register
from dchlab.traces.builtin import Fixed
from dchlab.traces.profiles import builtin

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed


@register("ideal", help="no agent: one link with the LLC's delay and the HBC's rate")
class IdealScheme(Scheme):
    kind = "ideal"

    def links(self, tb: Testbed) -> dict[str, str]:
        hbc, llc = tb.channels["hbc"], tb.channels["llc"]
        h, low = builtin(hbc), builtin(llc)
        if h and low:  # both built-in: stay in the inline form chanemu parses itself
            return {"ideal": Fixed(low.rtt_ms, h.rate_mbit).spec()}
        path = write_profile(
            ideal_profile(hbc, llc, tb.cfg.hbc, tb.cfg.llc), tb.run_dir / "ideal.toml"
        )
        return {"ideal": str(path)}

    def setup(self, tb: Testbed) -> None:
        tb.ip(
            "ue",
            ["route", "add", "default", "dev", "ideal", "src", A.IDEAL.near],
            "default route via the ideal link on ue",
        )
