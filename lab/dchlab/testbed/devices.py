"""The N-device topology (TestbedConfig.devices > 1): ue1 ... ueN share ONE emulated
LLC (one chanemu, so one queue per direction) and have an emulated HBC each, or share
one too (TestbedConfig.shared_hbc). docs/testbed.md "N devices" draws it.

A shared channel is a *cell*: a namespace (`<prefix>-llc`, `<prefix>-hbc`) that routes
between a plain veth from every device and the channel's one chanemu to gw. The veths
are ideal (no rate, no delay), so every packet of that channel waits in the one
emulator's queue and nowhere else. A device's own HBC is a chanemu between its `hbc`
and gw's `hbc<i>`. Every device keeps the interface names `hbc` and `llc` and
reaches the gateway's channel addresses (198.18.1.1, 198.18.2.1) as with one device,
so its client agent's command line differs only by its tunnel address and key.

One device (devices == 1) never comes here: links.start_links and
Namespaces.address build today's topology, unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dchlab.testbed import addressing as A
from dchlab.testbed import sh
from dchlab.testbed.errors import TestbedError
from dchlab.testbed.links import spawn_chanemu, start_server_path
from dchlab.testbed.namespaces import CELL_ROLES
from dchlab.testbed.schemes.agent import wants_oracle

if TYPE_CHECKING:
    from dchlab.testbed.config import TestbedConfig
    from dchlab.testbed.core import Testbed


def check(cfg: TestbedConfig, scheme_kind: str) -> None:
    """What an N-device run cannot do, refused before anything is built."""
    if cfg.devices == 1:
        return
    if scheme_kind != "agent":
        raise TestbedError(
            f"devices = {cfg.devices}: needs an agent scheme (each device runs its own "
            f"client agent), not {cfg.scheme!r}"
        )
    if wants_oracle(cfg):
        raise TestbedError(
            f"devices = {cfg.devices}: the HBC delay oracle is one link's; not available "
            "with several devices"
        )
    if cfg.decision_logs:
        raise TestbedError(
            f"devices = {cfg.devices}: decision_logs pairs one client's log with the "
            "gateway's; not available with several devices"
        )


def device_links(cfg: TestbedConfig) -> list[str]:
    """The emulated links' names (= their stats keys, `link-<name>` daemons): `llc`
    (shared), and `hbc` (shared) or `hbc1` ... `hbcN` (one per device)."""
    hbc = ["hbc"] if cfg.shared_hbc else [f"hbc{i}" for i in range(1, cfg.devices + 1)]
    return [*hbc, "llc"]


def start_links(tb: Testbed, exe: Path, channels: dict[str, str]) -> list[str]:
    """Spawn every emulator of the N-device topology (profiles: {"hbc", "llc": profile},
    the scheme's links) and the gw-srv path; create the cells' veths. Returns the
    emulators' daemon names, to wait for."""
    cfg = tb.cfg
    roles = tb.namespaces.device_roles if tb.namespaces else []
    for link in device_links(cfg):
        channel = link.rstrip("0123456789")
        offset = tb.offsets.get(channel, tb.offset_ms)
        if link == channel:  # shared: the cell's `gw` side to gw's `<channel>`
            cell = CELL_ROLES[channel]
            spawn_chanemu(tb, exe, link, channels[channel], (cell, "gw"), ("gw", channel), offset)
            veths = [f"link add ue{i} type veth peer name {channel} netns {tb.netns[role]}"
                     for i, role in enumerate(roles, 1)]  # fmt: skip
            sh.ip_batch(tb.netns[cell], veths, f"a veth from every device into the {channel} cell")
        else:  # device i's own HBC; its own loss draws (seed + i - 1), the same trace offset
            i = int(link[len(channel) :])
            spawn_chanemu(tb, exe, link, channels[channel], (roles[i - 1], channel), ("gw", link),
                          offset, seed=tb.cfg.seed + i - 1)  # fmt: skip
    return [*(f"link-{n}" for n in device_links(cfg)), *start_server_path(tb, exe)]


def address(tb: Testbed) -> None:
    """Addresses and routes of every device, cell and gw's channel side (then the gw-srv
    path as with one device). Device i: 198.18.1.(1+i) on `hbc`, 198.18.2.(1+i) on
    `llc`, each peering with the gateway's channel address (own link) or with its
    cell's router address and a route to the gateway's address through it (cell)."""
    assert tb.namespaces is not None
    roles = tb.namespaces.device_roles
    lines: dict[str, list[str]] = {r: [] for r in tb.netns}
    for link in device_links(tb.cfg):
        channel = link.rstrip("0123456789")
        gw_addr = A.LINKS[channel].far
        if link == channel:
            cell, router = CELL_ROLES[channel], A.CELL_ROUTER[channel]
            lines[cell].append(f"addr add {router} peer {gw_addr} dev gw")
            lines["gw"].append(f"addr add {gw_addr} peer {router} dev {channel}")
            for i, role in enumerate(roles, 1):
                dev_addr = A.device_channel_address(channel, i)
                lines[cell] += [f"addr add {router} peer {dev_addr} dev ue{i}",
                                f"link set ue{i} up"]  # fmt: skip
                lines[role] += [f"addr add {dev_addr} peer {router} dev {channel}",
                                f"link set {channel} up",
                                f"route add {gw_addr} via {router} dev {channel}"]  # fmt: skip
                lines["gw"].append(f"route add {dev_addr} via {router} dev {channel}")
        else:
            i = int(link[len(channel) :])
            dev_addr = A.device_channel_address(channel, i)
            lines[roles[i - 1]].append(f"addr add {dev_addr} peer {gw_addr} dev {channel}")
            lines["gw"].append(f"addr add {gw_addr} peer {dev_addr} dev {link}")
    gw = lines.pop("gw")
    for role, batch in lines.items():
        if batch:
            sh.ip_batch(tb.netns[role], batch, f"address the devices' links in {role}")
    tb.namespaces.address_server_path(gw, "address the devices' links and the gw-srv path in gw")
