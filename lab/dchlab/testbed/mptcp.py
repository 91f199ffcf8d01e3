"""Kernel MPTCP plumbing for the `mptcp` scheme: limits, endpoints, per-source
routing, and the counters that tell how many subflows were established."""

from __future__ import annotations

import subprocess

from dchlab.testbed.sh import ip


def configure_client(ns: str, links: list[tuple[str, str]], table_base: int = 100) -> None:
    """On the device: each (dev, addr) gets a routing table used for packets from
    `addr`, so a subflow leaves by its own link; every address but the first (the
    default route's) is an MPTCP `subflow` endpoint."""
    ip(
        ns,
        ["mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8"],
        "mptcp limits on ue",
    )
    ip(ns, ["mptcp", "endpoint", "flush"], "flush mptcp endpoints on ue")
    for i, (dev, addr) in enumerate(links):
        table = str(table_base + i + 1)
        ip(
            ns,
            ["route", "add", "default", "dev", dev, "table", table],
            f"route table {table} via {dev} on ue",
        )
        ip(
            ns,
            ["rule", "add", "from", addr, "table", table, "priority", str(1000 + i)],
            f"rule from {addr} on ue",
        )
        if i > 0:
            ip(
                ns,
                ["mptcp", "endpoint", "add", addr, "dev", dev, "subflow"],
                f"mptcp endpoint {addr} on ue",
            )


def configure_server(ns: str) -> None:
    """On the server: accept up to 8 joined subflows per connection."""
    ip(
        ns,
        ["mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "0"],
        "mptcp limits on srv",
    )


def counters(ns: str) -> dict[str, int]:
    """The namespace's MPTcpExt counters (/proc/net/netstat), e.g. MPJoinSynAckRx."""
    text = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", "/proc/net/netstat"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    rows = [line.split() for line in text.splitlines() if line.startswith("MPTcpExt:")]
    if len(rows) < 2:
        return {}
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:], strict=False)}


def live_subflows(ns: str) -> int:
    """Established TCP subflows that belong to MPTCP connections right now (`ss -ti`
    shows `tcp-ulp-mptcp` on each)."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "ss", "-tniH", "state", "established"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    return out.count("tcp-ulp-mptcp")
