"""The run's three network namespaces (ue, gw, srv) and their addresses.

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


def resolv_conf_dir(ue_netns: str) -> Path:
    """Where `ip netns exec` finds ue's resolv.conf (removed with the run)."""
    return Path(f"/etc/netns/{ue_netns}")


class Namespaces:
    """The namespaces of the run with prefix `prefix`: `names` {role: namespace}, and
    `cc`, the congestion control they have ("" before create())."""

    def __init__(self, prefix: str) -> None:
        self.names = {r: f"{prefix}-{r}" for r in ROLES}
        self.cc = ""

    def create(self, cc: str) -> None:
        """ue, gw, srv with lo up, their sysctls (congestion control included) and ue's
        resolv.conf: two processes per namespace."""
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
                if role == "gw":
                    settings["net.ipv4.ip_forward"] = "1"
                args = [f"{k}={v}" for k, v in settings.items()]
                script = 'ip link set lo up && exec sysctl -q -w "$@"'
                sh.run(["ip", "netns", "exec", ns, "sh", "-c", script, "sh", *args],
                       f"lo and sysctls in {role}")  # fmt: skip
        self.cc = cc
        etc = resolv_conf_dir(self.names["ue"])
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
        sp = A.SRV_PATH
        ue, gw = [], []
        for name in links:
            p = A.LINKS[name]
            ue.append(f"addr add {p.near} peer {p.far} dev {name}")
            gw.append(f"addr add {p.far} peer {p.near} dev {name}")
        gw += [f"addr add {sp.near} peer {sp.far} dev srv0", "link set srv0 up",
               f"route add {A.SERVICE_NET} via {sp.far} dev srv0"]  # fmt: skip
        srv = [f"addr add {sp.far} peer {sp.near} dev gw0", "link set gw0 up",
               f"route add default via {sp.near} dev gw0"]  # fmt: skip
        sh.ip_batch(self.names["ue"], ue, "address the links in ue: " + "; ".join(ue))
        sh.ip_batch(self.names["gw"], gw, "address links, gw-srv path, route to the servers in gw")
        sh.ip_batch(self.names["srv"], srv, "address gw-srv path, default route in srv")

    def interface_counters(self) -> dict[str, Any]:
        """{role: {interface: rx/tx bytes and packets}} of ue and gw (lo left out)."""
        out: dict[str, Any] = {}
        for role in ("ue", "gw"):
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
