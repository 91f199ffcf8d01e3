"""How the real-time workload sets up and instruments aiortc (https://github.com/aiortc/aiortc).

Rule: everything this workload changes in the stack is here, applied once per
process by `configure()`, and each change is a module attribute aiortc reads at call
time:
  * the VP8 bitrate cap: aiortc's VP8 encoder clamps the congestion controller's
    target (REMB) to `aiortc.codecs.vpx.MAX_BITRATE`, 1.5 Mbit/s in aiortc 1.16.0
    (aiortc/codecs/vpx.py: `MAX_BITRATE = 1500000`, applied by the
    `Vp8Encoder.target_bitrate` setter); the issue's cloud gaming target is
    >= 10 Mbit/s where the link allows, so the cap is raised (`MAX_BITRATE_BPS`);
  * ICE host candidates: aioice offers every address of every interface
    (`aioice.ice.get_host_addresses`); in a testbed ue has one per channel link and
    the agent's TUN, and only the address the kernel uses towards the server is
    routed by the scheme, so both ends offer exactly one address;
  * timing probes around the codec calls and the receiver's RTP input
    (`Probes`): encode and decode start/end per frame, the first packet's arrival
    per RTP timestamp and bytes per media kind, all on time.monotonic() (one
    CLOCK_MONOTONIC for every namespace of the machine). aiortc encodes in its
    loop's executor threads and decodes in a decoder thread, and closing the peer
    connection does not wait for an encode in flight (RTCRtpSender.stop cancels the
    task awaiting `run_in_executor`; the thread finishes its frame and the probe
    writes it afterwards), so every probe write and `Probes.snapshot()` hold
    `Probes.lock`.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

#: The VP8 encoder's bitrate cap this workload sets (bit/s; aiortc's own: 1.5 Mbit/s).
MAX_BITRATE_BPS = 20_000_000


@dataclass
class Probes:
    """What the probes saw in this process (times: time.monotonic(), s).

    encode: {media timestamp (90 kHz, as the encoder returns it): (start, end, bytes,
        target bit/s)} for video frames sent (target: the encoder's bitrate target
        then, REMB clamped to the cap);
    decode: {media timestamp (the receiver's: RTP timestamp - `rtp_origin`): (start,
        end)} for video frames decoded; the decoded frame's pts is the same;
    first_packet: {RTP timestamp: arrival of its first packet} (video);
    rtp_origin: the RTP timestamp the video receiver counts media time from (its
        TimestampMapper's origin, aiortc/rtcrtpreceiver.py);
    rx_bytes: {kind: [(arrival, payload bytes), ...]} of RTP packets received."""

    encode: dict[int, tuple[float, float, int, int]] = field(default_factory=dict)
    decode: dict[int, tuple[float, float]] = field(default_factory=dict)
    first_packet: dict[int, float] = field(default_factory=dict)
    rx_bytes: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    rtp_origin: int | None = None
    #: Held by every write and by `snapshot()` (the codec threads write).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def reset(self) -> None:
        """Forget everything (a new session in the same process)."""
        with self.lock:
            for d in (self.encode, self.decode, self.first_packet, self.rx_bytes):
                d.clear()
            self.rtp_origin = None

    def snapshot(self) -> dict[str, Any]:
        """A copy of the probes as plain data (the `records` message's fields), taken
        while no probe writes: safe while codec threads still run."""
        with self.lock:
            return {
                "encode": dict(self.encode),
                "decode": dict(self.decode),
                "first_packet": dict(self.first_packet),
                "rx_bytes": {kind: list(v) for kind, v in self.rx_bytes.items()},
                "rtp_origin": self.rtp_origin,
            }


PROBES = Probes()
_configured = False


def source_address(server: str) -> str:
    """The local address the kernel picks to reach `server` (a UDP connect sends
    nothing): the one address the scheme routes."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((server, 9))
        return str(s.getsockname()[0])


def configure(host_address: str, max_bitrate: int = MAX_BITRATE_BPS) -> None:
    """Apply this workload's changes to aiortc and aioice (see the module docstring);
    idempotent. `host_address`: the only ICE host candidate address this end offers."""
    global _configured
    import aioice.ice
    import aiortc.codecs.vpx as vpx
    from aiortc import rtcrtpreceiver

    vpx.MAX_BITRATE = max_bitrate  # type: ignore[misc]
    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: [host_address]  # type: ignore[assignment]
    if _configured:
        return
    _configured = True
    _wrap_encoder(vpx.Vp8Encoder)
    _wrap_decoder(vpx.Vp8Decoder)
    _wrap_receiver(rtcrtpreceiver.RTCRtpReceiver)


def _wrap_encoder(cls: Any) -> None:
    encode = cls.encode

    def timed_encode(self: Any, frame: Any, force_keyframe: bool = False) -> Any:
        t0 = time.monotonic()
        payloads, timestamp = encode(self, frame, force_keyframe)
        size = sum(len(p) for p in payloads)
        probe = (t0, time.monotonic(), size, int(self.target_bitrate))
        with PROBES.lock:
            PROBES.encode[int(timestamp)] = probe
        return payloads, timestamp

    cls.encode = timed_encode


def _wrap_decoder(cls: Any) -> None:
    decode = cls.decode

    def timed_decode(self: Any, encoded_frame: Any) -> Any:
        t0 = time.monotonic()
        frames = decode(self, encoded_frame)
        with PROBES.lock:
            PROBES.decode[int(encoded_frame.timestamp)] = (t0, time.monotonic())
        return frames

    cls.decode = timed_decode


def _wrap_receiver(cls: Any) -> None:
    handle = cls._handle_rtp_packet

    async def probed(self: Any, packet: Any, arrival_time_ms: int) -> None:
        now = time.monotonic()
        kind = self.track.kind if self.track is not None else "?"
        with PROBES.lock:
            PROBES.rx_bytes.setdefault(kind, []).append((now, len(packet.payload)))
            if kind == "video":
                PROBES.first_packet.setdefault(int(packet.timestamp), now)
        await handle(self, packet, arrival_time_ms)
        if kind == "video" and PROBES.rtp_origin is None:
            mapper = getattr(self, "_RTCRtpReceiver__timestamp_mapper", None)
            with PROBES.lock:
                PROBES.rtp_origin = getattr(mapper, "_origin", None)

    cls._handle_rtp_packet = probed
