"""App profiles: origins and interactions (request DAGs) as data (docs/apps.md).

A profile file (YAML or JSON) names the app's origins by role and, per interaction
(`launch`, `search`, `item`), the requests the app makes: which origin and path, JSON
or image, response size, server think time and `after` — the requests whose responses
the app must have received (and parsed) before it can send this one. `count: N`
expands a request into N siblings (`thumb.0` … `thumb.N-1`); a request listed in
`after` by its base name waits for all of them. Sizes and think times are fixed
numbers or `[lo, hi]` ranges, drawn log-uniformly with the profile's seed, so a
profile always compiles to the same corpus.

`load_profile()` validates everything and raises ProfileError naming the file and
the field (`interactions.launch.requests[3].after`) and what was expected; cycles are
reported with the path that closes them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dchlab.errors import UserError

PROFILES_DIR = Path(__file__).parent / "profiles"
INTERACTIONS = ("launch", "search", "item")
KINDS = ("json", "image")
_ID_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
_HOST_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$")
MAX_COUNT = 64
MAX_SIZE = 20_000_000


class ProfileError(UserError, ValueError):
    """A profile file that does not follow docs/apps.md."""


@dataclass(frozen=True)
class Request:
    """One expanded request of an interaction."""

    id: str  # unique within the interaction (`feed`, `thumb.3`)
    origin: str  # origin role
    path: str  # path (+ optional query), unique per profile after expansion
    kind: str  # json | image
    size: int  # response body bytes
    think_ms: float  # server think time before the response headers
    after: tuple[str, ...]  # expanded ids of the parents


@dataclass
class Interaction:
    name: str
    trigger: str  # click | key: how the user starts it (a CDP mouse or key event)
    requests: list[Request]

    def by_id(self) -> dict[str, Request]:
        return {r.id: r for r in self.requests}

    def children(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {r.id: [] for r in self.requests}
        for r in self.requests:
            for p in r.after:
                out[p].append(r.id)
        return out

    def depth(self) -> int:
        """Longest dependency chain (requests on the critical path of round trips)."""
        memo: dict[str, int] = {}
        byid = self.by_id()

        def d(i: str) -> int:
            if i not in memo:
                memo[i] = 1 + max((d(p) for p in byid[i].after), default=0)
            return memo[i]

        return max((d(r.id) for r in self.requests), default=0)


@dataclass
class AppProfile:
    name: str
    description: str
    file: Path
    seed: int
    origins: dict[str, str]  # role -> host
    shell: str  # role of the origin serving the app's HTML/JS
    interactions: dict[str, Interaction] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def host(self, role: str) -> str:
        return self.origins[role]


# ---------------------------------------------------------------- loading


class _V:
    """Validation helpers that prefix every message with the file and field."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def err(self, where: str, msg: str) -> ProfileError:
        return ProfileError(f"{self.file}: {where}: {msg}")

    def get(
        self, d: Any, key: str, where: str, kind: type | tuple[type, ...], default: Any = ...
    ) -> Any:
        if not isinstance(d, dict):
            raise self.err(where, f"expected a mapping, got {type(d).__name__}")
        if key not in d:
            if default is ...:
                raise self.err(f"{where}.{key}" if where else key, "missing required field")
            return default
        v = d[key]
        ok = isinstance(v, kind) and not (isinstance(v, bool) and kind is not bool)
        if not ok:
            want = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            raise self.err(
                f"{where}.{key}" if where else key, f"expected {want}, got {json.dumps(v)[:60]}"
            )
        return v

    def number_or_range(self, v: Any, where: str, lo: float, hi: float) -> tuple[float, float]:
        if isinstance(v, bool):
            raise self.err(where, f"expected a number or [lo, hi], got {v!r}")
        if isinstance(v, int | float):
            a = b = float(v)
        elif (
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
        ):
            a, b = float(v[0]), float(v[1])
        else:
            raise self.err(where, f"expected a number or [lo, hi], got {json.dumps(v)[:60]}")
        if not (lo <= a <= b <= hi):
            raise self.err(where, f"expected {lo:g} <= lo <= hi <= {hi:g}, got {json.dumps(v)}")
        return a, b


def _draw(rng: np.random.Generator, span: tuple[float, float]) -> float:
    a, b = span
    if a == b:
        return a
    lo = math.log(max(a, 1e-3))
    return float(math.exp(rng.uniform(lo, math.log(b))))


def _read(file: Path) -> Any:
    text = file.read_text()
    if file.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ProfileError(f"{file}: line {e.lineno}: invalid JSON: {e.msg}") from e
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ProfileError(f"{file}: {line}invalid YAML: {e}") from e


