"""Time-structure statistics of RTT series: autocorrelation and excursions.

Used both to describe real traces and to fit/check the synthesizer against them.
Both are computed per window (e.g. one ping run of 100 samples) and pooled, so a
long synthetic series is compared with short real runs on equal terms: the
synthetic series is first subsampled to the real spacing and cut into windows of
the same length.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def acf(x: Array, lag: int) -> float:
    """Pearson autocorrelation at `lag` samples, NaN-tolerant (lost pings)."""
    a, b = x[:-lag], x[lag:]
    ok = ~np.isnan(a) & ~np.isnan(b)
    if ok.sum() < 3:
        return float("nan")
    a, b = a[ok], b[ok]
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def excursions_above(x: Array, q: float = 90.0) -> list[int]:
    """Lengths (in samples) of runs strictly above the window's q-th percentile."""
    th = np.nanpercentile(x, q)
    above = np.where(np.isnan(x), False, x > th).astype(np.int8)
    edges = np.diff(np.concatenate([[0], above, [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return (ends - starts).tolist()


def window_stats(windows: list[Array], lags: list[int], q: float = 90.0) -> dict[str, object]:
    """Mean ACF per lag and the excursion-length distribution above the per-window p90."""
    acfs = {lag: float(np.nanmean([acf(w, lag) for w in windows])) for lag in lags}
    lengths = np.array([n for w in windows for n in excursions_above(w, q)])
    hist = np.bincount(lengths, minlength=5)[1:] / max(len(lengths), 1)
    return {
        "acf": acfs,
        "excursions": len(lengths),
        "excursion_mean": float(lengths.mean()) if len(lengths) else float("nan"),
        "excursion_p1": float(hist[0]),
        "excursion_p2": float(hist[1]),
        "excursion_p3plus": float(hist[2:].sum()),
    }


def windows_of(x: Array, step_ms: float, spacing_ms: float, length: int) -> list[Array]:
    """Subsample a uniformly spaced series to `spacing_ms` and cut windows of `length`."""
    stride = max(round(spacing_ms / step_ms), 1)
    sub = x[::stride]
    k = len(sub) // length
    return [sub[i * length : (i + 1) * length] for i in range(k)]
