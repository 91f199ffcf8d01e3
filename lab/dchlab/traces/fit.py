"""Fit and check the latent time structure against real RTT series.

The reference is the IMC'23 driving data (../shared/data/traces/imc23-driving-rtt):
~110 ping runs of 100 pings at ~200 ms spacing. Statistics (dchlab.traces.structure)
are computed per run and pooled; the synthetic series is subsampled to 200 ms and
cut into 100-sample windows first. `dch traces fit` reruns the grid search.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np

from dchlab.traces.latent import LatentParams, latent, rank_map
from dchlab.traces.marginal import fit_quantiles
from dchlab.traces.ping import parse_ping
from dchlab.traces.structure import Array, excursions_above, window_stats, windows_of

log = logging.getLogger(__name__)

REAL_SPACING_MS = 200.0
WINDOW = 100
LAGS = [1, 2, 3, 4, 5]  # x 200 ms: 0.2 .. 1 s


def real_windows(root: Path, min_replies: int = 50) -> list[Array]:
    """One NaN-gapped series per ping run (index = sequence number)."""
    out = []
    for f in sorted(root.rglob("*.out")):
        try:
            r = parse_ping(f)
        except ValueError as e:
            log.info("skipping %s", e)
            continue
        if r.replies < min_replies or r.interval_ms is None:
            continue
        idx = np.round(r.timeline.t_ms / r.interval_ms).astype(int)
        w = np.full(idx[-1] + 1, np.nan)
        w[idx] = r.timeline.rtt_ms
        out.append(w)
    return out


def synthetic_series(p: LatentParams, seed: int = 1, minutes: float = 40.0) -> Array:
    """A synthetic 15 ms series with the MM-D marginal (the driving scenario)."""
    step = 15.0
    n = int(minutes * 60000 / step)
    rng = np.random.default_rng(seed)
    values, _ = fit_quantiles(n, 18, 40, 236, 56.15, 0.96)
    return rank_map(latent(rng, n, step, p), values)


def synthetic_windows(p: LatentParams, seed: int = 1, minutes: float = 40.0) -> list[Array]:
    """The synthetic series cut like the real runs (200 ms spacing, 100 samples)."""
    return windows_of(synthetic_series(p, seed, minutes), 15.0, REAL_SPACING_MS, WINDOW)


def burst_ms(x: Array, step_ms: float = 15.0) -> float:
    """Mean length (ms) of excursions above p90 at full resolution."""
    return float(np.mean(excursions_above(x, 90.0))) * step_ms


#: The real data (200 ms spacing) cannot see below 200 ms; the paper (and the
#: issue) describe spikes lasting hundreds of ms to seconds, so the fit only
#: accepts models whose bursts above p90 last at least this long on average.
MIN_BURST_MS = 100.0


def distance(real: dict[str, object], syn: dict[str, object]) -> float:
    ra, sa = real["acf"], syn["acf"]
    assert isinstance(ra, dict) and isinstance(sa, dict)
    d = sum((ra[k] - sa[k]) ** 2 for k in ra)
    for key in ("excursion_p1", "excursion_p2", "excursion_p3plus"):
        d += (float(real[key]) - float(syn[key])) ** 2  # type: ignore[arg-type]
    return float(d)


#: Grid of `dch traces fit --grid` (spike_ms, spike_share, fast_ms, slow_ms, w_fast,
#: w_slow, w_spike); 1458 models, about 5 minutes on a loaded 2-core box.
GRID = (
    [100.0, 150.0, 200.0],
    [0.04, 0.06, 0.10],
    [30.0, 60.0, 120.0],
    [3000.0, 10000.0],
    [0.2, 0.3, 0.6],
    [0.6, 1.0, 1.5],
    [1.0, 2.0, 3.0],
)


def grid_search(real: dict[str, object]) -> tuple[LatentParams, dict[str, object], float]:
    best: tuple[LatentParams, dict[str, object], float] | None = None
    for values in itertools.product(*GRID):
        p = LatentParams(*values)
        x = synthetic_series(p, minutes=30.0)
        if burst_ms(x) < MIN_BURST_MS:
            continue
        syn = window_stats(windows_of(x, 15.0, REAL_SPACING_MS, WINDOW), LAGS)
        d = distance(real, syn)
        if best is None or d < best[2]:
            best = (p, syn, d)
            log.info("best so far %s: distance %.4f", p, d)
    assert best is not None
    return best


def fit_report(data: Path, grid: bool = False) -> dict[str, object]:
    """Real vs synthetic time-structure statistics (and optionally a new grid fit)."""
    from dchlab.traces.synth import LATENT

    windows = real_windows(data)
    real = window_stats(windows, LAGS)
    x = synthetic_series(LATENT)
    syn = window_stats(windows_of(x, 15.0, REAL_SPACING_MS, WINDOW), LAGS)
    iid = window_stats(synthetic_windows(LatentParams(1.0, 0.5, 1.0, 1.0, 1e-9, 0.0, 0.0)), LAGS)
    report: dict[str, object] = {
        "runs": len(windows),
        "spacing_ms": REAL_SPACING_MS,
        "real": real,
        "model": {
            "params": LATENT.as_dict(),
            **syn,
            "distance": distance(real, syn),
            "burst_ms_at_15ms": burst_ms(x),
        },
        "iid_baseline": {**iid, "distance": distance(real, iid)},
    }
    if grid:
        p, s, d = grid_search(real)
        report["grid_best"] = {"params": p.as_dict(), **s, "distance": d}
    return report


def plot_report(report: dict[str, object], out: Path) -> None:
    """ACF and excursion-length comparison (real vs model vs i.i.d.) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
    lags_ms = [k * REAL_SPACING_MS for k in LAGS]
    keys = ["excursion_p1", "excursion_p2", "excursion_p3plus"]
    for label, key, style in (
        ("real (IMC'23 driving)", "real", "o-"),
        ("model", "model", "s-"),
        ("i.i.d.", "iid_baseline", "x--"),
    ):
        s = report[key]
        assert isinstance(s, dict)
        a1.plot(lags_ms, [s["acf"][k] for k in LAGS], style, label=label)
        a2.plot([1, 2, 3], [s[k] for k in keys], style, label=label)
    a1.set_xlabel("lag (ms)")
    a1.set_ylabel("autocorrelation (per 20 s run)")
    a1.axhline(0, color="grey", lw=0.5)
    a1.legend()
    a2.set_xticks([1, 2, 3], ["1", "2", ">=3"])
    a2.set_xlabel("excursion above run p90 (samples of 200 ms)")
    a2.set_ylabel("share of excursions")
    a2.set_yscale("log")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


