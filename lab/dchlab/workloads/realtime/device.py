"""The device end of a real-time session (runs on ue): `python -m
dchlab.workloads.realtime.device --server A --app APP --duration S` prints one JSON
object, the session's summary (dchlab.workloads.realtime.summary).

It offers the session over signalling (dchlab.workloads.realtime.signalling); once
ICE and DTLS are up it runs for `duration` s: cloud-gaming sends input events on an
unordered, unreliable data channel (as games send inputs: a lost one is superseded by
the next) at `input_hz`, each seq with its send time, and displays the game video;
video-call sends its camera video and tone audio and receives the server's. After
`DRAIN_S` more of receiving (so the last inputs can show), it fetches the server's
records and summarizes both ends'. The offer carries the video's start bitrate and
cap (`bitrates`), which both ends' encoders use, and the rule by which both ends'
video jitter buffers release a frame (`frame_release`: dchlab.workloads.realtime.frame_release).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from typing import Any

from dchlab.workloads.realtime import signalling, stack, summary
from dchlab.workloads.realtime.frame_release import FRAME_RELEASES
from dchlab.workloads.realtime.media import PatchedVideo, Record, ToneAudio, hear_audio, show_video
from dchlab.workloads.realtime.server import INPUT

APPS = ("cloud-gaming", "video-call")
#: Receiving goes on this long after the last input (s).
DRAIN_S = 1.0
#: ICE + DTLS must be up within this long (s).
CONNECT_TIMEOUT_S = 20.0


async def _connected(pc: Any) -> None:
    done = asyncio.Event()

    @pc.on("connectionstatechange")
    def on_state() -> None:
        if pc.connectionState in ("connected", "failed", "closed"):
            done.set()

    if pc.connectionState != "connected":
        await asyncio.wait_for(done.wait(), CONNECT_TIMEOUT_S)
    if pc.connectionState != "connected":
        raise RuntimeError(f"peer connection {pc.connectionState}")


async def _send_inputs(channel: Any, record: Record, hz: float, until: float) -> None:
    """Send input events at `hz` until `until`, or until the channel closes (the
    connection was lost: no input can reach the server any more)."""
    if channel.readyState != "open":
        opened = asyncio.Event()
        channel.on("open", opened.set)
        await asyncio.wait_for(opened.wait(), CONNECT_TIMEOUT_S)
    start = time.monotonic()
    seq = 0
    while True:
        seq += 1
        due = start + (seq - 1) / hz
        now = time.monotonic()
        if due >= until:
            return
        if due > now:
            await asyncio.sleep(due - now)
        if channel.readyState != "open":
            return
        t = time.monotonic()
        record.inputs_sent[seq] = t
        channel.send(INPUT.pack(seq, t))


async def run(
    server: str,
    app: str,
    duration: float,
    fps: int,
    input_hz: float,
    bitrates: stack.Bitrates | None = None,
    frame_release: str = "next",
) -> dict[str, Any]:
    """One session against the server at `server`: its summary. `bitrates`: the
    video's start and cap (None: the app's, stack.BITRATES); `frame_release`: when the
    video jitter buffers release a frame (frame_release.FRAME_RELEASES)."""
    from aiortc import RTCPeerConnection, RTCSessionDescription

    bitrates = bitrates or stack.BITRATES[app]
    stack.set_frame_release(frame_release)
    stack.configure(stack.source_address(server), bitrates)
    reader, writer = await asyncio.open_connection(server, signalling.PORT, limit=signalling.LIMIT)
    record = Record()
    pc = RTCPeerConnection()
    tasks: list[asyncio.Task[None]] = []

    @pc.on("track")
    def on_track(track: Any) -> None:
        loop = show_video if track.kind == "video" else hear_audio
        tasks.append(asyncio.ensure_future(loop(track, record)))

    live = False  # the session is running: a failed or closed connection now is lost

    @pc.on("connectionstatechange")
    def on_lost() -> None:
        if live and record.lost_at is None and pc.connectionState in ("failed", "closed"):
            record.lost_at = time.monotonic()

    channel = None
    if app == "cloud-gaming":
        channel = pc.createDataChannel("input", ordered=False, maxRetransmits=0)
        pc.addTransceiver("video", direction="recvonly")
    else:
        pc.addTrack(PatchedVideo(record, fps, lambda: 0))
        pc.addTrack(ToneAudio(record))
    t_setup = time.monotonic()
    try:
        await pc.setLocalDescription(await pc.createOffer())
        await signalling.send(
            writer,
            {
                "type": "offer",
                "sdp": pc.localDescription.sdp,
                "app": app,
                "fps": fps,
                "start_bps": bitrates.start_bps,
                "max_bps": bitrates.max_bps,
                "min_bps": bitrates.min_bps,
                "frame_release": frame_release,
            },
        )
        answer = await signalling.receive(reader, "answer")
        await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], "answer"))
        await _connected(pc)
        t_start = time.monotonic()
        record.start_clock()
        until = t_start + duration
        record.session_end = until
        live = True
        if channel is not None:
            await _send_inputs(channel, record, input_hz, until)
        await asyncio.sleep(max(0.0, until - time.monotonic()) + DRAIN_S)
        record.stop_clock()
        live = False
        await signalling.send(writer, {"type": "records"})
        theirs = await signalling.receive(reader, "records")
    finally:
        await pc.close()
        for t in tasks:
            t.cancel()
        writer.close()
    mine = {**asdict(record), **stack.PROBES.snapshot()}
    out = summary.summarize(app, json.loads(json.dumps(mine)), theirs, fps, input_hz)
    out["start_bitrate_mbps"] = bitrates.start_bps / 1e6
    out["max_bitrate_mbps"] = bitrates.max_bps / 1e6
    out["min_bitrate_mbps"] = bitrates.min_bps / 1e6
    out["frame_release"] = frame_release
    out["duration_s"] = duration
    out["setup_s"] = round(t_start - t_setup, 3)
    # when the connection failed, s into the session (None: it held to the end)
    lost = record.lost_at
    out["connection_lost_s"] = None if lost is None else round(lost - t_start, 3)
    return out


def bitrates_of(
    app: str, start_mbps: float | None, max_mbps: float | None, min_mbps: float | None
) -> stack.Bitrates:
    """The video's bitrates from the options given (Mbit/s, None: not given): the
    app's defaults (stack.BITRATES) for the rest, a default start taken down to a
    given cap and a default floor to the start (so `--max-bitrate 5` alone is a 5-Mbit/s
    cloud game). ValueError when the given ones are out of order."""
    default = stack.BITRATES[app]
    cap = default.max_bps if max_mbps is None else round(max_mbps * 1e6)
    start = min(default.start_bps, cap) if start_mbps is None else round(start_mbps * 1e6)
    floor = min(default.min_bps, start) if min_mbps is None else round(min_mbps * 1e6)
    return stack.Bitrates(start, cap, floor)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", required=True, help="the server's testbed address")
    p.add_argument("--app", choices=APPS, required=True)
    p.add_argument("--duration", type=float, default=60.0, help="session length, s")
    p.add_argument("--fps", type=int, default=30, help="video frame rate")
    p.add_argument("--input-hz", type=float, default=60.0, help="input events per second")
    p.add_argument("--start-bitrate", type=float, help="video start bitrate, Mbit/s")
    p.add_argument("--max-bitrate", type=float, help="video bitrate cap, Mbit/s")
    p.add_argument("--min-bitrate", type=float, help="video bitrate floor, Mbit/s")
    p.add_argument(
        "--frame-release",
        choices=FRAME_RELEASES,
        default=FRAME_RELEASES[0],
        help="when the video jitter buffers release a frame: next (aiortc's: on the next "
        "frame's first packet) or marker (libwebrtc's: on the RTP marker bit)",
    )
    args = p.parse_args(argv)
    bitrates = bitrates_of(args.app, args.start_bitrate, args.max_bitrate, args.min_bitrate)
    out = asyncio.run(
        run(
            args.server, args.app, args.duration, args.fps, args.input_hz, bitrates,
            args.frame_release,
        )
    )  # fmt: skip
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
