"""The host table of a run: which names the testbed's DNS and webreplay serve, at
which service address (198.19.128.0/17, dchlab.testbed.addressing): server.test, every
origin of the corpus manifest, and the configuration's extra hosts."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from dchlab.testbed import addressing as A
from dchlab.testbed.errors import TestbedError


def host_table(
    corpus: Path | str | None, hosts: Sequence[str] | Mapping[str, str] | None
) -> dict[str, str]:
    """{host: address}: server.test, the corpus's origins and the extra `hosts` (names
    numbered in order after the origins, or an explicit {name: address} mapping whose
    addresses must lie in the service network)."""
    extra: list[str] = []
    explicit: dict[str, str] = {}
    if corpus:
        extra += corpus_hosts(Path(corpus) / "manifest.json")
    if isinstance(hosts, Mapping):
        net = ipaddress.ip_network(A.SERVICE_NET)
        for h, addr in hosts.items():
            if ipaddress.ip_address(addr) not in net:
                raise TestbedError(f"hosts: address {addr} of {h} is outside {A.SERVICE_NET}")
            explicit[h.lower()] = addr
    elif hosts:
        extra += list(hosts)
    table = A.service_addresses([h for h in extra if h.lower() not in explicit])
    table.update(explicit)
    return table


_HOSTS_CACHE: dict[tuple[str, int, int], list[str]] = {}


def corpus_hosts(manifest: Path) -> list[str]:
    """origins[].host of a corpus manifest, parsed once per manifest version (a real
    page set's manifest is megabytes of JSON; a campaign builds a testbed per load)."""
    try:
        st = manifest.stat()
        key = (str(manifest.resolve()), st.st_mtime_ns, st.st_size)
        if key not in _HOSTS_CACHE:
            data = json.loads(manifest.read_text())
            _HOSTS_CACHE[key] = [o["host"] for o in data["origins"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TestbedError(
            f"corpus manifest {manifest}: cannot read origins[].host ({exc})"
        ) from exc
    return list(_HOSTS_CACHE[key])
