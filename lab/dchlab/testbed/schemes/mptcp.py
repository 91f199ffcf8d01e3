"""`mptcp`: kernel MPTCP with one subflow per channel.

ue's applications run under `mptcpize run` (their TCP sockets become MPTCP), the
first subflow takes the default route (HBC, 198.18.1.2), the LLC address
198.18.2.2 is a `subflow` endpoint, and per-source routing sends each subflow out
of its own link. webreplay listens with MPTCP. Stats report the MPTcpExt counters
of ue and srv and the subflow count (1 per connection + established joins).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from dchlab.testbed import addressing as A
from dchlab.testbed import mptcp
from dchlab.testbed.errors import TestbedError
from dchlab.testbed.schemes import Scheme, register

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed


@register("mptcp", help="kernel MPTCP, one subflow per channel (apps wrapped with mptcpize)")
class MptcpScheme(Scheme):
    kind = "mptcp"

    def setup(self, tb: Testbed) -> None:
        if shutil.which("mptcpize") is None:
            raise TestbedError("scheme mptcp needs mptcpize: apt-get install mptcpize")
        tb.ip(
            "ue",
            ["route", "add", "default", "dev", "hbc", "src", A.HBC.near],
            "default route via hbc on ue",
        )
        mptcp.configure_client(tb.netns["ue"], [("hbc", A.HBC.near), ("llc", A.LLC.near)])
        mptcp.configure_server(tb.netns["srv"])

    def webreplay_args(self, tb: Testbed) -> list[str]:
        return ["--mptcp"]

    def wrap(self, tb: Testbed, argv: list[str]) -> list[str]:
        return ["mptcpize", "run", *argv]

    def collect(self, tb: Testbed) -> dict[str, Any]:
        ue = mptcp.counters(tb.netns["ue"])
        srv = mptcp.counters(tb.netns["srv"])
        conns = ue.get("MPCapableSYNACKRX", 0)
        joins = ue.get("MPJoinSynAckRx", 0)
        return {
            "mptcp": {
                "connections": conns,
                "joins": joins,
                "subflows": conns + joins,
                "fallbacks": ue.get("MPCapableFallbackSYNACK", 0)
                + ue.get("MPCapableFallbackACK", 0),
                "counters": {"ue": _nonzero(ue), "srv": _nonzero(srv)},
            }
        }

    def summary(self, stats: dict[str, Any]) -> str | None:
        m = stats.get("mptcp")
        if not m:
            return None
        return (
            f"mptcp: {m['connections']} connection(s), {m['subflows']} subflow(s) "
            f"({m['joins']} joined), {m['fallbacks']} fallback(s) to TCP"
        )

    def invalid_reason(self, stats: dict[str, Any]) -> str | None:
        m = stats.get("mptcp")
        if m is not None and not m.get("connections"):
            return (
                "mptcp: no MPTCP connection was made (the application did not run under "
                "mptcpize, or the server did not accept MPTCP)"
            )
        return None


def _nonzero(c: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in c.items() if v}
