"""Valid binary media of a chosen size: PNG, JPEG and WOFF fonts that Chromium decodes.

Each file is a small genuine image/font padded to the target size with a block that
decoders must read past but ignore (a private ancillary PNG chunk, JPEG COM segments,
an unknown sfnt table that the OTS sanitizer drops). The padding is random bytes so
nothing on the path could compress it away.
"""

from __future__ import annotations

import io
import struct
import zlib
from functools import lru_cache

import numpy as np


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png(size: int, rng: np.random.Generator) -> bytes:
    """A 16x16 RGB PNG of noise, padded with a `prVt` chunk to exactly `size` bytes
    (or its minimum, ~800 bytes, when `size` is smaller)."""
    w = h = 16
    raw = b"".join(b"\x00" + rng.bytes(w * 3) for _ in range(h))
    head = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    tail = _png_chunk(b"IDAT", zlib.compress(raw, 9)) + _png_chunk(b"IEND", b"")
    base = len(head) + len(tail)
    pad = size - base - 12  # a chunk adds 12 bytes of framing
    if pad < 0:
        return head + tail
    # 'prVt': ancillary (p), private (r), reserved bit clear (V), safe to copy (t).
    return head + _png_chunk(b"prVt", rng.bytes(pad)) + tail


@lru_cache(maxsize=4)
def _jpeg_base(seed: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.frombytes("RGB", (32, 32), rng.bytes(32 * 32 * 3))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=80)
    return out.getvalue()


def jpeg(size: int, rng: np.random.Generator) -> bytes:
    """A 32x32 baseline JPEG padded with COM segments (max 65533 data bytes each)."""
    base = _jpeg_base(int(rng.integers(0, 4)))
    need = size - len(base)
    segs = []
    while need > 4:
        n = min(need - 4, 65533)
        segs.append(b"\xff\xfe" + struct.pack(">H", n + 2) + rng.bytes(n))
        need -= n + 4
    return base[:2] + b"".join(segs) + base[2:]


def woff(size: int, family: str, rng: np.random.Generator, flavor: str = "woff2") -> bytes:
    """A WOFF2 (or WOFF 1.0) font with glyphs for ASCII letters, padded by an unknown
    `zPad` table of random bytes to about `size` bytes (within ~1 %)."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib.tables.DefaultTable import DefaultTable

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    names = [".notdef", "space", *letters]
    fb = FontBuilder(1000, isTTF=True)
    fb.setupGlyphOrder(names)
    cmap = {32: "space"}
    cmap.update({ord(c): c for c in letters})
    cmap.update({ord(c.upper()): c for c in letters})
    fb.setupCharacterMap(cmap)
    glyphs = {}
    for i, n in enumerate(names):
        pen = TTGlyphPen(None)
        if n != "space":
            top = 500 + 10 * i
            pen.moveTo((80, 0))
            pen.lineTo((80, top))
            pen.lineTo((480, top))
            pen.lineTo((480, 0))
            pen.closePath()
        glyphs[n] = pen.glyph()
    fb.setupGlyf(glyphs)
    fb.setupHorizontalMetrics({n: (560, 80) for n in names})
    fb.setupHorizontalHeader(ascent=800, descent=-200)
    fb.setupNameTable({"familyName": family, "styleName": "Regular"})
    fb.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    fb.setupPost()
    # Fixed timestamps (fontTools would stamp "now"): the corpus is deterministic per seed.
    fb.font["head"].created = fb.font["head"].modified = 0x7C25B080  # 2010-01-01
    fb.font.recalcTimestamp = False
    out = io.BytesIO()
    fb.font.flavor = flavor
    fb.save(out)
    base = len(out.getvalue())
    if size > base + 40:
        pad = DefaultTable("zPad")
        pad.data = rng.bytes(size - base - 20)  # 20 bytes: WOFF table directory entry
        fb.font["zPad"] = pad
        out = io.BytesIO()
        fb.save(out)
    return out.getvalue()
