"""Timing probes at the datagram level of a real-time session: when each datagram left
this process and when the kernel received it, so that the wire's part of a latency is
told apart from the time a datagram waits for this process's event loop.

Rule: the probes sit at the narrowest points aioice (aiortc's ICE) offers, because
aiortc exposes no per-datagram time of its own:
  * sent: `StunProtocol.send_data`, the call right before the socket's sendto. An
    SRTP packet's RTP header is in the clear (RFC 3711 §3.1), so its SSRC and RTP
    timestamp say which frame it carries: per (SSRC, RTP timestamp) the first and
    last packet's send time (`Probes.sent_rtp`); a DTLS application-data record
    (content type 23, RFC 6347 §4.1; SCTP, so the data channel's input events) gets
    its send time listed (`Probes.dtls_sent`);
  * received: `StunProtocol.datagram_received`, called by asyncio once per datagram
    right after its recvfrom, asks the kernel when that datagram arrived
    (SIOCGSTAMPNS: the socket's last receive timestamp, set when the packet entered
    this namespace's stack) and converts it to time.monotonic() (the kernel stamps
    CLOCK_REALTIME; the offset between the clocks is read next to it, so a clock
    step during a session would show as a wrong wire time). SRTP packets: per (SSRC,
    RTP timestamp) the first and last arrival (`Probes.rx_kernel_rtp`). DTLS records
    are handed to aiortc through aioice's queue; their kernel time follows them by
    the bytes object's identity to `Connection.recvfrom`, where aiortc's DTLS loop
    takes the next datagram, and is kept as `current_rx()` while that loop processes
    it (one task processes datagrams one at a time, so a data channel message
    handler reads the kernel time of the datagram that carried it).
Every write holds `Probes.lock` (stack.Probes: the codec threads write too).
"""

from __future__ import annotations

import fcntl
import struct
import time
from typing import Any

#: ioctl: the socket's last receive time as a struct timespec (linux/sockios.h).
SIOCGSTAMPNS = 0x8907
_TIMESPEC = struct.Struct("@qq")
#: DTLS content type of application data (RFC 6347 §4.1, RFC 5246 §6.2.1).
DTLS_APPLICATION_DATA = 23

#: Kernel arrival of DTLS datagrams queued in aioice, by id() of the bytes object.
_pending_rx: dict[int, float] = {}
#: Kernel arrival (monotonic s) of the datagram aiortc's DTLS loop last took.
_current_rx: float | None = None


def reset() -> None:
    """Forget the datagrams in flight (a new session in the same process)."""
    global _current_rx
    _pending_rx.clear()
    _current_rx = None


def current_rx() -> float | None:
    """The kernel arrival time (time.monotonic() s) of the datagram aiortc is
    processing now (None: unknown), for a data channel's message handler."""
    return _current_rx


def kernel_rx_time(sock: Any) -> float | None:
    """When the kernel received the last datagram read from `sock`, on
    time.monotonic() (None: the kernel has no stamp)."""
    try:
        raw = fcntl.ioctl(sock.fileno(), SIOCGSTAMPNS, bytes(_TIMESPEC.size))
    except OSError:
        return None
    sec, ns = _TIMESPEC.unpack(raw)
    offset = time.clock_gettime(time.CLOCK_REALTIME) - time.monotonic()
    return sec + ns / 1e9 - offset


def rtp_key(data: bytes) -> tuple[int, int] | None:
    """(SSRC, RTP timestamp) of an (S)RTP packet, None for anything else (RTCP,
    DTLS, STUN): RFC 7983 §7 demultiplexes by the first byte (128-191: RTP/RTCP) and
    RFC 5761 §4 RTCP from RTP by the second (192-223)."""
    if len(data) < 12 or not 128 <= data[0] <= 191 or 192 <= data[1] <= 223:
        return None
    ts, ssrc = struct.unpack_from("!II", data, 4)
    return ssrc, ts


def _first_last(table: dict[int, dict[int, list[float]]], key: tuple[int, int], t: float) -> None:
    ssrc, ts = key
    seen = table.setdefault(ssrc, {}).get(ts)
    if seen is None:
        table[ssrc][ts] = [t, t]
    else:
        seen[1] = t


def install(probes: Any, stun_protocol: type, connection: type) -> None:
    """Wrap aioice's `StunProtocol` and `Connection` (module docstring); `probes`:
    the process's stack.Probes."""
    send_data = stun_protocol.send_data  # type: ignore[attr-defined]
    received = stun_protocol.datagram_received  # type: ignore[attr-defined]
    made = stun_protocol.connection_made  # type: ignore[attr-defined]
    recvfrom = connection.recvfrom  # type: ignore[attr-defined]

    async def probed_send(self: Any, data: bytes, addr: tuple[str, int]) -> None:
        now = time.monotonic()
        key = rtp_key(data)
        with probes.lock:
            if key is not None:
                _first_last(probes.sent_rtp, key, now)
            elif data and data[0] == DTLS_APPLICATION_DATA:
                probes.dtls_sent.append(now)
        await send_data(self, data, addr)

    def probed_made(self: Any, transport: Any) -> None:
        made(self, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            kernel_rx_time(sock)  # the first ask turns the socket's receive stamps on

    def probed_received(self: Any, data: bytes, addr: tuple[Any, ...]) -> None:
        transport = getattr(self, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        t = kernel_rx_time(sock) if sock is not None else None
        if t is not None and data:
            key = rtp_key(data)
            if key is not None:
                with probes.lock:
                    _first_last(probes.rx_kernel_rtp, key, t)
                    if key[1] not in probes.released:  # stack.Probes.rx_kernel_last
                        probes.rx_kernel_last[key[1]] = t
            elif 20 <= data[0] <= 63:  # DTLS (RFC 7983 §7)
                _pending_rx[id(data)] = t
        received(self, data, addr)

    async def probed_recvfrom(self: Any) -> tuple[bytes, int]:
        global _current_rx
        data, component = await recvfrom(self)
        _current_rx = _pending_rx.pop(id(data), None)
        return data, component

    stun_protocol.send_data = probed_send  # type: ignore[attr-defined]
    stun_protocol.connection_made = probed_made  # type: ignore[attr-defined]
    stun_protocol.datagram_received = probed_received  # type: ignore[attr-defined]
    connection.recvfrom = probed_recvfrom  # type: ignore[attr-defined]