def profile_path(name_or_path: str | Path) -> Path:
    """A built-in profile name (`social`) or a path to a profile file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml", ".json") or p.exists():
        if not p.is_file():
            raise ProfileError(f"{p}: no such profile file")
        return p
    for ext in (".yaml", ".yml", ".json"):
        cand = PROFILES_DIR / f"{name_or_path}{ext}"
        if cand.is_file():
            return cand
    raise ProfileError(
        f"unknown app profile {str(name_or_path)!r}: expected one of "
        f"{', '.join(builtin_profiles())} or a profile file path"
    )


def builtin_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def load_profile(name_or_path: str | Path) -> AppProfile:
    file = profile_path(name_or_path)
    return parse_profile(_read(file), file)


def parse_profile(data: Any, file: Path) -> AppProfile:
    v = _V(file)
    if not isinstance(data, dict):
        raise v.err("top level", f"expected a mapping, got {type(data).__name__}")
    known = {"name", "description", "seed", "sources", "origins", "shell", "interactions"}
    for k in data:
        if k not in known:
            raise v.err(str(k), f"unknown field (expected one of {', '.join(sorted(known))})")
    name = v.get(data, "name", "", str)
    if not _ID_RE.match(name):
        raise v.err("name", f"expected lowercase letters, digits, '-' or '_', got {name!r}")
    seed = v.get(data, "seed", "", int, 1)
    sources = v.get(data, "sources", "", list, [])
    origins_raw = v.get(data, "origins", "", dict)
    origins: dict[str, str] = {}
    for role, host in origins_raw.items():
        if not isinstance(host, str) or not _HOST_RE.match(host):
            raise v.err(f"origins.{role}", f"expected a lowercase DNS host name, got {host!r}")
        if host in origins.values():
            raise v.err(f"origins.{role}", f"host {host!r} is listed twice")
        origins[str(role)] = host
    shell = v.get(data, "shell", "", str)
    if shell not in origins:
        raise v.err("shell", f"unknown origin role {shell!r} (origins: {', '.join(origins)})")
    prof = AppProfile(
        name=name,
        description=str(data.get("description", "")).strip(),
        file=file,
        seed=seed,
        origins=origins,
        shell=shell,
        sources=[str(s) for s in sources],
    )
    inter_raw = v.get(data, "interactions", "", dict)
    for iname in inter_raw:
        if iname not in INTERACTIONS:
            raise v.err(
                f"interactions.{iname}",
                f"unknown interaction (expected {', '.join(INTERACTIONS)})",
            )
    for iname in INTERACTIONS:
        if iname not in inter_raw:
            raise v.err(f"interactions.{iname}", "missing required interaction")
        rng = np.random.default_rng([seed, INTERACTIONS.index(iname)])
        prof.interactions[iname] = _interaction(v, prof, iname, inter_raw[iname], rng)
    seen: dict[str, str] = {}
    for iname, it in prof.interactions.items():
        for r in it.requests:
            key = f"{r.origin} {r.path}"
            if key in seen:
                raise v.err(
                    f"interactions.{iname}.requests[{r.id}].path",
                    f"{prof.origins[r.origin]}{r.path} is also requested by {seen[key]}: "
                    "every request needs its own URL",
                )
            seen[key] = f"{iname}.{r.id}"
    return prof


def _interaction(
    v: _V, prof: AppProfile, iname: str, raw: Any, rng: np.random.Generator
) -> Interaction:
    where = f"interactions.{iname}"
    if isinstance(raw, dict):
        for k in raw:
            if k != "requests":
                raise v.err(f"{where}.{k}", "unknown field (expected requests)")
    # How the user starts it (the client's UI): Enter in the search box, else a tap.
    trigger = "key" if iname == "search" else "click"
    reqs_raw = v.get(raw, "requests", where, list)
    if not reqs_raw:
        raise v.err(f"{where}.requests", "expected at least one request")
    groups: dict[str, list[str]] = {}  # base id -> expanded ids
    kind_of: dict[str, str] = {}
    pending: list[tuple[str, dict[str, Any], str, list[str]]] = []
    allowed = {"id", "origin", "path", "kind", "size", "think_ms", "after", "count"}
    for i, rr in enumerate(reqs_raw):
        w = f"{where}.requests[{i}]"
        if not isinstance(rr, dict):
            raise v.err(w, f"expected a mapping, got {type(rr).__name__}")
        for k in rr:
            if k not in allowed:
                raise v.err(f"{w}.{k}", f"unknown field (expected {', '.join(sorted(allowed))})")
        rid = v.get(rr, "id", w, str)
        if not _ID_RE.match(rid):
            raise v.err(f"{w}.id", f"expected lowercase letters, digits, '-' or '_', got {rid!r}")
        if rid in groups:
            raise v.err(f"{w}.id", f"duplicate request id {rid!r}")
        count = v.get(rr, "count", w, int, 1)
        if not 1 <= count <= MAX_COUNT:
            raise v.err(f"{w}.count", f"expected 1..{MAX_COUNT}, got {count}")
        groups[rid] = [rid] if count == 1 else [f"{rid}.{k}" for k in range(count)]
        kind = v.get(rr, "kind", w, str)
        if kind not in KINDS:
            raise v.err(f"{w}.kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
        kind_of[rid] = kind
        after = v.get(rr, "after", w, list, [])
        for j, a in enumerate(after):
            if not isinstance(a, str):
                raise v.err(f"{w}.after[{j}]", f"expected a request id, got {a!r}")
        pending.append((w, rr, rid, list(after)))
    requests: list[Request] = []
    for w, rr, rid, after in pending:
        origin = v.get(rr, "origin", w, str)
        if origin not in prof.origins:
            raise v.err(
                f"{w}.origin",
                f"unknown origin role {origin!r} (origins: {', '.join(prof.origins)})",
            )
        if origin == prof.shell:
            raise v.err(f"{w}.origin", f"{origin!r} serves the app shell, not API or media")
        path = v.get(rr, "path", w, str)
        if not path.startswith("/") or " " in path or "#" in path:
            raise v.err(f"{w}.path", f"expected an absolute path like /api/feed, got {path!r}")
        size = v.number_or_range(
            v.get(rr, "size", w, (int, float, list)), f"{w}.size", 200, MAX_SIZE
        )
        think = v.number_or_range(
            v.get(rr, "think_ms", w, (int, float, list), 0), f"{w}.think_ms", 0, 60_000
        )
        parents: list[str] = []
        for j, a in enumerate(after):
            if a not in groups:
                raise v.err(
                    f"{w}.after[{j}]",
                    f"unknown request {a!r} (requests of {iname}: {', '.join(groups)})",
                )
            if a == rid:
                raise v.err(f"{w}.after[{j}]", f"dependency cycle: {rid} -> {rid}")
            if kind_of[a] != "json":
                raise v.err(
                    f"{w}.after[{j}]",
                    f"{a!r} is an image: only a JSON response can tell the app what to fetch next",
                )
            parents += groups[a]
        kind = kind_of[rid]
        for k, eid in enumerate(groups[rid]):
            epath = path if len(groups[rid]) == 1 else _indexed(path, k)
            requests.append(
                Request(
                    id=eid,
                    origin=origin,
                    path=epath,
                    kind=kind,
                    size=round(_draw(rng, size)),
                    think_ms=round(_draw(rng, think), 1),
                    after=tuple(parents),
                )
            )
    it = Interaction(iname, trigger, requests)
    _check_acyclic(v, where, it, {eid: base for base, ids in groups.items() for eid in ids})
    return it


def _indexed(path: str, k: int) -> str:
    """`/t/feed.jpg` → `/t/feed-3.jpg` (the k-th sibling of a `count:` request)."""
    base, q, query = path.partition("?")
    stem, dot, ext = base.rpartition(".")
    out = f"{stem}-{k}.{ext}" if dot and "/" not in ext else f"{base}-{k}"
    return f"{out}?{query}" if q else out


def _check_acyclic(v: _V, where: str, it: Interaction, base_of: dict[str, str]) -> None:
    byid = it.by_id()
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(i: str, stack: list[str]) -> None:
        state[i] = 1
        for p in byid[i].after:
            if state.get(p) == 1:
                names: list[str] = []
                for c in [*stack[stack.index(p) :], p]:
                    if not names or names[-1] != base_of[c]:
                        names.append(base_of[c])
                raise v.err(
                    f"{where}.requests",
                    "dependency cycle: " + " -> ".join(names) + " (each waits for the next)",
                )
            if state.get(p) != 2:
                visit(p, [*stack, p])
        state[i] = 2

    for r in it.requests:
        if r.id not in state:
            visit(r.id, [r.id])


def session_for(interaction: str) -> list[str]:
    """The interactions one trial performs, in order; the last one is measured.

    A trial starts a cold app (fresh browser profile, no connections): `launch` is
    measured cold; `search` and `item` run after a launch in the same session, as a
    user would, so the app's connections to its API origins are warm.
    """
    if interaction not in INTERACTIONS:
        raise ValueError(f"unknown interaction {interaction!r}: expected {', '.join(INTERACTIONS)}")
    return ["launch"] if interaction == "launch" else ["launch", interaction]
