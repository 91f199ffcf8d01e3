"""Where in the looped traces each load of a campaign starts: `random` or `stratified`.

`random` (the default, and what every campaign before 2026-11-24 used): each (seed,
page, trial) hashes to an offset anywhere in the trace (dchlab.traces.profiles). Two
runs with different seeds then meet different minutes of a drive or walk, and on the
mobility traces that alone moves a 10-page headline gain by up to ~10 points
(docs/results.md, "Stability").

`stratified`: the loads of one trial are spread evenly over the trace — with n items
(pages), item i starts at ((π(i) + u + r(t)) / n) of the trace's period, where π is a
seed-chosen permutation (which page meets which stretch), u ∈ [0, 1) a seed-chosen
shift, and r(t) the base-2 radical inverse of the trial (0, ½, ¼, ¾, ⅛, ...: each new
trial falls between the earlier ones, so any first k trials cover the trace evenly).
Every trial then samples every stretch of the trace once, whatever the seed: the
network half of a run's sampling noise is gone, only the page × stretch pairing and
the machine remain. This is stratified sampling; it does not bias the mean (each load
is still uniform over the trace, for a random seed).

The fraction depends on (seed, number of items, item index, trial) only — never on the
scheme — so the paired design holds: every scheme of a (page, trial) meets the same
stretch.
"""

from __future__ import annotations

import hashlib
import random

#: The campaign key `offsets:` and `dch run --offsets` accept these.
MODES = ("random", "stratified")


def radical_inverse(k: int) -> float:
    """Base-2 radical inverse (van der Corput): 0, 0.5, 0.25, 0.75, 0.125, ..."""
    if k < 0:
        raise ValueError(f"trial must be non-negative, got {k}")
    out, scale = 0.0, 0.5
    while k:
        if k & 1:
            out += scale
        k >>= 1
        scale /= 2
    return out


def _shift(seed: int) -> float:
    h = hashlib.sha256(f"dchannel-stratified-shift:{seed}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def stratified_fraction(seed: int, n_items: int, index: int, trial: int) -> float:
    """Start of item `index` (of `n_items`) in trial `trial`, as a fraction in [0, 1)
    of the trace's period (module doc)."""
    if n_items < 1 or not 0 <= index < n_items:
        raise ValueError(f"item index {index} outside 0..{n_items - 1}")
    order = list(range(n_items))
    random.Random(f"dchannel-stratified-order:{seed}").shuffle(order)
    pos = order[index] + _shift(seed) + radical_inverse(trial)
    return (pos / n_items) % 1.0
