"""The background users' clients: `rust` (the `bguser` binary, crates/bguser: Chromium's
TLS ClientHello, HTTP/2 settings and DNS queries) and `python`
(dchlab.workloads.bgusers.replay, httpx). The default is the one whose per-channel bytes
and packet sizes agree with Chromium's (docs/bgusers.md, "Validation against Chromium")."""

from __future__ import annotations

#: Every client, the default first.
CLIENTS = ("rust", "python")
DEFAULT = CLIENTS[0]


def check(client: str, where: str) -> str:
    """`client` if it is one of CLIENTS, else ValueError naming `where`."""
    if client not in CLIENTS:
        raise ValueError(
            f"{where}: background client {client!r}: expected one of {', '.join(CLIENTS)}"
        )
    return client
