"""CDN tiers of recorded responses (docs/formats.md "CDN tiers").

HotMobile'21 puts a CDN hierarchy behind the channels: edge hit, parent hit (edge miss),
origin (both missed). `classify(headers)` reads the tier from the CDN debugging headers a
recorded response carries; importers store it as the manifest's `objects[i].tier`. Objects
without such headers get no tier: webreplay decides theirs at run time from the seeded
hit ratio, with the draw `ratio_draw` mirrors (crates/webreplay/src/cdn.rs).

A cache chain is a list of per-cache statuses, the edge (the cache nearest the client)
first; its tier is `edge` if the edge hit, `parent` if a cache behind it hit, else `origin`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from dchlab.errors import UserError
from dchlab.units import is_uint

Tier = Literal["edge", "parent", "origin"]
TIERS: tuple[Tier, ...] = ("edge", "parent", "origin")

#: Cache statuses that mean "answered from this cache" (stale-while-revalidate too: the
#: client waited for no one behind it).
_HIT = frozenset(
    {"HIT", "TCP_HIT", "TCP_MEM_HIT", "TCP_IMS_HIT", "TCP_NEGATIVE_HIT", "STALE", "UPDATING"}
)
#: Statuses that mean "went past this cache": a miss, a revalidation with the origin
#: (CloudFront RefreshHit, Akamai TCP_REFRESH_*, Cloudflare REVALIDATED/EXPIRED) or an
#: uncacheable pass.
_MISS = frozenset(
    {
        "MISS",
        "TCP_MISS",
        "TCP_REFRESH_HIT",
        "TCP_REFRESH_MISS",
        "TCP_REFRESH_FAIL_HIT",
        "TCP_IMS_MISS",
        "REFRESHHIT",
        "EXPIRED",
        "REVALIDATED",
        "BYPASS",
        "DYNAMIC",
        "PASS",
    }
)


def _status(token: str) -> bool | None:
    """True = hit, False = miss, None = says nothing (ERROR, NONE, unknown words).
    The first word counts: `TCP_MISS from a23-...` and `Hit from cloudfront` both work."""
    words = token.strip().strip('"').split()
    if not words:
        return None
    w = words[0].upper()
    if w in _HIT:
        return True
    if w in _MISS:
        return False
    return None


def chain_tier(statuses: list[bool]) -> Tier:
    """Edge-first hit/miss per cache → the tier that answered."""
    if statuses and statuses[0]:
        return "edge"
    if any(statuses[1:]):
        return "parent"
    return "origin"


def _chain(tokens: Iterable[str]) -> Tier | None:
    """Tier of edge-first status tokens; None if any token says nothing."""
    st = [_status(t) for t in tokens]
    if not st or any(s is None for s in st):
        return None
    return chain_tier([bool(s) for s in st])


def _values(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Lower-case name → every comma-separated element, in recorded order (several
    fields of one name are one list, RFC 9110 §5.3)."""
    out: dict[str, list[str]] = {}
    for k, v in headers:
        out.setdefault(k.lower(), []).extend(p.strip() for p in v.split(",") if p.strip())
    return out


_DEBUG_TTL = re.compile(r"\(\s*([HMP])\s")
_ST_DESC = re.compile(r'desc\s*=\s*"?([A-Za-z_]+)"?', re.I)


def _server_timing(entries: list[str]) -> Tier | None:
    for e in entries:
        name = e.split(";", 1)[0].strip().lower()
        if name == "cdn-cache":
            m = _ST_DESC.search(e)
            s = _status(m.group(1)) if m else None
            if s is not None:
                return "edge" if s else "origin"
        elif name == "cdn-cache-hit":
            return "edge"
        elif name == "cdn-cache-miss":
            return "origin"
    return None


