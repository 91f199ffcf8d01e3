"""The latent process that gives synthesized RTT timelines their time structure.

x_t = w_slow * slow_t + w_fast * fast_t + w_spike * spike_t, at 15 ms steps:
- spike_t in {0, 1}: a two-state Markov chain (regime switching). Spike episodes
  last a geometric number of steps with mean `spike_ms`; the chain spends a
  fraction `spike_share` of the time in them. These are the bursts of high RTT.
- fast_t: AR(1) noise with correlation time `fast_ms` (jitter inside a regime);
- slow_t: AR(1) noise with correlation time `slow_ms` (drifts of the base level,
  e.g. load or distance to the cell).
Only the ranks of x matter: synthesis maps them through the target quantile
function, so weights are relative. Parameters are fitted against the IMC'23
driving RTT series (dchlab.traces.fit, docs/traces.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LatentParams:
    spike_ms: float  # mean length of a spike episode
    spike_share: float  # fraction of time in spike episodes
    fast_ms: float  # correlation time of the fast AR(1) jitter
    slow_ms: float  # correlation time of the slow AR(1) drift
    w_fast: float
    w_slow: float
    w_spike: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def ar1(rng: np.random.Generator, n: int, tau_steps: float) -> Array:
    """Unit-variance stationary AR(1) with correlation time tau_steps (phi = e^-1/tau)."""
    from scipy.signal import lfilter  # lazy: scipy.signal takes a second to import

    phi = float(np.exp(-1.0 / max(tau_steps, 1e-9)))
    e = rng.standard_normal(n) * np.sqrt(1 - phi * phi)
    y: Array = lfilter([1.0], [1.0, -phi], e, zi=[phi * rng.standard_normal()])[0]
    return y


def markov_spikes(rng: np.random.Generator, n: int, mean_on: float, share: float) -> Array:
    """Spike envelope: alternating geometric off/on dwell times (in steps); each on
    episode has its own height 1 + Exp(1), so a few episodes reach far into the
    tail while most are moderate (heights rank-map onto p90..max)."""
    mean_on = max(mean_on, 1.0)
    mean_off = max(mean_on * (1 - share) / max(share, 1e-9), 1.0)
    start = int(rng.integers(0, int(mean_on + mean_off) + 1))  # random phase
    k = int((n + start) / (mean_on + mean_off) * 1.5) + 16
    out = np.zeros(0)
    while len(out) < n + start:
        on = rng.geometric(1 / mean_on, size=k)
        off = rng.geometric(1 / mean_off, size=k)
        heights = 1.0 + rng.exponential(1.0, size=k)
        lengths = np.column_stack([off, on]).ravel()
        values = np.column_stack([np.zeros(k), heights]).ravel()
        out = np.concatenate([out, np.repeat(values, lengths)])
    return out[start : start + n]


def latent(rng: np.random.Generator, n: int, step_ms: float, p: LatentParams) -> Array:
    spike = markov_spikes(rng, n, p.spike_ms / step_ms, p.spike_share)
    fast = ar1(rng, n, p.fast_ms / step_ms)
    slow = ar1(rng, n, p.slow_ms / step_ms)
    x: Array = p.w_fast * fast + p.w_slow * slow + p.w_spike * spike
    return x


def rank_map(x: Array, sorted_values: Array) -> Array:
    """Give x the marginal `sorted_values` while keeping its order (ties broken by index)."""
    order = np.argsort(x, kind="stable")
    out = np.empty_like(sorted_values)
    out[order] = sorted_values
    return out
