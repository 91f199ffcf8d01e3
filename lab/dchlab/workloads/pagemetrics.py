"""Page metrics beside the PLT: first and largest contentful paint, Speed Index and
above-the-fold time (docs/formats.md, "Page metrics").

All times are ms since the navigation start (performance.timeOrigin, the origin of
plt_ms = loadEventEnd − navigationStart).

- fcp_ms: the `first-contentful-paint` PerformanceEntry (Paint Timing);
- lcp_ms: the last `largest-contentful-paint` entry a buffered PerformanceObserver
  returns once the load's network-quiet tail is over (the final LCP candidate; no
  input ever ends LCP in the lab);
- speed_index_ms, atf_ms (opt-in, $DCH_SPEED_INDEX=1; see screencast_enabled): from
  the viewport's CDP screencast frames (Page.startScreencast,
  downscaled JPEGs, sent only when the compositor produced a new frame). Each frame's
  visual completeness is its colour-histogram distance from the initial state
  against the final frame's, as speedline (Lighthouse) and WebPageTest compute it:
  per channel, 256-bin histograms without the near-white pixels (all three channels
  ≥ 249, the blank page), VC = Σ min(|H_f − H_0|, |H_final − H_0|) / Σ |H_final − H_0|
  (1 when the final frame looks like the initial one). Speed Index = ∫ (1 − VC(t)) dt
  from the navigation start to the last frame, VC(t) being that of the latest frame
  at t (the initial state's before the first frame). atf_ms is the time of the last
  visual change: the last frame whose pixels differ from the frame before it.

Unlike speedline, VC is not floored to whole percent (the Speed Index of two loads
differs by what their frames show, not by rounding steps).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageChops

from dchlab.workloads import isolated

WHITE = 249  # a pixel with R, G and B all >= this is background (speedline's rule)
LCP_WAIT_MS = 250  # how long the page may take to hand over buffered LCP entries
# Screencast frames at a third of the window (1366x768): the histogram method needs no
# more detail, and Chromium scales and encodes fewer pixels per frame during the load
# (its CPU is the PLT's on this 2-core machine); decoding one costs us ~2 ms.
SCREENCAST = {"format": "jpeg", "quality": 80, "maxWidth": 456, "maxHeight": 256}
_NON_WHITE = [255 if v < WHITE else 0 for v in range(256)]

# FCP from the paint entries; LCP through a buffered observer (LCP entries are not in
# the performance timeline's getEntries*), whose first callback gets every buffered
# entry; resolved after LCP_WAIT_MS when the page never had a contentful paint.
# Evaluated in an isolated world (dchlab.workloads.isolated): the page's own Promise,
# setTimeout or PerformanceObserver replacements are not these.
PAINT_JS = f"""new Promise(resolve => {{
  const out = {{o: performance.timeOrigin, fcp: null, lcp: null}};
  const p = performance.getEntriesByName('first-contentful-paint')[0];
  if (p) out.fcp = p.startTime;
  let done = false;
  const finish = () => {{ if (!done) {{ done = true; resolve(out); }} }};
  try {{
    const po = new PerformanceObserver(list => {{
      const es = list.getEntries();
      if (es.length) out.lcp = es[es.length - 1].startTime;
      po.disconnect();
      finish();
    }});
    po.observe({{type: 'largest-contentful-paint', buffered: true}});
  }} catch (e) {{}}
  setTimeout(finish, {LCP_WAIT_MS});
}})"""


def screencast_enabled(asked: bool | None = None) -> bool:
    """Speed Index and atf_ms need the screencast, which is opt-in: `asked` (a
    campaign's `workload.speed_index`, `dch pageload --speed-index`), else
    $DCH_SPEED_INDEX=1.
    Capturing frames during the load cost the PLT +6% (median, paired; 95% CI 0..12%)
    on this loaded 2-core machine (docs/benchmarks.md, "Page metrics"). fcp_ms and
    lcp_ms are always measured: they are read after the load and cost it nothing."""
    if asked is not None:
        return asked
    return os.environ.get("DCH_SPEED_INDEX", "0") == "1"


def histogram(im: Image.Image) -> NDArray[np.int64]:
    """(3, 256) counts of each channel's values over the non-white pixels of an RGB
    image (Pillow's C loops: a third of numpy's masking time)."""
    r, g, b = (band.point(_NON_WHITE) for band in im.split())
    mask = ImageChops.lighter(ImageChops.lighter(r, g), b)  # 255 where any band < WHITE
    return np.asarray(im.histogram(mask), dtype=np.int64).reshape(3, 256)


def visual_completeness(
    hist: NDArray[np.int64], initial: NDArray[np.int64], final: NDArray[np.int64]
) -> float:
    """How far `hist` has moved from `initial` towards `final`, 0..1."""
    target = np.abs(final - initial)
    total = int(target.sum())
    if total == 0:
        return 1.0
    return float(np.minimum(np.abs(hist - initial), target).sum()) / total


def speed_index(times_ms: Sequence[float], vc: Sequence[float], vc0: float = 0.0) -> float:
    """∫ (1 − VC(t)) dt from 0 to the last time: VC is `vc0` until times_ms[0], then
    vc[i] from times_ms[i] on (times ascending, > 0)."""
    si, last_t, last_vc = 0.0, 0.0, vc0
    for t, v in zip(times_ms, vc, strict=True):
        si += (t - last_t) * (1.0 - last_vc)
        last_t, last_vc = t, v
    return si


@dataclass
class Frame:
    t_ms: float  # since the navigation start
    image: Image.Image  # RGB


def decode(data_b64: str) -> Image.Image:
    with Image.open(io.BytesIO(base64.b64decode(data_b64))) as im:
        return im.convert("RGB")


def _changed(a: Image.Image | None, b: Image.Image) -> bool:
    return a is None or a.size != b.size or ImageChops.difference(a, b).getbbox() is not None


def visual_metrics(frames: Sequence[Frame]) -> dict[str, float | None]:
    """speed_index_ms, atf_ms and the frame count from frames sorted by time; frames at
    t ≤ 0 are the page before the navigation (the latest of them is the initial state,
    else the blank page: no non-white pixel)."""
    before = [f for f in frames if f.t_ms <= 0]
    after = [f for f in frames if f.t_ms > 0]
    out: dict[str, float | None] = {"speed_index_ms": None, "atf_ms": None, "frames": len(after)}
    if not after:
        return out
    h0 = histogram(before[-1].image) if before else np.zeros((3, 256), np.int64)
    final = histogram(after[-1].image)
    vcs = [visual_completeness(histogram(f.image), h0, final) for f in after]
    vc0 = visual_completeness(h0, h0, final)
    out["speed_index_ms"] = round(speed_index([f.t_ms for f in after], vcs, vc0), 1)
    prev = before[-1].image if before else None
    atf = None
    for f in after:
        if _changed(prev, f.image):
            atf = f.t_ms
        prev = f.image
    out["atf_ms"] = round(atf, 1) if atf is not None else None
    return out


@dataclass
class RawFrame:
    ts: float | None  # the frame's metadata.timestamp, s since the epoch
    mono: float  # time.monotonic() when it arrived
    data: str  # base64 JPEG
    image: Image.Image | None = None  # decoded (digest)
    broken: bool = False  # not decodable: left out


@dataclass
class Screencast:
    """Collects one load's screencast frames (acknowledging each, or Chromium sends no
    more) and turns them into the visual metrics once the load is over."""

    cdp: Any
    sid: str
    raw: list[RawFrame] = field(default_factory=list)
    _acks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        await self.cdp.send("Page.startScreencast", dict(SCREENCAST), self.sid)

    async def stop(self) -> None:
        """Stop the frames (a browser that loads more pages in the same session starts
        the next screencast with its next navigation)."""
        await self.cdp.send("Page.stopScreencast", {}, self.sid)

    def on_event(self, method: str, p: dict[str, Any]) -> bool:
        """Take a Page.screencastFrame event (True) or leave it (False)."""
        if method != "Page.screencastFrame":
            return False
        ts = (p.get("metadata") or {}).get("timestamp")
        self.raw.append(
            RawFrame(float(ts) if ts is not None else None, time.monotonic(), p["data"])
        )
        task = asyncio.ensure_future(self._ack(int(p["sessionId"])))
        self._acks.add(task)
        task.add_done_callback(self._acks.discard)
        return True

    async def _ack(self, frame_session: int) -> None:
        with contextlib.suppress(Exception):  # the browser may be gone: no more frames
            await self.cdp.send("Page.screencastFrameAck", {"sessionId": frame_session}, self.sid)

    def digest_one(self) -> bool:
        """Decode one frame not decoded yet (True) — called while the load's quiet tail
        waits, so little decoding is left for after it."""
        for f in self.raw:
            if f.image is None and not f.broken:
                self._decode(f)
                return True
        return False

    @staticmethod
    def _decode(f: RawFrame) -> None:
        try:
            f.image = decode(f.data)
        except (OSError, ValueError):  # PIL's errors on a truncated or foreign image
            f.broken = True

    def metrics(self, time_origin_ms: float | None, t_nav_mono: float) -> dict[str, float | None]:
        """Frame times from the frames' own timestamps (s since the epoch, the clock of
        performance.timeOrigin) or, without them, from when each frame arrived against
        `t_nav_mono` (when Page.navigate was sent)."""
        frames = []
        for f in self.raw:
            if f.image is None and not f.broken:
                self._decode(f)
            if f.image is None:
                continue
            if f.ts is not None and time_origin_ms is not None:
                t = f.ts * 1000 - time_origin_ms
            else:
                t = (f.mono - t_nav_mono) * 1000
            frames.append(Frame(t, f.image))
        frames.sort(key=lambda f: f.t_ms)
        return visual_metrics(frames)


async def paint_timing(cdp: Any, sid: str, frame_id: str | None = None) -> dict[str, float | None]:
    """{'o': performance.timeOrigin (ms since the epoch), 'fcp', 'lcp'} of the page
    (main frame `frame_id`, else looked up), read in an isolated world."""
    got = await isolated.evaluate(cdp, sid, PAINT_JS, frame_id, await_promise=True) or {}
    return {k: (float(got[k]) if got.get(k) is not None else None) for k in ("o", "fcp", "lcp")}
