"""The video a real-time workload sends: moving content plus the machine-readable patch.

Two scenes, both with the patch (dchlab.workloads.realtime.patch) in the top-left
corner, both yuv420p arrays in PyAV's layout (h*3/2 rows of w: Y, then U and V):

`Scene` (the video call's camera): frame n is a window of a fixed pseudo-random texture scrolled `SCROLL_PX` pixels
per frame (what motion compensation can predict, like a panning game camera) with one
`BLOCK` x `BLOCK` square of fresh noise that moves across it (what it cannot predict:
particles, explosions), and the patch (dchlab.workloads.realtime.patch) in the top-left
corner. Its content costs libvpx at most ~5.5 Mbit/s at 640x360, 30 fps (aiortc's
encoder settings, any target above that: docs/realtime.md).

`GameScene` (cloud gaming): a detailed, coloured world seen through a camera that
pans in two dimensions (a Lissajous path, so new content enters at every edge), with
film grain (fresh noise of +-`GRAIN` over the whole frame, as games' post-processing,
particles and lighting change every pixel) and the same fresh-noise square. Motion
compensation predicts the pan but not the grain, so the encoder spends whatever
target it is given up to ~28 Mbit/s at 640x360, 30 fps: the bitrate is set by the
congestion control and the cap, not by easy content (docs/realtime.md, measured).
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np

from dchlab.workloads.realtime import patch

#: RTP video clock (Hz): the pts unit of the frames handed to aiortc.
VIDEO_CLOCK = 90_000
SCROLL_PX = 4
BLOCK = 96
#: GameScene: amplitude of the per-frame film grain (luma levels, +-).
GRAIN = 8
#: GameScene: periods of the camera's horizontal and vertical pan (frames).
PAN_PERIODS = (240, 330)


class Scene:
    """Renders frames of `width` x `height` (both even; width ≥ patch.PATCH_W)."""

    def __init__(self, width: int = 640, height: int = 360, seed: int = 1) -> None:
        if width % 2 or height % 2 or width < patch.PATCH_W or height < patch.PATCH_H + BLOCK:
            raise ValueError(
                f"frame {width}x{height}: expected even sides, width >= {patch.PATCH_W}, "
                f"height >= {patch.PATCH_H + BLOCK}"
            )
        self.width, self.height = width, height
        self._rng = np.random.default_rng(seed)
        # Smooth texture (noise averaged over 4x4) twice as wide as the frame, to scroll.
        coarse = self._rng.integers(40, 216, size=(height // 4 + 1, width // 2 + 1), dtype=np.uint8)
        self._texture = np.kron(coarse, np.ones((4, 4), dtype=np.uint8))[:height, : 2 * width]
        self._chroma = np.full((height // 2, width), 128, dtype=np.uint8)  # U and V rows

    def render(self, n: int, values: patch.PatchValues) -> np.ndarray:
        """Frame `n` showing `values` in its patch (a new array)."""
        w = self.width
        x0 = (n * SCROLL_PX) % w
        luma = self._texture[:, x0 : x0 + w].copy()
        self._noise_square(luma, n)
        patch.draw(luma, values)
        return np.vstack([luma, self._chroma])

    def _noise_square(self, luma: np.ndarray, n: int) -> None:
        """Draw frame `n`'s square of fresh noise into `luma` (in place): it bounces
        along the part of the frame below the patch."""
        w, h = self.width, self.height
        span_x, span_y = w - BLOCK, h - patch.PATCH_H - BLOCK
        bx = abs((n * 7) % (2 * span_x) - span_x)
        by = patch.PATCH_H + abs((n * 3) % (2 * span_y) - span_y)
        luma[by : by + BLOCK, bx : bx + BLOCK] = self._rng.integers(
            0, 256, size=(BLOCK, BLOCK), dtype=np.uint8
        )

    def frame(self, n: int, values: patch.PatchValues, fps: int) -> av.VideoFrame:
        """Frame `n` as a PyAV frame whose pts is its capture slot on the 90 kHz clock."""
        vf = av.VideoFrame.from_ndarray(self.render(n, values), format="yuv420p")
        vf.pts = n * (VIDEO_CLOCK // fps)
        vf.time_base = Fraction(1, VIDEO_CLOCK)
        return vf


class GameScene(Scene):
    """A cloud game's frames of `width` x `height` (module docstring): the world is a
    texture twice the frame's size each way (fine detail over 8x8 blobs, and chroma in
    16x16 blobs), panned; grain and the noise square are drawn fresh each frame from
    the scene's seeded generator."""

    def __init__(self, width: int = 640, height: int = 360, seed: int = 1) -> None:
        super().__init__(width, height, seed)
        big_h, big_w = 2 * height, 2 * width
        rng = self._rng
        fine = rng.integers(0, 256, size=(big_h, big_w)).astype(np.float32)
        blobs = rng.integers(0, 256, size=(big_h // 8 + 1, big_w // 8 + 1)).astype(np.float32)
        coarse = np.kron(blobs, np.ones((8, 8), dtype=np.float32))[:big_h, :big_w]
        self._world = np.clip(0.35 * fine + 0.65 * coarse, 16, 235).astype(np.uint8)
        uv = rng.integers(64, 192, size=(2, big_h // 16 + 1, big_w // 16 + 1), dtype=np.uint8)
        # U and V planes of the world (half resolution each way)
        ones = np.ones((8, 8), dtype=np.uint8)
        self._world_uv = np.stack([np.kron(c, ones)[: big_h // 2, : big_w // 2] for c in uv])
        self._grain = rng.integers(-GRAIN, GRAIN + 1, size=(big_h, big_w), dtype=np.int16)

    def camera(self, n: int) -> tuple[int, int]:
        """The world's top-left pixel (x, y) frame `n` shows (even, for the chroma)."""
        w, h = self.width, self.height
        x = (w / 2) * (1 + np.sin(2 * np.pi * n / PAN_PERIODS[0]))
        y = (h / 2) * (1 + np.sin(2 * np.pi * n / PAN_PERIODS[1]))
        return min(int(x) // 2 * 2, w), min(int(y) // 2 * 2, h)

    def render(self, n: int, values: patch.PatchValues) -> np.ndarray:
        """Frame `n` showing `values` in its patch (a new array)."""
        w, h = self.width, self.height
        x0, y0 = self.camera(n)
        luma16 = self._world[y0 : y0 + h, x0 : x0 + w].astype(np.int16)
        # Grain: a window of the grain field at a fresh random offset each frame.
        gx, gy = int(self._rng.integers(0, w)), int(self._rng.integers(0, h))
        luma16 += self._grain[gy : gy + h, gx : gx + w]
        luma = np.clip(luma16, 0, 255).astype(np.uint8)
        self._noise_square(luma, n)
        patch.draw(luma, values)
        uv = self._world_uv[:, y0 // 2 : y0 // 2 + h // 2, x0 // 2 : x0 // 2 + w // 2]
        return np.vstack([luma, uv.reshape(h // 2, w)])


def luma_of(frame: av.VideoFrame) -> np.ndarray:
    """The luma plane of a decoded yuv420p frame as an h x w array (no copy of the
    padding PyAV keeps at the end of each line)."""
    plane = frame.planes[0]
    rows = np.frombuffer(memoryview(plane), dtype=np.uint8).reshape(frame.height, plane.line_size)
    return rows[:, : frame.width]
