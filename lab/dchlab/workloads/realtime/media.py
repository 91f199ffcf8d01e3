"""The media of a real-time session: the tracks an end sends and the loops that
receive the other end's, both writing into that end's `Record`.

Sent: `PatchedVideo` renders frames of a scene (dchlab.workloads.realtime.scene: the
game's for cloud gaming, the camera's for a video call) at `fps`
slots of the monotonic clock, each showing its frame id, capture time and the latest
input seq the end has (cloud gaming: the server's latest input; video call: 0); a
frame whose slot has passed while the previous one was encoded is skipped, as a game
renders at the rate it can. `ToneAudio` sends 20 ms frames of silence and tone marks
(dchlab.workloads.realtime.tones). Received: `show_video` reads each decoded frame's
patch when the track hands it over (its display time); `hear_audio` finds tone onsets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from dchlab.workloads.realtime import patch, tones
from dchlab.workloads.realtime.scene import VIDEO_CLOCK, GameScene, Scene, luma_of


@dataclass
class Record:
    """What one end sent and received (times: time.monotonic(), s).

    frames: {frame id: capture time} of video sent (the patch's input seq is read
        then); rendered: {frame id: when its picture was drawn and handed to aiortc};
        slot_start: when frame slot 0 was due (slot n: slot_start + n / fps);
        tick: pts units per frame id;
    skipped: frame slots skipped because rendering/encoding fell behind;
    marks: {tone mark k: capture time} of audio sent;
    shown: [(display time, RTP timestamp, frame id, seq, capture time)] of video
        received whose patch was readable; unreadable: frames whose patch was not;
    onsets: [(onset time, frequency index)] of audio received;
    inputs_sent / inputs_received: {seq: time} (cloud gaming: device / server);
    inputs_wire: {seq: when the kernel received the datagram that carried it}
        (cloud gaming: server; dchlab.workloads.realtime.wire);
    cpu_s, wall_s: the end's process CPU time (all its threads: codecs, RTP, the
        loop) over wall_s of its session;
    session_end: when the session was due to end (device: its start + duration);
    lost_at: when the peer connection failed during the session (device; None: it
        held), e.g. ICE consent expired because no check was answered for 30 s
        (RFC 7675) behind a queue the video keeps full."""

    frames: dict[int, float] = field(default_factory=dict)
    rendered: dict[int, float] = field(default_factory=dict)
    slot_start: float | None = None
    tick: int = 0
    skipped: int = 0
    marks: dict[int, float] = field(default_factory=dict)
    shown: list[tuple[float, int, int, int, float]] = field(default_factory=list)
    unreadable: int = 0
    onsets: list[tuple[float, int]] = field(default_factory=list)
    inputs_sent: dict[int, float] = field(default_factory=dict)
    inputs_received: dict[int, float] = field(default_factory=dict)
    inputs_wire: dict[int, float] = field(default_factory=dict)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    session_end: float | None = None
    lost_at: float | None = None

    def start_clock(self) -> None:
        """Start counting this process's CPU and wall time for the session."""
        self._clock = (time.process_time(), time.monotonic())

    def stop_clock(self) -> None:
        """Set cpu_s and wall_s: the time since start_clock."""
        cpu0, wall0 = self._clock
        self.cpu_s, self.wall_s = time.process_time() - cpu0, time.monotonic() - wall0

    def latest_input(self) -> int:
        """The highest input seq received so far (0: none)."""
        return max(self.inputs_received, default=0)


class _Paced(MediaStreamTrack):
    """A track whose frame n is due `n * period` s after its first frame."""

    def __init__(self, period: float) -> None:
        super().__init__()
        self.period = period
        self._start: float | None = None
        self._n = -1

    async def _next_slot(self, skip: bool) -> int:
        """Wait for the next frame's slot and return its number; `skip`: when that slot
        has passed, return the newest slot that has begun instead (the ones between are
        skipped). MediaStreamError once the track is stopped."""
        if self.readyState != "live":
            raise MediaStreamError
        now = time.monotonic()
        if self._start is None:
            self._start = now
        n = self._n + 1
        due = self._start + n * self.period
        if due > now:
            await asyncio.sleep(due - now)
        elif skip:
            n = max(n, int((now - self._start) / self.period))
        self._n = n
        return n


class PatchedVideo(_Paced):
    """A video track of scene frames at `fps`, each patch showing `seq()`; `game`:
    the cloud game's scene (GameScene), else the camera's (Scene)."""

    kind = "video"

    def __init__(self, record: Record, fps: int, seq: Callable[[], int], width: int = 640,
                 height: int = 360, game: bool = False) -> None:  # fmt: skip
        super().__init__(1 / fps)
        self.record, self.fps, self.seq = record, fps, seq
        self.scene = (GameScene if game else Scene)(width, height)
        self.record.tick = VIDEO_CLOCK // fps

    async def recv(self) -> av.VideoFrame:
        before = self._n
        n = await self._next_slot(skip=True)
        self.record.skipped += n - before - 1
        t_cap = time.monotonic()
        self.record.frames[n] = t_cap
        self.record.slot_start = self._start
        values = patch.PatchValues(n, self.seq(), patch.now_us(t_cap))
        frame = self.scene.frame(n, values, self.fps)
        self.record.rendered[n] = time.monotonic()
        return frame


class ToneAudio(_Paced):
    """An audio track of 20 ms frames, 48 kHz mono: silence and tone marks."""

    kind = "audio"

    def __init__(self, record: Record) -> None:
        super().__init__(tones.FRAME_SAMPLES / tones.SAMPLE_RATE)
        self.record = record

    async def recv(self) -> av.AudioFrame:
        n = await self._next_slot(skip=False)
        samples, mark = tones.frame_samples(n)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = tones.SAMPLE_RATE
        frame.pts = n * tones.FRAME_SAMPLES
        frame.time_base = Fraction(1, tones.SAMPLE_RATE)
        if mark is not None:
            self.record.marks[mark] = time.monotonic()
        return frame


async def show_video(track: Any, record: Record) -> None:
    """Receive `track` until it ends, recording each frame's patch at its display."""
    try:
        while True:
            frame = await track.recv()
            t = time.monotonic()
            v = patch.read(luma_of(frame))
            if v is None:
                record.unreadable += 1
                continue
            t_cap = patch.unwrap_us(v.t_us, t)
            record.shown.append((t, int(frame.pts), v.frame_id, v.seq, t_cap))
    except MediaStreamError:
        return


async def hear_audio(track: Any, record: Record) -> None:
    """Receive `track` until it ends, recording the tone onsets it holds."""
    detector = tones.OnsetDetector(record.onsets)
    try:
        while True:
            frame = await track.recv()
            t = time.monotonic()
            channels = len(frame.layout.channels)
            pcm = frame.to_ndarray().reshape(-1, channels)[:, 0]
            if frame.sample_rate != tones.SAMPLE_RATE:
                continue  # aiortc's Opus decoder gives 48 kHz; anything else is not ours
            detector.feed(np.ascontiguousarray(pcm, dtype=np.int16), t)
    except MediaStreamError:
        return
