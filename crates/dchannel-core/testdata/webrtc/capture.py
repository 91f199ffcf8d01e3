"""Captures the UDP datagrams of a short aiortc session (audio, video, data channel)
for the `realtime` policy's test vectors (../../src/policy/realtime.rs).

Run as root in a network namespace of its own, so lo carries this session only:
    unshare -n sh -c 'ip link set lo up; ip link add v0 type veth peer name v1;
        ip addr add 10.9.9.1/24 dev v0; ip link set v0 up; ip link set v1 up; python capture.py OUT.jsonl'
Writes one JSON object per IPv4/UDP packet seen on lo: {"t": seconds, "hex": packet}.
Both peers run in this process (aiortc's own loopback example, with noise for media so
that VP8 frames span several packets and Opus frames have realistic sizes).
"""

import asyncio
import fractions
import json
import socket
import sys
import threading
import time

import numpy as np
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamTrack
from av import AudioFrame, VideoFrame

ETH_P_ALL = 0x0003


class Noise(MediaStreamTrack):
    """640x480 video at 30 fps or 20-ms 48 kHz audio frames of random samples."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.n = 0
        self.rng = np.random.default_rng(1)
        self.start = time.monotonic()

    async def recv(self):  # type: ignore[no-untyped-def]
        period = 1 / 30 if self.kind == "video" else 0.02
        self.n += 1
        await asyncio.sleep(max(0.0, self.start + self.n * period - time.monotonic()))
        if self.kind == "video":
            img = self.rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)
            f = VideoFrame.from_ndarray(img, format="bgr24")
            f.pts, f.time_base = self.n * 3000, fractions.Fraction(1, 90000)
        else:
            pcm = self.rng.integers(-3000, 3000, (1, 960), dtype=np.int16)
            f = AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
            f.sample_rate, f.pts, f.time_base = 48000, self.n * 960, fractions.Fraction(1, 48000)
        return f


def sniff(out: list, stop: threading.Event) -> None:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind(("lo", 0))
    s.settimeout(0.2)
    t0 = time.monotonic()
    while not stop.is_set():
        try:
            frame, addr = s.recvfrom(65535)
        except TimeoutError:
            continue
        ip = frame[14:]
        if addr[2] != socket.PACKET_OUTGOING and ip[:1] == b"\x45" and ip[9] == 17:
            out.append({"t": round(time.monotonic() - t0, 6), "hex": ip.hex()})


async def session() -> None:
    a, b = RTCPeerConnection(), RTCPeerConnection()
    a.addTrack(Noise("audio"))
    a.addTrack(Noise("video"))
    ch = a.createDataChannel("input")
    await a.setLocalDescription(await a.createOffer())
    await b.setRemoteDescription(a.localDescription)
    await b.setLocalDescription(await b.createAnswer())
    await a.setRemoteDescription(b.localDescription)
    for _ in range(600):
        if ch.readyState == "open":
            break
        await asyncio.sleep(0.05)
    print("connection", a.connectionState, "channel", ch.readyState, file=sys.stderr)
    for i in range(120):  # input events at 60 Hz
        ch.send(json.dumps({"seq": i, "dx": 3, "dy": -1, "buttons": 1}))
        await asyncio.sleep(1 / 60)
    await a.close()
    await b.close()


def main() -> None:
    packets: list = []
    stop = threading.Event()
    th = threading.Thread(target=sniff, args=(packets, stop))
    th.start()
    asyncio.run(session())
    stop.set()
    th.join()
    with open(sys.argv[1], "w") as f:
        for p in packets:
            f.write(json.dumps(p) + "\n")
    print(len(packets), "packets")


if __name__ == "__main__":
    main()
