"""The page-load protocol, `protocol: h2 | h3 | recorded` (docs/webreplay.md "HTTP/3"):
what each choice asks of the replay server and of Chromium, which schemes it refuses,
and how a load's responses prove it.

- `h2` (the default, today's behaviour): TLS over TCP, each origin with the ALPN its
  corpus entry gives (HTTP/2, or HTTP/1.1 where recorded so); no QUIC anywhere.
- `h3`: every origin also serves HTTP/3 over QUIC on UDP 443 (webreplay `--h3-port`),
  and Chromium is told to use QUIC for every corpus origin from the first request
  (`--origin-to-force-quic-on`: no TCP connection, no Alt-Svc warm-up in the PLT). Any
  response over another protocol makes the load invalid (`fallback_reason`).
- `recorded`: each origin as its corpus entry says. The corpus format records an
  origin's ALPN for TLS over TCP only (`["h2", "http/1.1"]` or `["http/1.1"]`,
  docs/formats.md): no corpus records which origins spoke QUIC, so `recorded` is `h2`
  for every origin today (`quic_hosts` is where a recorded QUIC origin would enter).

Chromium trusts the testbed CA through the NSS database for QUIC as for TCP: measured
with Chromium 156 (2026-11-26, 2-core Debian 12 VM), a forced-QUIC load of a webreplay
origin succeeds without `--ignore-certificate-errors-spki-list`, so none is passed (it
would excuse certificate errors under h3 that fail a load under h2). An origin that does
not answer QUIC fails its requests with net::ERR_QUIC_HANDSHAKE_FAILED: a forced origin
never falls back to TCP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dchlab.errors import UserError

PROTOCOLS = ("h2", "h3", "recorded")
DEFAULT = "h2"
#: The UDP port every origin's HTTP/3 endpoint listens on (as HTTPS does on TCP 443).
H3_PORT = 443

#: Scheme kinds (dchlab.testbed.schemes Scheme.kind) that cannot carry QUIC: MPTCP is a
#: TCP extension, and the object proxy terminates TCP+TLS connections.
_REFUSED_KINDS = {
    "mptcp": "MPTCP is TCP: a QUIC load cannot use it",
    "proxy": "the object-level schemes (objproxy, ians, ...) proxy HTTP over TCP; "
    "they have no HTTP/3 path",
}


class ProtocolError(UserError, ValueError):
    """A protocol value or a scheme + protocol combination that cannot run."""


def check(value: object, where: str) -> str:
    """`value` if it is a protocol, else a ProtocolError naming `where`."""
    if value not in PROTOCOLS:
        raise ProtocolError(f"{where}: expected one of {', '.join(PROTOCOLS)}, got {value!r}")
    return str(value)


def refuse(scheme: str, protocol: str, where: str) -> None:
    """Refuse a scheme that would silently measure TCP under `h3` (ProtocolError naming
    `where`, the scheme and why); every scheme runs under h2 and recorded."""
    if protocol != "h3":
        return
    from dchlab.testbed.errors import TestbedError
    from dchlab.testbed.schemes import get_scheme

    try:
        kind = get_scheme(scheme).kind
    except TestbedError:
        return  # not a scheme at all: the testbed says so when it is looked up to run
    why = _REFUSED_KINDS.get(kind)
    if why:
        raise ProtocolError(f"{where}: scheme {scheme!r} cannot run under protocol h3 ({why})")


def quic_hosts(protocol: str, hosts: Iterable[str]) -> list[str]:
    """The origins of `hosts` a load reaches over QUIC under `protocol` (sorted)."""
    return sorted(set(hosts)) if protocol == "h3" else []


def webreplay_args(protocol: str) -> list[str]:
    """webreplay flags of `protocol`: an HTTP/3 endpoint on every origin under h3."""
    return ["--h3-port", str(H3_PORT)] if protocol == "h3" else []


def chromium_flags(protocol: str, hosts: Iterable[str]) -> list[str]:
    """Chromium flags of `protocol` for a testbed serving `hosts`: QUIC forced for every
    QUIC origin (no TCP connection, no Alt-Svc discovery)."""
    quic = quic_hosts(protocol, hosts)
    if not quic:
        return []
    return [
        "--enable-quic",
        "--origin-to-force-quic-on=" + ",".join(f"{h}:{H3_PORT}" for h in quic),
    ]


def protocol_counts(by_protocol: Mapping[str, int]) -> dict[str, int]:
    """A load's {Chromium protocol: responses} as a row counts them: h3, h2, and other
    (http/1.1, or a protocol Chromium did not name)."""
    out = {"h3": 0, "h2": 0, "other": 0}
    for p, n in by_protocol.items():
        out[p if p in ("h3", "h2") else "other"] += int(n)
    return out


def fallback_reason(protocol: str, counts: dict[str, int]) -> str:
    """Why a load under `protocol` is invalid for what its responses came over ("": it
    is not). Under h3 every response must be h3: one over TCP is a fallback. Worded so
    that run_quality.reason_kind counts it as "responses fell back to TCP"."""
    if protocol != "h3":
        return ""
    tcp = counts.get("h2", 0) + counts.get("other", 0)
    if tcp:
        return f"{tcp} responses fell back to TCP (and {counts.get('h3', 0)} over QUIC)"
    return ""


def is_quic_error(error: str) -> bool:
    """A Chromium network error of its QUIC stack (net::ERR_QUIC_HANDSHAKE_FAILED when
    an origin does not answer QUIC, net::ERR_QUIC_PROTOCOL_ERROR, ...)."""
    return error.startswith("net::ERR_QUIC")
