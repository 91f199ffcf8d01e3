"""Think (reading) times between a background user's page loads.

Default: the HTTP traffic model of 3GPP2 C.R1002-0 v1.0 ("cdma2000 Evaluation
Methodology", 2004) §4.1.1, Table 4.1.1-1: the reading time between two page downloads
is exponential with mean 30 s. Other shapes: `exp:MEAN_S` and `lognormal:MEDIAN_S,SIGMA`
(the log of the think time is normal with mean ln(MEDIAN_S) and standard deviation
SIGMA), and `fixed:S` (tests, validation).

A user's first think time is drawn from the same distribution: for the exponential,
memorylessness makes that the residual think time of a user met while thinking, so
background users that start with the measured load are in their steady state from the
first instant (except that none is caught mid-page).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: 3GPP2 C.R1002-0 §4.1.1: reading time exponential, mean 30 s.
DEFAULT = "exp:30"


@dataclass(frozen=True)
class ThinkTime:
    """A think-time distribution (module doc): `kind` exp | lognormal | fixed and its
    parameters in seconds (`b` is lognormal's sigma, else unused)."""

    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: np.random.Generator) -> float:
        """One think time (s)."""
        if self.kind == "exp":
            return float(rng.exponential(self.a))
        if self.kind == "lognormal":
            return float(rng.lognormal(math.log(self.a), self.b))
        return self.a

    @property
    def mean_s(self) -> float:
        """The distribution's mean (s)."""
        if self.kind == "lognormal":
            return self.a * math.exp(self.b**2 / 2)
        return self.a

    def __str__(self) -> str:
        if self.kind == "lognormal":
            return f"lognormal:{self.a:g},{self.b:g}"
        return f"{self.kind}:{self.a:g}"


def parse(spec: str, where: str = "think time") -> ThinkTime:
    """`exp:MEAN_S`, `lognormal:MEDIAN_S,SIGMA` or `fixed:S`; ValueError naming `where`
    and the expected forms otherwise."""
    kind, _, rest = spec.partition(":")
    want = "exp:MEAN_S, lognormal:MEDIAN_S,SIGMA or fixed:S (seconds)"
    try:
        nums = [float(x) for x in rest.split(",")] if rest else []
    except ValueError:
        raise ValueError(f"{where}: expected {want}, got {spec!r}") from None
    arity = {"exp": 1, "lognormal": 2, "fixed": 1}
    if kind not in arity or len(nums) != arity[kind]:
        raise ValueError(f"{where}: expected {want}, got {spec!r}")
    if not all(math.isfinite(x) for x in nums) or nums[0] < 0 or (kind != "fixed" and nums[0] == 0):
        raise ValueError(f"{where}: {spec!r}: times must be finite and positive")
    if kind == "lognormal" and nums[1] < 0:
        raise ValueError(f"{where}: {spec!r}: sigma must be ≥ 0")
    return ThinkTime(kind, *nums)
