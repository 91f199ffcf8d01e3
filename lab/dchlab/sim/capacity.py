"""What a URLLC cell of capacity C carries: on paper from one user's demand, and from
the simulator's grid.

On paper (fluid bound): a cell whose LLC carries C bit/s per direction cannot serve
more browsing users than `C / r` on the busier direction, r being one user's long-run
LLC rate there (`demand.browsing_rate_bps` per direction); beyond it the queue grows
without bound. Queueing starts well before: the grid measures it.

NSDI'23 §7 cites use cases of 10 Mbit/s per user and 100,000 connections per km²: a
cell of C holds C / 10 Mbit/s such users, and at 100,000 devices per km² the area
whose devices fill the cell's fluid bound is `users / 100,000` km².

From the grid: per (C, rule), the largest N whose cell-wide LLC queueing delay p95
stays within a threshold (`dch sim capacity`: by default the HBC-LLC one-way gap,
beyond which a queued LLC packet arrives later than on the HBC).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: NSDI'23 §7: "use cases of 10 Mbit/s per user" and "100,000 connections per km²".
PAPER_RATE_PER_USER_BPS = 10e6
PAPER_DENSITY_PER_KM2 = 100_000


def fluid_users(capacity_bps: float, rate_per_user_bps: float) -> float:
    """Users a cell of `capacity_bps` carries at `rate_per_user_bps` each (fluid bound)."""
    if rate_per_user_bps <= 0:
        raise ValueError("rate per user must be positive")
    return capacity_bps / rate_per_user_bps


def area_km2(users: float, density_per_km2: float = PAPER_DENSITY_PER_KM2) -> float:
    """The area holding `users` devices at `density_per_km2`."""
    return users / density_per_km2


def knee(cells: Iterable[Mapping[str, Any]], threshold_ms: float) -> dict[tuple[float, str], int]:
    """Per (capacity_mbit, rule): the largest `users` whose `wait_p95_ms` is within
    `threshold_ms` while every smaller N in the grid is too (0: none is). Cells are the
    grid's rows (averaged over seeds first by the caller, or one seed)."""
    by_key: dict[tuple[float, str], list[tuple[int, float]]] = {}
    for c in cells:
        p95 = c["wait_p95_ms"]
        by_key.setdefault((float(c["capacity_mbit"]), str(c["rule"])), []).append(
            (int(c["users"]), float("inf") if p95 is None else float(p95))
        )
    out: dict[tuple[float, str], int] = {}
    for key, points in by_key.items():
        best = 0
        for users, p95 in sorted(points):
            if p95 > threshold_ms:
                break
            best = users
        out[key] = best
    return out