def classify(headers: Iterable[tuple[str, str]] | Mapping[str, str]) -> Tier | None:
    """The CDN tier a recorded response's headers show, or None if they show none.

    Rules in order (the first that decides wins; the table in docs/formats.md says why):
    Akamai-Cache-Status chain; Akamai X-Cache + X-Cache-Remote (child, parent);
    X-Cache (several values: Fastly order, shield first, edge last); Fastly-Debug-TTL
    (edge first); CF-Cache-Status; Server-Timing cdn-cache; single-status headers of other
    caches (X-Cache-Status, X-Proxy-Cache, CDN-Cache, X-Vercel-Cache,
    X-Edge-Result-Type); X-Cache-Hits (Fastly, per node, same order as X-Served-By);
    X-Varnish with two transaction ids (a hit); Age > 0 (cached somewhere: edge).
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    h = _values(items)

    if "akamai-cache-status" in h:
        # "Miss from child, Hit from parent": edge first.
        t = _chain(h["akamai-cache-status"])
        if t:
            return t
    if "x-cache-remote" in h and "x-cache" in h:
        # Akamai tiered distribution: X-Cache is the edge (child), X-Cache-Remote the parent.
        t = _chain([h["x-cache"][0], h["x-cache-remote"][0]])
        if t:
            return t
    if "x-cache" in h:
        # Fastly appends per node (shield first, edge last); one value: that cache.
        t = _chain(reversed(h["x-cache"]))
        if t:
            return t
    if "fastly-debug-ttl" in h:
        # "(M cache-lcy-LCY - - 0) (H cache-iad-IAD 86388.433 0.000 11)": edge first.
        flags = _DEBUG_TTL.findall(" ".join(h["fastly-debug-ttl"]))
        if flags:
            return chain_tier([f == "H" for f in flags])
    if "cf-cache-status" in h:
        s = _status(h["cf-cache-status"][0])
        if s is not None:
            return "edge" if s else "origin"
    if "server-timing" in h:
        t = _server_timing(h["server-timing"])
        if t:
            return t
    for name in ("x-cache-status", "x-proxy-cache", "cdn-cache", "x-vercel-cache"):
        if name in h:
            s = _status(h[name][0])
            if s is not None:
                return "edge" if s else "origin"
    if "x-edge-result-type" in h:  # CloudFront: Hit, RefreshHit, Miss, Error
        s = _status(h["x-edge-result-type"][0])
        if s is not None:
            return "edge" if s else "origin"
    if "x-cache-hits" in h:
        counts = [c.strip() for c in h["x-cache-hits"]]
        if counts and all(is_uint(c) for c in counts):
            return chain_tier([int(c) > 0 for c in reversed(counts)])
    if "x-varnish" in h:
        # Varnish: "<xid>" on a miss, "<xid> <xid of the cached object>" on a hit.
        ids = h["x-varnish"][-1].split()
        if ids and all(is_uint(i) for i in ids):
            return "edge" if len(ids) >= 2 else "origin"
    if "age" in h:
        age = h["age"][0]
        if is_uint(age) and int(age) > 0:
            return "edge"
    return None


def ratio_draw(url: str, seed: int) -> float:
    """webreplay's hit-ratio draw: the first 8 bytes of sha256("<seed>\\0<url>") as a
    big-endian integer over 2^64 (crates/webreplay/src/cdn.rs `ratio_draw`)."""
    d = hashlib.sha256(f"{seed}\x00{url}".encode()).digest()
    return int.from_bytes(d[:8], "big") / 2**64


def ratio_tier(url: str, seed: int, edge: float, parent: float) -> Tier:
    """The tier webreplay gives an object without a recorded tier."""
    u = ratio_draw(url, seed)
    if u < edge:
        return "edge"
    if u < edge + parent:
        return "parent"
    return "origin"


class CdnSpecError(UserError, ValueError):
    """A CDN setting (campaign `cdn:` block, --cdn-hit-ratio) that is not valid."""


@dataclass(frozen=True)
class CdnSpec:
    """The CDN model of a run: webreplay's --cdn-* flags. Defaults: HotMobile'21's delays
    (edge 0, parent +10 ms edge→parent RTT, origin +50 ms with the 40 ms parent→origin);
    objects without a recorded tier are edge hits unless `hit_ratio` says otherwise."""

    delays_ms: tuple[float, float, float] = (0.0, 10.0, 50.0)  # edge, parent, origin
    hit_ratio: tuple[float, float] = (1.0, 0.0)  # edge, parent; the origin gets the rest
    seed: int = 1

    def webreplay_args(self) -> tuple[str, ...]:
        d = ",".join(f"{t}={ms:g}" for t, ms in zip(TIERS, self.delays_ms, strict=True))
        e, p = self.hit_ratio
        return (
            "--cdn-delays-ms", d,
            "--cdn-hit-ratio", f"edge={e:g},parent={p:g}",
            "--cdn-seed", str(self.seed),
        )  # fmt: skip


def _share(v: object, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= float(v) <= 1.0:
        raise CdnSpecError(f"{where}: expected a share in 0..1, got {v!r}")
    return float(v)


def check_ratio(edge: float, parent: float, where: str) -> tuple[float, float]:
    if edge + parent > 1.0 + 1e-9:
        raise CdnSpecError(
            f"{where}: edge {edge:g} + parent {parent:g} exceeds 1 (the origin gets the rest)"
        )
    return (edge, parent)


def parse_hit_ratio(spec: str, where: str = "--cdn-hit-ratio") -> tuple[float, float]:
    """`edge=0.6,parent=0.25` → (0.6, 0.25) (an omitted tier is 0), as webreplay parses it."""
    got = {"edge": 0.0, "parent": 0.0}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        k, sep, v = part.partition("=")
        if not sep or k.strip() not in got:
            raise CdnSpecError(f"{where}: expected edge=SHARE,parent=SHARE, got {part!r}")
        try:
            got[k.strip()] = _share(float(v), f"{where} {k.strip()}")
        except ValueError as e:
            raise CdnSpecError(f"{where}: {k.strip()}={v!r} is not a number") from e
    return check_ratio(got["edge"], got["parent"], where)


def parse_spec(raw: object, where: str) -> CdnSpec:
    """A campaign's `cdn:` mapping: {delays_ms: {edge, parent, origin}, hit_ratio: {edge,
    parent}, seed}; every key optional (defaults of CdnSpec)."""
    if not isinstance(raw, Mapping):
        raise CdnSpecError(f"{where}: expected a mapping (delays_ms, hit_ratio, seed), got {raw!r}")
    unknown = sorted(set(raw) - {"delays_ms", "hit_ratio", "seed"})
    if unknown:
        raise CdnSpecError(
            f"{where}.{unknown[0]}: unknown key (expected delays_ms, hit_ratio, seed)"
        )
    base = CdnSpec()
    delays = list(base.delays_ms)
    d = raw.get("delays_ms", {})
    if not isinstance(d, Mapping):
        raise CdnSpecError(f"{where}.delays_ms: expected {{edge: MS, parent: MS, origin: MS}}")
    for k, v in d.items():
        if k not in TIERS:
            raise CdnSpecError(f"{where}.delays_ms.{k}: not a tier (edge, parent, origin)")
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 60000:
            raise CdnSpecError(f"{where}.delays_ms.{k}: expected milliseconds 0..60000, got {v!r}")
        delays[TIERS.index(k)] = float(v)
    ratio = base.hit_ratio
    if "hit_ratio" in raw:
        r = raw["hit_ratio"]
        if not isinstance(r, Mapping):
            raise CdnSpecError(f"{where}.hit_ratio: expected {{edge: SHARE, parent: SHARE}}")
        bad = sorted(set(r) - {"edge", "parent"})
        if bad:
            raise CdnSpecError(
                f"{where}.hit_ratio.{bad[0]}: give edge and parent only (the origin gets the rest)"
            )
        ratio = check_ratio(
            _share(r.get("edge", 0.0), f"{where}.hit_ratio.edge"),
            _share(r.get("parent", 0.0), f"{where}.hit_ratio.parent"),
            f"{where}.hit_ratio",
        )
    seed = raw.get("seed", base.seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise CdnSpecError(f"{where}.seed: expected a non-negative integer, got {seed!r}")
    return CdnSpec((delays[0], delays[1], delays[2]), ratio, seed)
