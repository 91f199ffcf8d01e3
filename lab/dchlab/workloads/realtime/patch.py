"""The machine-readable patch a real-time workload draws into each video frame.

Rule: the top-left `PATCH_W x PATCH_H` pixels of the luma plane hold 120 cells of
`CELL` x `CELL` pixels (3 rows of 40), each black (Y=16) or white (Y=235): an 8-bit
sync pattern, then frame id, input sequence number and capture time (each 32 bits,
most significant bit first), then a CRC-16/CCITT of those 12 bytes. Cells are aligned
on VP8's 16x16 macroblocks, so each is one flat block that even a starved encoder
keeps (only its DC term matters); the reader takes the mean of each cell's inner
half and thresholds it halfway, and rejects a patch whose sync or CRC is wrong, so a
damaged frame is never misread as another one.

The capture time is CLOCK_MONOTONIC in microseconds modulo 2^32 (wraps every ~71
minutes): device and server are namespaces of one machine, so the reader unwraps it
against its own monotonic clock (`unwrap_us`).
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass

import numpy as np

#: Side of one cell, pixels (a VP8 macroblock).
CELL = 16
#: Cells per patch row.
COLS = 40
#: Sync pattern (the first 8 cells).
SYNC = 0xA5
#: Payload bits: sync 8 + frame id 32 + seq 32 + capture time 32 + CRC 16.
BITS = 8 + 32 + 32 + 32 + 16
ROWS = -(-BITS // COLS)
PATCH_W = COLS * CELL
PATCH_H = ROWS * CELL
BLACK, WHITE = 16, 235
_THRESHOLD = (BLACK + WHITE) / 2
_WRAP = 1 << 32


@dataclass(frozen=True)
class PatchValues:
    """What one frame's patch says."""

    frame_id: int
    seq: int  # the latest input sequence number the server had received (0: none)
    t_us: int  # capture time, CLOCK_MONOTONIC µs modulo 2^32


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF), as binascii.crc_hqx computes."""
    return binascii.crc_hqx(data, 0xFFFF)


def _bits(v: PatchValues) -> list[int]:
    body = struct.pack("!III", v.frame_id % _WRAP, v.seq % _WRAP, v.t_us % _WRAP)
    data = bytes([SYNC]) + body + struct.pack("!H", crc16(body))
    return [(byte >> (7 - i)) & 1 for byte in data for i in range(8)]


def draw(luma: np.ndarray, v: PatchValues) -> None:
    """Draw the patch of `v` into the top-left corner of `luma` (uint8, h x w, in
    place). ValueError when the plane is smaller than the patch."""
    h, w = luma.shape
    if w < PATCH_W or h < PATCH_H:
        raise ValueError(f"frame {w}x{h} is smaller than the {PATCH_W}x{PATCH_H} patch")
    cells = np.zeros(ROWS * COLS, dtype=np.uint8)
    bits = _bits(v)
    cells[: len(bits)] = bits
    grid = np.where(cells.reshape(ROWS, COLS) == 1, WHITE, BLACK).astype(np.uint8)
    luma[:PATCH_H, :PATCH_W] = np.kron(grid, np.ones((CELL, CELL), dtype=np.uint8))


def read(luma: np.ndarray) -> PatchValues | None:
    """The values of the patch in `luma` (h x w), or None when it is unreadable (too
    small, wrong sync, wrong CRC)."""
    h, w = luma.shape
    if w < PATCH_W or h < PATCH_H:
        return None
    q = CELL // 4
    block = luma[:PATCH_H, :PATCH_W].astype(np.float32).reshape(ROWS, CELL, COLS, CELL)
    means = block[:, q : CELL - q, :, q : CELL - q].mean(axis=(1, 3)).reshape(-1)
    bits = (means[:BITS] > _THRESHOLD).astype(np.uint8)
    data = np.packbits(bits).tobytes()
    if data[0] != SYNC:
        return None
    body, (crc,) = data[1:13], struct.unpack("!H", data[13:15])
    if crc16(body) != crc:
        return None
    frame_id, seq, t_us = struct.unpack("!III", body)
    return PatchValues(frame_id, seq, t_us)


def now_us(t_monotonic: float) -> int:
    """A monotonic time (s) as the patch carries it: µs modulo 2^32."""
    return round(t_monotonic * 1e6) % _WRAP


def unwrap_us(t_us: int, reference: float) -> float:
    """The monotonic time (s) whose patch value is `t_us`, taken as the one nearest to
    `reference` (s, a time on the same clock within ~35 minutes of it)."""
    ref = round(reference * 1e6)
    base = ref - ref % _WRAP
    best = min((base - _WRAP + t_us, base + t_us, base + _WRAP + t_us), key=lambda c: abs(c - ref))
    return best / 1e6