CAP_LAGS = [1, 2, 5, 10, 30]  # seconds


def capacity_stats(series: list[Array]) -> dict[str, object]:
    """Length-weighted CV and log-ACF of per-second rate series (seconds < 1 Mbit/s,
    i.e. no download running, are dropped: they are idle, not capacity)."""
    cvs, weights = [], []
    acfs: dict[int, list[float]] = {k: [] for k in CAP_LAGS}
    for x in series:
        x = x[x >= 1.0]
        if len(x) < 300:
            continue
        lx = np.log(x)
        cvs.append(float(x.std() / x.mean()))
        weights.append(len(x))
        for k in CAP_LAGS:
            acfs[k].append(float(np.corrcoef(lx[:-k], lx[k:])[0, 1]))
    w = np.asarray(weights, dtype=float)
    return {
        "series": len(weights),
        "seconds": int(w.sum()),
        "cv": float(np.average(cvs, weights=w)),
        "log_acf": {k: float(np.average(v, weights=w)) for k, v in acfs.items()},
    }


def capacity_report(raca: Path) -> dict[str, object]:
    """Real 5G downlink throughput (Raca et al.) vs the synthesizer's capacity model."""
    from dchlab.traces.synth import synthesize
    from dchlab.traces.throughput_csv import import_throughput_csv

    out: dict[str, object] = {}
    for folder, scenario in (("Static", "LB-S"), ("Driving", "LB-D")):
        series = []
        for f in sorted((raca / "Download" / folder).glob("*.csv")):
            try:
                series.append(import_throughput_csv(f, mode="5G").series.down_mbit)
            except ValueError:
                continue  # no 5G rows in this file
        syn = [synthesize(scenario, seed)[1].down_mbit for seed in (1, 2, 3)]
        out[folder] = {"real": capacity_stats(series), f"model_{scenario}": capacity_stats(syn)}
    return out
