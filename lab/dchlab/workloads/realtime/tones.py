"""Audio marks: tone bursts whose onsets time the audio path end to end.

Rule: the sender's audio is silence except for one burst every `MARK_PERIOD_FRAMES`
frames of 20 ms: `BURST_FRAMES` frames of a sine whose frequency is
`FREQS[k % len(FREQS)]` for mark k, starting at the first sample of a frame. The
receiver finds each onset (the first sample above `ONSET` after a quiet stretch) and
the burst's frequency (the strongest FFT bin among FREQS over the 20 ms after it); the
frequency names k modulo 8, which the sender's record of mark times resolves (a delay
below 8 x 0.5 s = 4 s is unambiguous). One-way audio delay of mark k = (arrival of
the received frame holding the onset + the onset's offset in it) - capture time of
the sent frame where the burst starts: it includes Opus' look-ahead, the network and
the jitter buffer — what a listener hears late.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 48_000
FRAME_SAMPLES = 960  # 20 ms
MARK_PERIOD_FRAMES = 25  # one mark every 0.5 s
BURST_FRAMES = 2
FREQS = (600.0, 900.0, 1200.0, 1500.0, 1800.0, 2100.0, 2400.0, 2700.0)
AMPLITUDE = 12_000  # of 32767
#: onset threshold (absolute sample value) and the quiet stretch before it (samples)
ONSET = 3_000
QUIET = FRAME_SAMPLES * 4


def frame_samples(n: int) -> tuple[np.ndarray, int | None]:
    """Sender frame `n` (int16 mono, FRAME_SAMPLES) and the mark k whose burst starts
    in it (None: no burst starts here)."""
    k, phase = divmod(n, MARK_PERIOD_FRAMES)
    if phase >= BURST_FRAMES:
        return np.zeros(FRAME_SAMPLES, dtype=np.int16), None
    f = FREQS[k % len(FREQS)]
    t = (np.arange(FRAME_SAMPLES) + phase * FRAME_SAMPLES) / SAMPLE_RATE
    return (AMPLITUDE * np.sin(2 * np.pi * f * t)).astype(np.int16), (k if phase == 0 else None)


@dataclass
class OnsetDetector:
    """Finds onsets in received mono audio, frame by frame (`feed`).

    onsets: [(arrival of the frame + offset of the onset sample, frequency index)]."""

    onsets: list[tuple[float, int]] = field(default_factory=list)
    _quiet: int = QUIET
    _pending: tuple[float, list[np.ndarray]] | None = None

    def feed(self, samples: np.ndarray, arrival: float) -> None:
        """Feed one received frame (int16 mono at SAMPLE_RATE) that arrived at `arrival`."""
        if self._pending is not None:
            self._pending[1].append(samples)
            self._finish_pending()
        loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > ONSET)
        if self._pending is None and loud.size and self._quiet + int(loud[0]) >= QUIET:
            i = int(loud[0])
            self._pending = (arrival + i / SAMPLE_RATE, [samples[i:]])
            self._finish_pending()
        if loud.size:
            self._quiet = len(samples) - 1 - int(loud[-1])
        else:
            self._quiet += len(samples)

    def _finish_pending(self) -> None:
        assert self._pending is not None
        t, parts = self._pending
        window = np.concatenate(parts)
        if len(window) < FRAME_SAMPLES:
            return
        self.onsets.append((t, dominant(window[:FRAME_SAMPLES])))
        self._pending = None


def dominant(window: np.ndarray) -> int:
    """The index in FREQS of the strongest of those frequencies in `window`."""
    spectrum = np.abs(np.fft.rfft(window.astype(np.float64) * np.hanning(len(window))))
    bins = [round(f * len(window) / SAMPLE_RATE) for f in FREQS]
    return int(np.argmax([spectrum[b] for b in bins]))


def match_marks(
    onsets: list[tuple[float, int]], marks: dict[int, float]
) -> list[tuple[int, float]]:
    """(mark k, delay s) for each onset: k is the latest mark sent before the onset
    whose frequency index matches; onsets with no such mark are dropped."""
    out = []
    sent = sorted(marks.items())
    for t, idx in onsets:
        cands = [(k, tc) for k, tc in sent if tc <= t and k % len(FREQS) == idx]
        if cands:
            k, tc = cands[-1]
            out.append((k, t - tc))
    return out
