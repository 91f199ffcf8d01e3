"""Where in the looped traces each load of a campaign starts: `random` or `stratified`.

`random` (the default, and what every campaign before 2026-11-24 used): each (seed,
page, trial) hashes to an offset anywhere in the trace (dchlab.traces.profiles). Two
runs with different seeds then meet different minutes of a drive or walk (and, for the
synthesized scenarios, different realizations of it), and on the mobility traces that
alone moves a 10-page headline gain by up to ~10 points (docs/results.md, "Stability").

`stratified`: the loads of one trial are spread evenly over the trace — with n items
(pages), item i starts at ((π(i) + u + r(t)) / n) of the trace's period, where π is a
seed-chosen permutation (which page meets which stretch), u ∈ [0, 1) a seed-chosen
shift, and r(t) the base-2 radical inverse of the trial (0, ½, ¼, ¾, ⅛, ...: each new
trial falls between the earlier ones, so any first k trials cover the trace evenly).
This is stratified sampling; it does not bias the mean (each load is still uniform over
the trace, for a random seed). A page keeps its stretch (its nth of the trace) in every
trial. Caveat, found 2026-11-24: the Table 1 scenarios (MM-S ... LB-D) are synthesized
per testbed seed, i.e. every (page, trial) gets its own trace realization
(dchlab.traces.profiles), so for them stratifying positions evens out little: two runs
still meet different networks.

`latin`: for runs that must meet the same network (the stability check of issue 18).
Every load replays one realization of each synthesized scenario (trace seed
LATIN_TRACE_SEED, whatever the campaign's seed: a fixed trace per scenario, as the
paper's recorded traces are), and the pages rotate through the strata like the rows of
a Latin square: in trial t item i starts in stratum (π(i) + t) mod n, at the fixed
point LATIN_WITHIN + r(⌊t / n⌋) of the stratum (mid-stratum in the first n trials).
Each trial still covers every stratum once; after n trials every page has met every
stratum once at the same point, whatever the seed. So the network a full cycle of n
trials samples — which page meets which stretch of which trace — is a function of the
pages alone, and two seeds sample exactly the same (page, stretch) grid; the seed
chooses in which trial each pair is measured (π: the order, so that machine drift
does not line up with the trace), and seeds random loss. A rerun with another seed
then moves by what the machine and the day add, not by a new network sample; how much
a new sample moves a gain is what `random`/`stratified` reruns measure.

The fraction depends on (seed, number of items, item index, trial) only — never on the
scheme — so the paired design holds: every scheme of a (page, trial) meets the same
stretch.
"""

from __future__ import annotations

import hashlib
import random

#: The campaign key `offsets:` and `dch run --offsets` accept these.
MODES = ("random", "stratified", "latin")

#: The synthesized scenarios' trace seed in a `latin` campaign: one realization for all.
LATIN_TRACE_SEED = 1

#: Where in its stratum a `latin` load starts in the first n trials (then the radical
#: inverse moves it half a stratum, a quarter, ...): the middle, for every seed.
LATIN_WITHIN = 0.5


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


def _order(seed: int, n_items: int, index: int) -> int:
    if n_items < 1 or not 0 <= index < n_items:
        raise ValueError(f"item index {index} outside 0..{n_items - 1}")
    order = list(range(n_items))
    random.Random(f"dchannel-stratified-order:{seed}").shuffle(order)
    return order[index]


def stratified_fraction(seed: int, n_items: int, index: int, trial: int) -> float:
    """Start of item `index` (of `n_items`) in trial `trial`, as a fraction in [0, 1)
    of the trace's period (module doc)."""
    pos = _order(seed, n_items, index) + _shift(seed) + radical_inverse(trial)
    return (pos / n_items) % 1.0


def latin_fraction(seed: int, n_items: int, index: int, trial: int) -> float:
    """Start of item `index` in trial `trial` of a `latin` campaign (module doc): stratum
    (π(index) + trial) mod n, at (LATIN_WITHIN + r(trial // n)) mod 1 of it."""
    if trial < 0:
        raise ValueError(f"trial must be non-negative, got {trial}")
    stratum = (_order(seed, n_items, index) + trial) % n_items
    within = (LATIN_WITHIN + radical_inverse(trial // n_items)) % 1.0
    return (stratum + within) / n_items


def trial_fraction(mode: str, seed: int, n_items: int, index: int, trial: int) -> float | None:
    """The trace start of (item, trial) under offsets `mode`; None for `random` (the
    workload layer hashes (seed, item, trial))."""
    if mode == "stratified":
        return stratified_fraction(seed, n_items, index, trial)
    if mode == "latin":
        return latin_fraction(seed, n_items, index, trial)
    if mode == "random":
        return None
    raise ValueError(f"offsets {mode!r}: expected one of {', '.join(MODES)}")


def trace_seed(mode: str) -> int | None:
    """The seed the synthesized scenarios are drawn with under offsets `mode`, or None:
    the testbed's own per-(page, trial) seed (a realization per load)."""
    return LATIN_TRACE_SEED if mode == "latin" else None
