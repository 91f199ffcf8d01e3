"""The server end of a real-time session (runs in the testbed's srv namespace).

`python -m dchlab.workloads.realtime.server --address A` listens for signalling on
A:PORT, prints READY (the testbed's daemon protocol) and serves sessions one after
another until it is stopped. Per session, by the offer's `app`:
  cloud-gaming  receives input events on the data channel ("input": seq and send
                time, struct "!Id") and sends the game video, whose patch shows the
                latest seq received when each frame is captured;
  video-call    sends its camera video and tone audio and receives the device's.
Its video encoder starts at the offer's `start_bps` within [`min_bps`, `max_bps`] (the app's
defaults, stack.BITRATES, when the offer has none). At the end it answers the device's "records" request with its Record and probes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import struct
import sys
import time
import traceback
from dataclasses import asdict
from typing import Any

from dchlab.workloads.realtime import signalling, stack, wire
from dchlab.workloads.realtime.media import PatchedVideo, Record, ToneAudio, hear_audio, show_video

#: An input event on the data channel: seq (uint32) and send time (double, s).
INPUT = struct.Struct("!Id")


async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    offer = await signalling.receive(reader, "offer")
    app, fps = offer["app"], int(offer["fps"])
    default = stack.BITRATES[app]
    stack.set_bitrates(
        stack.Bitrates(
            int(offer.get("start_bps", default.start_bps)),
            int(offer.get("max_bps", default.max_bps)),
            int(offer.get("min_bps", default.min_bps)),
        )
    )
    stack.set_frame_release(str(offer.get("frame_release", "next")))
    record = Record()
    record.start_clock()
    stack.PROBES.reset()  # one session at a time: its probes are the process's
    pc = RTCPeerConnection()
    tasks: list[asyncio.Task[None]] = []

    @pc.on("datachannel")
    def on_datachannel(channel: Any) -> None:
        @channel.on("message")
        def on_message(msg: Any) -> None:
            if isinstance(msg, bytes) and len(msg) == INPUT.size:
                seq, _sent = INPUT.unpack(msg)
                record.inputs_received.setdefault(seq, time.monotonic())
                kernel = wire.current_rx()
                if kernel is not None:
                    record.inputs_wire.setdefault(seq, kernel)

    @pc.on("track")
    def on_track(track: Any) -> None:
        loop = show_video if track.kind == "video" else hear_audio
        tasks.append(asyncio.ensure_future(loop(track, record)))

    await pc.setRemoteDescription(RTCSessionDescription(offer["sdp"], "offer"))
    if app == "cloud-gaming":
        pc.addTrack(PatchedVideo(record, fps, record.latest_input, game=True))
    else:
        pc.addTrack(PatchedVideo(record, fps, lambda: 0))
        pc.addTrack(ToneAudio(record))
    await pc.setLocalDescription(await pc.createAnswer())
    await signalling.send(writer, {"type": "answer", "sdp": pc.localDescription.sdp})
    try:
        await signalling.receive(reader, "records")
        record.stop_clock()
        # Stop the media first, so the records are final; an encode already in flight
        # still writes its probe after the close, which is why the probes are copied
        # under their lock (stack.Probes.snapshot).
        await pc.close()
        await signalling.send(
            writer, {"type": "records", **asdict(record), **stack.PROBES.snapshot()}
        )
    finally:
        await pc.close()
        for t in tasks:
            t.cancel()


async def serve(address: str) -> None:
    stack.configure(address)
    lock = asyncio.Lock()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with lock:  # one session at a time: its records are the process's probes
            try:
                await session(reader, writer)
            except (signalling.SignallingError, ConnectionError) as e:
                print(f"session ended: {e}", file=sys.stderr, flush=True)
            except Exception:  # the next session must still be served; the log says why
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()
            finally:
                # Only after the log line: the device fails on this close, and its
                # failure report quotes the end of this log (run.run_session).
                writer.close()

    server = await asyncio.start_server(handle, address, signalling.PORT, limit=signalling.LIMIT)
    print("READY", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--address", required=True, help="the server's testbed address")
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.address))
    return 0


if __name__ == "__main__":
    sys.exit(main())
