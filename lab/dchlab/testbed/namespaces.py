"""The run's network namespaces (ue, gw, srv; with N > 1 devices ue1..ueN and the
channels' cell namespaces, dchlab.testbed.devices) and their addresses.

Created with lo up, their sysctls (IPv4 only, forwarding on gw, the congestion
control) and ue's resolv.conf; then the service addresses in srv and the
point-to-point addresses and routes on the links (the plan is dchlab.testbed.addressing;
ue's default route is the scheme's). Removed by the run record's teardown
(dchlab.testbed.runrecord), not here.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dchlab.testbed import addressing as A
from dchlab.testbed import sh
from dchlab.testbed.cc import allowing, set_netns_cc

ROLES = ("ue", "gw", "srv")
#: Roles of the cell namespaces of an N-device run: where the devices' links of a
#: shared channel meet before its one emulated link to gw (dchlab.testbed.devices).
CELL_ROLES = {"llc": "llc-cell", "hbc": "hbc-cell"}


def device_roles(devices: int) -> list[str]:
    """The devices' namespace roles: "ue" (device 1, the measured one; the role every
    single-device caller uses), then "ue2" ... "ueN"."""
    return ["ue", *(f"ue{i}" for i in range(2, devices + 1))]


def role_names(prefix: str, devices: int = 1, shared_hbc: bool = False) -> dict[str, str]:
    """{role: namespace}: `<prefix>-ue|gw|srv` for one device; with N > 1 devices
    `<prefix>-ue1` ... `<prefix>-ueN` (roles ue, ue2, ...), gw, srv, the llc cell
    `<prefix>-llc` and, with a shared HBC, the hbc cell `<prefix>-hbc`."""
    if devices == 1:
        return {r: f"{prefix}-{r}" for r in ROLES}
    names = {r: f"{prefix}-ue{i}" for i, r in enumerate(device_roles(devices), 1)}
    names.update({r: f"{prefix}-{r}" for r in ("gw", "srv")})
    for channel in ("llc", "hbc") if shared_hbc else ("llc",):
        names[CELL_ROLES[channel]] = f"{prefix}-{channel}"
    return names


def resolv_conf_dir(ue_netns: str) -> Path:
    """Where `ip netns exec` finds ue's resolv.conf (removed with the run)."""
    return Path(f"/etc/netns/{ue_netns}")


class Namespaces:
    """The namespaces of the run with prefix `prefix`: `names` {role: namespace}, and
    `cc`, the congestion control they have ("" before create())."""

    def __init__(self, prefix: str, devices: int = 1, shared_hbc: bool = False) -> None:
        self.names = role_names(prefix, devices, shared_hbc)
        #: the devices' roles (ue first): each gets its resolv.conf
        self.device_roles = device_roles(devices)
        self.cc = ""

    @property
    def etc_dirs(self) -> list[Path]:
        """The devices' /etc/netns directories (their resolv.conf), for the run record."""
        return [resolv_conf_dir(self.names[r]) for r in self.device_roles]

    def create(self, cc: str) -> None:
        """Every namespace (ue, gw, srv; devices and cells) with lo up, its sysctls
        (congestion control included) and the devices' resolv.conf: two processes per
        namespace."""
        for role, ns in self.names.items():
            sh.run(["ip", "netns", "add", ns], f"create namespace {role} ({ns})")
        with allowing(cc):
            for role, ns in self.names.items():
                settings = {
                    "net.ipv4.conf.all.rp_filter": "0",
                    "net.ipv4.conf.default.rp_filter": "0",
                    # IPv4 only: no router solicitations or DAD chatter on the channels.
                    "net.ipv6.conf.all.disable_ipv6": "1",
                    "net.ipv6.conf.default.disable_ipv6": "1",
                    "net.ipv4.tcp_congestion_control": cc,
                }
                if role == "gw" or role in CELL_ROLES.values():  # routers
                    settings["net.ipv4.ip_forward"] = "1"
                args = [f"{k}={v}" for k, v in settings.items()]
                script = 'ip link set lo up && exec sysctl -q -w "$@"'
                sh.run(["ip", "netns", "exec", ns, "sh", "-c", script, "sh", *args],
                       f"lo and sysctls in {role}")  # fmt: skip
        self.cc = cc
        for etc in self.etc_dirs:
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "resolv.conf").write_text(
                f"nameserver {A.DNS_SERVER}\noptions timeout:2 attempts:2\n"
            )

    def configure(self, cc: str, service_addresses: Iterable[str]) -> None:
        """Congestion control everywhere (if it changed since create()); the service
        addresses and the DNS server's in srv (before the servers bind them)."""
        if cc != self.cc:  # prepared with another one
            set_netns_cc(list(self.names.values()), cc)
            self.cc = cc
        svc = sorted(set(service_addresses) | {A.DNS_SERVER})
        # replace: idempotent when a prepared testbed added them already
        lines = [f"addr replace {a}/32 dev lo" for a in svc]
        sh.ip_batch(self.names["srv"], lines, "add service addresses in srv")

    def address(self, links: Iterable[str]) -> None:
        """Point-to-point addresses on every link and the gw-srv path; srv and gw routes
        (ue's default route is the scheme's)."""
        # One `ip -batch` per namespace (the step names the namespace and the lines).
        ue, gw = [], []
        for name in links:
            p = A.LINKS[name]
            ue.append(f"addr add {p.near} peer {p.far} dev {name}")
            gw.append(f"addr add {p.far} peer {p.near} dev {name}")
        sh.ip_batch(self.names["ue"], ue, "address the links in ue: " + "; ".join(ue))
        self.address_server_path(gw, "address links, gw-srv path, route to the servers in gw")

    def address_server_path(self, gw: list[str], step: str) -> None:
        """The gw-srv path's addresses and the routes to the servers (gw) and back (srv);
        `gw`: gw's other lines, run in the same batch (named `step`)."""
        sp = A.SRV_PATH
        gw = [*gw, f"addr add {sp.near} peer {sp.far} dev srv0", "link set srv0 up",
              f"route add {A.SERVICE_NET} via {sp.far} dev srv0"]  # fmt: skip
        srv = [f"addr add {sp.far} peer {sp.near} dev gw0", "link set gw0 up",
               f"route add default via {sp.near} dev gw0"]  # fmt: skip
        sh.ip_batch(self.names["gw"], gw, step)
        sh.ip_batch(self.names["srv"], srv, "address gw-srv path, default route in srv")

    def interface_counters(self) -> dict[str, Any]:
        """{role: {interface: rx/tx bytes and packets}} of the devices (ue, ue2, ...)
        and gw (lo left out)."""
        out: dict[str, Any] = {}
        for role in (*self.device_roles, "gw"):
            proc = subprocess.run(
                ["ip", "-n", self.names[role], "-s", "-j", "link"], capture_output=True, text=True
            )
            try:
                links = json.loads(proc.stdout or "[]")
            except ValueError:
                continue
            out[role] = {
                link["ifname"]: {
                    "rx_bytes": link["stats64"]["rx"]["bytes"],
                    "rx_packets": link["stats64"]["rx"]["packets"],
                    "tx_bytes": link["stats64"]["tx"]["bytes"],
                    "tx_packets": link["stats64"]["tx"]["packets"],
                }
                for link in links
                if link.get("ifname") != "lo" and "stats64" in link
            }
        return out
