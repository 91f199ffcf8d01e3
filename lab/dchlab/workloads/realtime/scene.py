"""The video a real-time workload sends: moving content plus the machine-readable patch.

Rule: frame n is a window of a fixed pseudo-random texture scrolled `SCROLL_PX` pixels
per frame (what motion compensation can predict, like a panning game camera) with one
`BLOCK` x `BLOCK` square of fresh noise that moves across it (what it cannot predict:
particles, explosions), and the patch (dchlab.workloads.realtime.patch) in the top-left
corner. The fresh square keeps the encoder busy at any target bitrate, so the bitrate
the stack reaches is set by its congestion control and cap, not by easy content.
Frames are yuv420p arrays in PyAV's layout (h*3/2 rows of w: Y, then U and V).
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
        w, h = self.width, self.height
        x0 = (n * SCROLL_PX) % w
        luma = self._texture[:, x0 : x0 + w].copy()
        # The fresh-noise square bounces along the bottom part of the frame.
        span_x, span_y = w - BLOCK, h - patch.PATCH_H - BLOCK
        bx = abs((n * 7) % (2 * span_x) - span_x)
        by = patch.PATCH_H + abs((n * 3) % (2 * span_y) - span_y)
        luma[by : by + BLOCK, bx : bx + BLOCK] = self._rng.integers(
            0, 256, size=(BLOCK, BLOCK), dtype=np.uint8
        )
        patch.draw(luma, values)
        return np.vstack([luma, self._chroma])

    def frame(self, n: int, values: patch.PatchValues, fps: int) -> av.VideoFrame:
        """Frame `n` as a PyAV frame whose pts is its capture slot on the 90 kHz clock."""
        vf = av.VideoFrame.from_ndarray(self.render(n, values), format="yuv420p")
        vf.pts = n * (VIDEO_CLOCK // fps)
        vf.time_base = Fraction(1, VIDEO_CLOCK)
        return vf


def luma_of(frame: av.VideoFrame) -> np.ndarray:
    """The luma plane of a decoded yuv420p frame as an h x w array (no copy of the
    padding PyAV keeps at the end of each line)."""
    plane = frame.planes[0]
    rows = np.frombuffer(memoryview(plane), dtype=np.uint8).reshape(frame.height, plane.line_size)
    return rows[:, : frame.width]
