"""How the real-time workload sets up and instruments aiortc (https://github.com/aiortc/aiortc).

Rule: everything this workload changes in the stack is here, applied once per
process by `configure()`, and each change is a module attribute aiortc reads at call
time:
  * the VP8 start bitrate and cap (`set_bitrates`, per session): aiortc's VP8
    encoder starts at `aiortc.codecs.vpx.DEFAULT_BITRATE` (500 kbit/s, read when an
    encoder is made) and clamps the congestion controller's target (REMB) to
    `aiortc.codecs.vpx.MAX_BITRATE`, 1.5 Mbit/s in aiortc 1.16.0 (aiortc/codecs/vpx.py,
    the `Vp8Encoder.target_bitrate` setter). The issue's cloud gaming target is
    >= 10 Mbit/s where the link allows: a session starts at its app's start bitrate
    (as WebRTC's `x-google-start-bitrate` and cloud gaming clients' configured
    bitrate do; docs/realtime.md) under its cap (`BITRATES`);
  * the encoder's target ladder: aiortc rebuilds its VP8 encoder, so sends a key
    frame, whenever the target moves by more than 10% (`Vp8Encoder.encode`; libvpx
    through PyAV takes no new rate in place, where libwebrtc reconfigures libvpx
    without one), and a congestion controller moves the target every 0.5 s: 51 key
    frames in a 60-s session. The target the controller sets is taken down to a
    step of a ladder (`on_ladder`: start x 1.25^k, and the cap; it stays on its step
    while the estimate is less than 10% below it), so the encoder is rebuilt only
    when the estimate crosses a step;
  * when the video jitter buffer releases a frame (`set_frame_release`, per session):
    aiortc's rule (on the next frame's first packet) or the marker bit's, as
    libwebrtc (dchlab.workloads.realtime.frame_release); audio keeps aiortc's;
  * the UDP receive buffer: aioice asks 256 KiB for its sockets
    (`aioice.turn.UDP_SOCKET_BUFFER_SIZE`); at 10 Mbit/s in ~1.3 kB packets that
    holds ~0.2 s (the kernel counts each packet's whole buffer), and a device process
    the shared CPU leaves waiting longer drops packets (NACKs, PLIs: key frames).
    libwebrtc asks 1 MiB for video (`kVideoRtpRecvBufferSize`,
    media/base/media_constants.h), as this workload does (`RECV_BUFFER_BYTES`);
  * ICE host candidates: aioice offers every address of every interface
    (`aioice.ice.get_host_addresses`); in a testbed ue has one per channel link and
    the agent's TUN, and only the address the kernel uses towards the server is
    routed by the scheme, so both ends offer exactly one address;
  * timing probes around the codec calls and the receiver's RTP input
    (`Probes`): encode and decode start/end per frame (and the encoder thread's CPU
    time, the frame's size and whether it is a key frame), the first and last
    packet's arrival per RTP timestamp and bytes per media kind, when the jitter
    buffer released each video frame (`JitterBuffer.add` returning it: aiortc hands
    it to the decoder's queue right after and exposes no time of its own), the
    receiver's congestion controller's estimates (each REMB it sends) and its loss
    reports (NACK, PLI), and each datagram's send and kernel receive time
    (dchlab.workloads.realtime.wire), all on time.monotonic() (one
    CLOCK_MONOTONIC for every namespace of the machine). aiortc encodes in its
    loop's executor threads and decodes in a decoder thread, and closing the peer
    connection does not wait for an encode in flight (RTCRtpSender.stop cancels the
    task awaiting `run_in_executor`; the thread finishes its frame and the probe
    writes it afterwards), so every probe write and `Probes.snapshot()` hold
    `Probes.lock`.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from dchlab.workloads.realtime import frame_release, wire

#: The VP8 encoder's bitrate cap this workload sets (bit/s; aiortc's own: 1.5 Mbit/s).
MAX_BITRATE_BPS = 20_000_000
#: The UDP receive buffer each ICE socket asks for (bytes; libwebrtc's for video).
RECV_BUFFER_BYTES = 1 << 20
#: aiortc's own start bitrate (bit/s; aiortc/codecs/vpx.py `DEFAULT_BITRATE`).
AIORTC_START_BPS = 500_000


#: aiortc's own floor (bit/s; aiortc/codecs/vpx.py `MIN_BITRATE`).
AIORTC_MIN_BPS = 250_000


@dataclass(frozen=True)
class Bitrates:
    """Where a session's video bitrate starts, the cap it stays under and the floor
    it stays above whatever the congestion controller says (bit/s; a floor as
    WebRTC's `x-google-min-bitrate`, for a fixed-rate service)."""

    start_bps: int
    max_bps: int
    min_bps: int = AIORTC_MIN_BPS

    def __post_init__(self) -> None:
        if not 0 < self.min_bps <= self.start_bps <= self.max_bps:
            raise ValueError(
                f"bitrates: expected 0 < min ({self.min_bps} bit/s) <= start "
                f"({self.start_bps} bit/s) <= max ({self.max_bps} bit/s)"
            )


#: Per app: cloud gaming starts at the issue's 10 Mbit/s (the encoder sends it from the
#: first frame; the congestion controller takes it from there); a video call keeps
#: aiortc's start (call apps send ~1-2.5 Mbit/s) and ramps as before.
BITRATES = {
    "cloud-gaming": Bitrates(10_000_000, MAX_BITRATE_BPS),
    "video-call": Bitrates(AIORTC_START_BPS, MAX_BITRATE_BPS),
}


@dataclass
class Probes:
    """What the probes saw in this process (times: time.monotonic(), s).

    encode: {media timestamp (90 kHz, as the encoder returns it): (start, end, bytes,
        target bit/s, CPU s, key)} for video frames sent (target: the encoder's
        bitrate target then, REMB clamped to the cap; CPU: the encoding thread's CPU
        time, `time.thread_time`, libvpx encoding in that thread; key: 1 for a key
        frame, 0 for a delta frame, -1 when the payload cannot be parsed);
    decode: {media timestamp (the receiver's: RTP timestamp - `rtp_origin`): (start,
        end)} for video frames decoded; the decoded frame's pts is the same;
    first_packet: {RTP timestamp: arrival of its first packet} (video);
    rtp_origin: the RTP timestamp the video receiver counts media time from (its
        TimestampMapper's origin, aiortc/rtcrtpreceiver.py);
    rx_bytes: {kind: [(arrival, payload bytes), ...]} of RTP packets received;
    remb: [(time, bit/s), ...]: each estimate the receiver's congestion controller
        sent back (REMB), the sender's encoder target until the next;
    nack: [(time, packets), ...]: each NACK the receiver sent (packets it found
        missing); pli: [time, ...]: each picture loss indication it sent (the sender
        answers with a key frame);
    last_packet: {RTP timestamp: arrival of its last packet before the jitter
        buffer released the frame} (video; as first_packet, when the receiver's event
        loop handles it). A packet of an already released frame (a retransmission
        or an overtaken packet arriving late) is not the frame's last: counting it
        put the "last packet" after the release (a negative jitter_buffer part);
    rx_kernel_last: {RTP timestamp: the kernel's latest arrival of an RTP packet
        with that timestamp before the frame's release, whatever its SSRC}: a
        retransmission (RFC 4588 §4: RTX keeps the original's timestamp, under its
        own SSRC) that completes a frame is its last packet on the wire;
    released: {RTP timestamp: when the jitter buffer released the frame to the
        decoder's queue} (video);
    video_ssrc: the SSRC of the video received;
    sent_rtp, rx_kernel_rtp: {SSRC: {RTP timestamp: [first, last]}}: when the
        frame's first and last (S)RTP packet left this process (right before sendto)
        and when the kernel received them (dchlab.workloads.realtime.wire);
    dtls_sent: [time, ...]: each DTLS application-data datagram (SCTP: the data
        channel's input events) sent (wire)."""

    encode: dict[int, tuple[float, float, int, int, float, int]] = field(default_factory=dict)
    decode: dict[int, tuple[float, float]] = field(default_factory=dict)
    first_packet: dict[int, float] = field(default_factory=dict)
    rx_bytes: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    remb: list[tuple[float, int]] = field(default_factory=list)
    nack: list[tuple[float, int]] = field(default_factory=list)
    pli: list[float] = field(default_factory=list)
    rtp_origin: int | None = None
    last_packet: dict[int, float] = field(default_factory=dict)
    released: dict[int, float] = field(default_factory=dict)
    video_ssrc: int | None = None
    sent_rtp: dict[int, dict[int, list[float]]] = field(default_factory=dict)
    rx_kernel_rtp: dict[int, dict[int, list[float]]] = field(default_factory=dict)
    rx_kernel_last: dict[int, float] = field(default_factory=dict)
    dtls_sent: list[float] = field(default_factory=list)
    #: Held by every write and by `snapshot()` (the codec threads write).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def reset(self) -> None:
        """Forget everything (a new session in the same process)."""
        with self.lock:
            for d in (self.encode, self.decode, self.first_packet, self.rx_bytes,
                      self.last_packet, self.released, self.sent_rtp, self.rx_kernel_rtp,
                      self.rx_kernel_last):  # fmt: skip
                d.clear()
            for seq in (self.remb, self.nack, self.pli, self.dtls_sent):
                seq.clear()
            self.rtp_origin = self.video_ssrc = None
        wire.reset()

    def snapshot(self) -> dict[str, Any]:
        """A copy of the probes as plain data (the `records` message's fields), taken
        while no probe writes: safe while codec threads still run."""
        with self.lock:
            return {
                "encode": dict(self.encode),
                "decode": dict(self.decode),
                "first_packet": dict(self.first_packet),
                "rx_bytes": {kind: list(v) for kind, v in self.rx_bytes.items()},
                "remb": list(self.remb),
                "nack": list(self.nack),
                "pli": list(self.pli),
                "rtp_origin": self.rtp_origin,
                "last_packet": dict(self.last_packet),
                "released": dict(self.released),
                "video_ssrc": self.video_ssrc,
                "sent_rtp": {
                    k: {t: list(v) for t, v in d.items()} for k, d in self.sent_rtp.items()
                },
                "rx_kernel_rtp": {
                    k: {t: list(v) for t, v in d.items()} for k, d in self.rx_kernel_rtp.items()
                },
                "rx_kernel_last": dict(self.rx_kernel_last),
                "dtls_sent": list(self.dtls_sent),
            }


#: Ratio between neighbouring steps of the encoder's target ladder.
LADDER_RATIO = 1.25
#: The target stays on its step while the estimate is within this fraction below it
#: (an estimate hovering at a step's edge would otherwise flip the target, and cost
#: a key frame, every 0.5 s; a congestion decrease is 15%: aiortc/rate.py).
LADDER_HOLD = 0.10


def on_ladder(
    bitrate: int, start: int, cap: int, current: int | None = None,
    ratio: float = LADDER_RATIO, hold: float = LADDER_HOLD,
) -> int:  # fmt: skip
    """The encoder target for a congestion controller's `bitrate` (bit/s): `cap` when
    it is at or above the cap, else the highest step start x ratio^k (k any integer)
    at or below it; but the `current` target when the estimate is below it by less
    than `hold` of it."""
    if current is not None and current * (1 - hold) <= bitrate < current:
        return current
    if bitrate >= cap:
        return cap
    k = math.floor(math.log(bitrate / start, ratio) + 1e-9)
    return round(start * ratio**k)


PROBES = Probes()
_configured = False


def source_address(server: str) -> str:
    """The local address the kernel picks to reach `server` (a UDP connect sends
    nothing): the one address the scheme routes."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((server, 9))
        return str(s.getsockname()[0])


def set_bitrates(bitrates: Bitrates) -> None:
    """The start bitrate, cap and floor of the VP8 encoders made from now on (a
    session's, before its tracks are negotiated)."""
    import aiortc.codecs.vpx as vpx

    vpx.DEFAULT_BITRATE = bitrates.start_bps  # type: ignore[misc]
    vpx.MAX_BITRATE = bitrates.max_bps  # type: ignore[misc]
    vpx.MIN_BITRATE = bitrates.min_bps  # type: ignore[misc]


#: The session's video frame release rule (frame_release.FRAME_RELEASES), read by the
#: jitter buffer on every packet; `set_frame_release` sets it.
_frame_release = frame_release.FRAME_RELEASES[0]


def set_frame_release(rule: str) -> None:
    """When the video jitter buffers release a frame from now on (a session's, before
    its tracks are negotiated): `next` (aiortc's) or `marker` (libwebrtc's)."""
    global _frame_release
    _frame_release = frame_release.check_rule(rule)


def configure(host_address: str, bitrates: Bitrates = BITRATES["cloud-gaming"]) -> None:
    """Apply this workload's changes to aiortc and aioice (see the module docstring);
    idempotent. `host_address`: the only ICE host candidate address this end offers."""
    global _configured
    import aioice.ice
    import aioice.turn
    import aiortc.codecs.vpx as vpx
    from aiortc import jitterbuffer, rate, rtcrtpreceiver

    set_bitrates(bitrates)
    aioice.turn.UDP_SOCKET_BUFFER_SIZE = RECV_BUFFER_BYTES  # type: ignore[misc]
    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: [host_address]  # type: ignore[assignment]
    if _configured:
        return
    _configured = True
    _wrap_encoder(vpx.Vp8Encoder)
    _ladder_target(vpx.Vp8Encoder)
    _wrap_decoder(vpx.Vp8Decoder)
    _wrap_receiver(rtcrtpreceiver.RTCRtpReceiver)
    _wrap_estimator(rate.RemoteBitrateEstimator)
    _release_rule(jitterbuffer.JitterBuffer)
    _wrap_jitter_buffer(jitterbuffer.JitterBuffer)
    wire.install(PROBES, aioice.ice.StunProtocol, aioice.ice.Connection)


def _wrap_encoder(cls: Any) -> None:
    encode = cls.encode

    def timed_encode(self: Any, frame: Any, force_keyframe: bool = False) -> Any:
        t0, cpu0 = time.monotonic(), time.thread_time()
        payloads, timestamp = encode(self, frame, force_keyframe)
        cpu = time.thread_time() - cpu0
        size = sum(len(p) for p in payloads)
        probe = (t0, time.monotonic(), size, int(self.target_bitrate), cpu, key_frame(payloads))
        with PROBES.lock:
            PROBES.encode[int(timestamp)] = probe
        return payloads, timestamp

    cls.encode = timed_encode


def key_frame(payloads: list[bytes]) -> int:
    """1 when the VP8 RTP payloads are a key frame, 0 a delta frame, -1 unknown: the
    first payload's VP8 payload descriptor (RFC 7741 §4.2) is followed by the frame
    tag, whose lowest bit is 0 for a key frame (RFC 6386 §9.1)."""
    from aiortc.codecs.vpx import VpxPayloadDescriptor

    if not payloads:
        return -1
    try:
        descriptor, data = VpxPayloadDescriptor.parse(payloads[0])
    except ValueError:
        return -1
    if not descriptor.partition_start or descriptor.partition_id != 0 or not data:
        return -1
    return 0 if data[0] & 1 else 1


def _ladder_target(cls: Any) -> None:
    import aiortc.codecs.vpx as vpx

    target = cls.target_bitrate

    def set_target(self: Any, bitrate: int) -> None:
        # aiortc's setter then clamps to [MIN_BITRATE, MAX_BITRATE]
        step = on_ladder(
            max(int(bitrate), 1), vpx.DEFAULT_BITRATE, vpx.MAX_BITRATE, target.fget(self)
        )
        target.fset(self, step)

    cls.target_bitrate = property(target.fget, set_target, doc=target.__doc__)


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
                if int(packet.timestamp) not in PROBES.released:
                    PROBES.last_packet[int(packet.timestamp)] = now
                PROBES.video_ssrc = int(packet.ssrc)
        await handle(self, packet, arrival_time_ms)
        if kind == "video" and PROBES.rtp_origin is None:
            mapper = getattr(self, "_RTCRtpReceiver__timestamp_mapper", None)
            with PROBES.lock:
                PROBES.rtp_origin = getattr(mapper, "_origin", None)

    cls._handle_rtp_packet = probed
    send_nack, send_pli = cls._send_rtcp_nack, cls._send_rtcp_pli

    async def probed_nack(self: Any, media_ssrc: int, lost: list[int]) -> None:
        with PROBES.lock:
            PROBES.nack.append((time.monotonic(), len(lost)))
        await send_nack(self, media_ssrc, lost)

    async def probed_pli(self: Any, media_ssrc: int) -> None:
        with PROBES.lock:
            PROBES.pli.append(time.monotonic())
        await send_pli(self, media_ssrc)

    cls._send_rtcp_nack, cls._send_rtcp_pli = probed_nack, probed_pli


def _release_rule(cls: Any) -> None:
    # aiortc's own code stays the `next` rule's (and audio's, whose buffer prefetches)
    remove_frame = cls._remove_frame

    def by_rule(self: Any, sequence_number: int) -> Any:
        if self._is_video and _frame_release != "next":
            return frame_release.release_frame(self, _frame_release)
        return remove_frame(self, sequence_number)

    cls._remove_frame = by_rule


def _wrap_jitter_buffer(cls: Any) -> None:
    # aiortc hands a frame to its decoder's queue right after `add` returns it
    # (RTCRtpReceiver._handle_rtp_packet); the frame's timestamp is still the RTP one
    add = cls.add

    def probed(self: Any, packet: Any) -> Any:
        pli, frame = add(self, packet)
        if frame is not None and self._is_video:
            with PROBES.lock:
                PROBES.released.setdefault(int(frame.timestamp), time.monotonic())
        return pli, frame

    cls.add = probed


def _wrap_estimator(cls: Any) -> None:
    add = cls.add

    def probed(self: Any, *args: Any, **kwargs: Any) -> Any:
        remb = add(self, *args, **kwargs)
        if remb is not None:
            with PROBES.lock:
                PROBES.remb.append((time.monotonic(), int(remb[0])))
        return remb

    cls.add = probed
