"""Synthesize a Table 1 scenario: RTT timeline (15 ms) + per-second capacity.

RTT: the latent regime-switching process (dchlab.traces.latent, fitted to real
driving RTT) is rank-mapped onto a quantile function solved for the scenario's
min/p50/p98/mean/CV (dchlab.traces.marginal), so the marginal matches Table 1
and the bursts come from the latent process.

Capacity: per second, log-normal with two AR(1) time scales (fitted to real 5G
throughput, by mobility), damped in seconds whose mean RTT is high (bad radio
hurts both), then scaled to the Table 1 mean exactly. The mmWave uplink is the paper's constant 60 Mbit/s.
Everything is drawn from one numpy Generator seeded by (seed, scenario name), so
the same seed always gives the same files.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from dchlab.traces.capacity import CapacitySeries
from dchlab.traces.latent import LatentParams, ar1, latent, rank_map
from dchlab.traces.marginal import fit_quantiles
from dchlab.traces.scenarios import RTT_STEP_MS, Scenario, scenario
from dchlab.traces.structure import Array
from dchlab.traces.timeline import RttTimeline

#: Fitted against the IMC'23 driving RTT runs (docs/traces.md, `dch traces fit`).
#: Only driving data exists; walking and stationary use the same structure.
LATENT = LatentParams(
    spike_ms=100.0,
    spike_share=0.10,
    fast_ms=120.0,
    slow_ms=10000.0,
    w_fast=0.2,
    w_slow=1.0,
    w_spike=1.0,
)


@dataclass(frozen=True)
class CapacityModel:
    """log(capacity) = sigma * (sqrt(1-slow_share) * AR1(tau_fast) + sqrt(slow_share) * AR1(tau_slow))."""

    tau_fast_s: float  # correlation time of the fast log-capacity component
    tau_slow_s: float  # ... of the slow one (cell load, distance)
    slow_share: float  # variance share of the slow component
    cv: float  # coefficient of variation before RTT coupling
    rtt_coupling: float  # exponent gamma: rate *= (rtt_second / rtt_median)^-gamma


#: Fitted to the 5G per-second downlink throughput of Raca et al. (../shared/data/
#: traces/raca-5g, Static -> stationary, Driving -> driving; idle seconds < 1 Mbit/s
#: dropped): log-throughput ACF at 1/2/5/10/30 s and CV (`dch traces fit`,
#: docs/traces.md). Walking has no data: the mean of the two. The RTT coupling is
#: an assumption (bad radio raises RTT and lowers capacity together).
CAPACITY_MODELS = {
    "stationary": CapacityModel(
        tau_fast_s=2.19, tau_slow_s=29.6, slow_share=0.44, cv=0.99, rtt_coupling=0.3
    ),
    "walking": CapacityModel(
        tau_fast_s=2.13, tau_slow_s=32.8, slow_share=0.41, cv=1.10, rtt_coupling=0.3
    ),
    "driving": CapacityModel(
        tau_fast_s=2.06, tau_slow_s=36.0, slow_share=0.38, cv=1.20, rtt_coupling=0.3
    ),
}
FLOOR_SHARE = 0.05  # no second drops below 5% of the mean rate


def rng_for(name: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(name.encode())])


def synth_rtt(sc: Scenario, rng: np.random.Generator) -> RttTimeline:
    n = round(sc.span_min * 60_000 / RTT_STEP_MS)
    values, _ = fit_quantiles(n, sc.rtt_min, sc.rtt_p50, sc.rtt_p98, sc.rtt_mean, sc.rtt_cv)
    x = latent(rng, n, RTT_STEP_MS, LATENT)
    rtt = np.round(rank_map(x, values), 2)
    return RttTimeline(np.arange(n, dtype=float) * RTT_STEP_MS, rtt)


def _rate_series(
    rng: np.random.Generator, seconds: int, mean: float, model: CapacityModel, rtt_per_s: Array
) -> Array:
    sigma = float(np.sqrt(np.log1p(model.cv**2)))
    z = np.sqrt(1 - model.slow_share) * ar1(rng, seconds, model.tau_fast_s) + np.sqrt(
        model.slow_share
    ) * ar1(rng, seconds, model.tau_slow_s)
    rate = np.exp(sigma * z) * (rtt_per_s / np.median(rtt_per_s)) ** (-model.rtt_coupling)
    rate = np.maximum(rate * mean / rate.mean(), FLOOR_SHARE * mean)
    rate *= mean / rate.mean()  # exact mean after the floor
    return np.round(rate, 3)


def synth_capacity(sc: Scenario, rng: np.random.Generator, rtt: RttTimeline) -> CapacitySeries:
    seconds = round(sc.span_min * 60)
    idx = np.minimum((rtt.t_ms // 1000).astype(int), seconds - 1)
    rtt_per_s = np.bincount(idx, weights=rtt.rtt_ms, minlength=seconds) / np.maximum(
        np.bincount(idx, minlength=seconds), 1
    )
    model = CAPACITY_MODELS[sc.mobility]
    down = _rate_series(rng, seconds, sc.down_mbit, model, rtt_per_s)
    if sc.fixed_uplink:
        up = np.full(seconds, float(sc.up_mbit))
    else:
        up = _rate_series(rng, seconds, sc.up_mbit, model, rtt_per_s)
    return CapacitySeries(up, down)


def synthesize(name: str, seed: int = 1) -> tuple[RttTimeline, CapacitySeries]:
    sc = scenario(name)
    rng = rng_for(sc.name, seed)
    rtt = synth_rtt(sc, rng)
    cap = synth_capacity(sc, rng, rtt)
    return rtt, cap
