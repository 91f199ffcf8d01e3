"""The testbed's addresses (see docs/testbed.md).

Only 198.18.0.0/15 (RFC 2544 benchmarking) is used, and only inside the run's own
namespaces, so the same addresses repeat in every run without clashing: two runs
differ by their namespace names, never by their addresses.

    198.18.1.0/30   HBC link        ue 198.18.1.2  <->  gw 198.18.1.1
    198.18.2.0/30   LLC link        ue 198.18.2.2  <->  gw 198.18.2.1
    198.18.3.0/30   gw <-> srv      gw 198.18.3.1  <->  srv 198.18.3.2
    198.18.4.0/30   ideal link      ue 198.18.4.2  <->  gw 198.18.4.1  (scheme `ideal`)
    198.19.0.1      gateway agent's TUN (gw)
    198.19.0.2      client agent's TUN (ue): the applications' address under agent schemes
    198.19.128.0/17 service addresses in srv:
        198.19.128.1     server.test
        198.19.128.2...  corpus origins and extra hosts, one each, in order
        198.19.255.53    DNS server (dnsmasq)

With N > 1 devices (dchlab.testbed.devices; device i = 1..N, ue1 is the measured one):

    198.18.1.(1+i)  device i's HBC address; gw keeps 198.18.1.1 (on each hbc<i> link,
                    or on its one hbc link behind the hbc cell)
    198.18.2.(1+i)  device i's LLC address; gw keeps 198.18.2.1 behind the llc cell
    198.18.5.1      the hbc cell's router address (its side of every veth and the link to gw)
    198.18.6.1      the llc cell's router address (likewise)
    198.19.0.(1+i)  device i's client TUN (device 1: 198.19.0.2, as with one device)
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

#: Agent ports on the gateway's channel addresses (UDP).
AGENT_PORT_HBC = 4500
AGENT_PORT_LLC = 4501


@dataclass(frozen=True)
class P2P:
    """A point-to-point link between `ue` (or `gw`) and its peer: a /30."""

    name: str
    near: str  # the ue-side (or gw-side for the srv path) address
    far: str  # the peer's address


HBC = P2P("hbc", near="198.18.1.2", far="198.18.1.1")
LLC = P2P("llc", near="198.18.2.2", far="198.18.2.1")
SRV_PATH = P2P("srv", near="198.18.3.1", far="198.18.3.2")  # near = gw, far = srv
IDEAL = P2P("ideal", near="198.18.4.2", far="198.18.4.1")
LINKS = {p.name: p for p in (HBC, LLC, IDEAL)}

GW_AGENT = "198.19.0.1"
UE_AGENT = "198.19.0.2"

#: Router address of each channel's cell namespace (N > 1 devices).
CELL_ROUTER = {"hbc": "198.18.5.1", "llc": "198.18.6.1"}


def device_channel_address(link: str, i: int) -> str:
    """Device i's (1-based) address on channel `link` (hbc or llc) with N > 1 devices:
    198.18.1.(1+i) or 198.18.2.(1+i); device 1's is the single device's."""
    p = LINKS[link]
    return str(ipaddress.IPv4Address(p.far) + i)


def device_agent_address(i: int) -> str:
    """Device i's (1-based) client TUN address: 198.19.0.(1+i) (device 1: UE_AGENT)."""
    return str(ipaddress.IPv4Address(GW_AGENT) + i)


SERVICE_NET = "198.19.128.0/17"
SERVER_TEST = "198.19.128.1"
DNS_SERVER = "198.19.255.53"
_FIRST_EXTRA = ipaddress.IPv4Address("198.19.128.2")
_LAST_EXTRA = ipaddress.IPv4Address("198.19.255.0")  # keep clear of DNS_SERVER


def service_addresses(hosts: list[str]) -> dict[str, str]:
    """server.test plus one address per extra host name, in the order given.

    Duplicate names get one address; raises ValueError past ~32k hosts.
    """
    out = {"server.test": SERVER_TEST}
    nxt = _FIRST_EXTRA
    for host in hosts:
        host = host.strip().lower().rstrip(".")
        if not host or host in out:
            continue
        if nxt > _LAST_EXTRA:
            raise ValueError(f"too many hosts for {SERVICE_NET}: {len(hosts)}")
        out[host] = str(nxt)
        nxt += 1
    return out
