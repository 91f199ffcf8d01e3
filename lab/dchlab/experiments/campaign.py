"""Campaign files: an experiment as data (DESIGN.md, principle 4).

A campaign is a YAML file: schemes × channel conditions × workload × trials × seed,
the paper's numbers it reproduces, and a `quick:` subset for the demo and CI.
`load_campaign` validates it and raises `CampaignError` naming the file and the
field (`conditions[2].hbc`) and what was expected. The schema is documented in
docs/experiments.md.

A *cell* is one measurement: (condition, workload item, trial, scheme). Its key
is what the runner looks up in the results store to skip finished work.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dchlab import units
from dchlab.errors import UserError
from dchlab.experiments.offsets import MODES
from dchlab.pages.cdn import CdnSpec, CdnSpecError, parse_spec

WORKLOAD_KINDS = ("pageload", "curl-phases", "bulk", "app", "session")
ANALYSIS_KINDS = (
    "gain", "plt", "phases", "sweep", "bulk", "reorder", "reward-error", "app", "heatmap",
)  # fmt: skip

_TOP_KEYS = {
    "name",
    "description",
    "paper",
    "schemes",
    "conditions",
    "workload",
    "trials",
    "seed",
    "offsets",
    "quick",
    "analysis",
    "cdn",
}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=:-]*$")


class CampaignError(UserError, ValueError):
    """A campaign file that does not follow the schema."""


@dataclass(frozen=True)
class Scheme:
    """One arm of the comparison: a testbed scheme plus extra agent flags."""

    label: str  # unique within the campaign; used in cells, tables and plots
    scheme: str  # testbed scheme string, e.g. `dchannel:alpha=0.5`
    agent_args: tuple[str, ...] = ()  # both agents
    client_args: tuple[str, ...] = ()  # `dchannel client` (ue) only
    gateway_args: tuple[str, ...] = ()  # `dchannel gateway` (gw) only


@dataclass(frozen=True)
class Condition:
    """One channel condition: the HBC and LLC specs and what else is held fixed."""

    name: str
    hbc: str
    llc: str
    agent_args: tuple[str, ...] = ()
    client_args: tuple[str, ...] = ()
    gateway_args: tuple[str, ...] = ()
    server_delay_ms: float = 0.0
    cc: str = "cubic"
    x: dict[str, Any] = field(default_factory=dict)  # sweep coordinates for plots


@dataclass(frozen=True)
class Workload:
    kind: str
    corpus: str | None = None  # pageload / curl-phases / session
    # pageload: first N pages, or names; session: first N landing pages, or names
    pages: int | tuple[str, ...] | None = None
    session_pages: int = 4  # session: pages visited after the landing page
    url: str | None = None  # curl-phases
    sizes: tuple[int, ...] = ()  # bulk, bytes
    profiles: tuple[str, ...] = ()  # app: app profiles (social, shopping, news)
    interactions: tuple[str, ...] = ()  # app: launch, search, item
    timeout_s: float = 60.0
    # pageload / session: record the screencast for Speed Index and atf_ms (costs the
    # PLT ~6%, docs/benchmarks.md "Page metrics"); FCP and LCP are always measured
    speed_index: bool = False


@dataclass(frozen=True)
class Campaign:
    path: Path
    name: str
    description: str
    paper: dict[str, Any]
    schemes: tuple[Scheme, ...]
    conditions: tuple[Condition, ...]
    workload: Workload
    trials: int
    seed: int
    analysis: dict[str, Any]
    quick_spec: dict[str, Any]
    #: The `cdn:` block: webreplay's CDN tier model for every run (None: no CDN delays).
    cdn: CdnSpec | None = None
    is_quick: bool = False
    #: A rerun of another campaign (`dch run FILE --name NAME --seed N --pages N`): the
    #: original's name. Its rows carry it (`rerun_of`), and the report sets the two side
    #: by side (how far the headline gains moved).
    rerun_of: str | None = None
    #: The `dch run` flags that made this variant (for its rerun command).
    variant_flags: tuple[str, ...] = ()
    #: Where each load starts in the traces: `random` (per seed, page and trial) or
    #: `stratified` (each trial spreads the pages evenly over the trace;
    #: dchlab.experiments.offsets).
    offsets: str = "random"

    def scheme(self, label: str) -> Scheme:
        for s in self.schemes:
            if s.label == label:
                return s
        raise KeyError(label)

    def quick(self) -> Campaign:
        """The `quick:` subset (fewer schemes/conditions/trials/pages/sizes)."""
        q = self.quick_spec
        schemes = self.schemes
        if "schemes" in q:
            schemes = tuple(self.scheme(lbl) for lbl in q["schemes"])
        conditions = self.conditions
        if "conditions" in q:
            by_name = {c.name: c for c in self.conditions}
            conditions = tuple(by_name[n] for n in q["conditions"])
        wl = self.workload
        if "pages" in q:
            wl = replace(wl, pages=q["pages"])
        if "sizes" in q:
            wl = replace(wl, sizes=tuple(q["sizes"]))
        if "interactions" in q:
            wl = replace(wl, interactions=tuple(q["interactions"]))
        if "profiles" in q:
            wl = replace(wl, profiles=tuple(q["profiles"]))
        return replace(
            self,
            schemes=schemes,
            conditions=conditions,
            workload=wl,
            trials=int(q.get("trials", self.trials)),
            is_quick=True,
        )

    def rerun_command(self) -> str:
        try:
            from dchlab.paths import repo_root

            rel = self.path.resolve().relative_to(repo_root())
        except ValueError:
            rel = self.path
        flags = "".join(f" {f}" for f in self.variant_flags)
        return f"./dch run {rel}" + (" --quick" if self.is_quick else "") + flags

    def as_rerun(self, name: str, rows: Sequence[Mapping[str, Any]] = ()) -> Campaign:
        """This campaign's definition under a rerun's name (to summarise the rerun's
        rows on their own: same schemes, conditions and analysis). Its rerun command
        carries the flags the rows show the rerun was made with (`rerun_flags`)."""
        return replace(
            self,
            name=name,
            rerun_of=self.name,
            description=f"A rerun of {self.name} (its rows say how it differs: seed, pages, "
            f"machine, host_load1). {self.description}",
            variant_flags=self.rerun_flags(name, rows),
        )

    def rerun_flags(self, name: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The `dch run` flags that reproduce a rerun named `name` from its rows: the
        schemes and conditions it measured (when fewer than the file's), its page count,
        seed, offsets and trials (when they differ from the file's), in `variant`'s order."""
        flags: list[str] = []

        def subset(flag: str, known: list[str], seen: set[str]) -> None:
            if seen and seen < set(known):
                flags.append(f"{flag} {','.join(k for k in known if k in seen)}")

        subset("--schemes", [s.label for s in self.schemes], {str(r["arm"]) for r in rows if r.get("arm")})  # fmt: skip
        subset("--conditions", [c.name for c in self.conditions], {str(r["condition"]) for r in rows if r.get("condition")})  # fmt: skip
        pages = {str(r["page"]) for r in rows if r.get("page")}
        current = self.workload.pages
        n_file = len(current) if isinstance(current, tuple) else current
        if pages and self.workload.kind == "pageload" and (not n_file or len(pages) < n_file):
            flags.append(f"--pages {len(pages)}")
        seeds = {int(r["seed"]) for r in rows if r.get("seed") is not None}
        if len(seeds) == 1 and seeds != {self.seed}:
            flags.append(f"--seed {seeds.pop()}")
        offsets = {str(r["offsets"]) for r in rows if r.get("offsets")}
        if len(offsets) == 1 and offsets != {self.offsets}:
            flags.append(f"--offsets {offsets.pop()}")
        trials = max((int(r["trial"]) + 1 for r in rows if r.get("trial") is not None), default=0)
        if trials and trials != self.trials:
            flags.append(f"--trials {trials}")
        return (*flags, f"--name {name}")

    def _pick(self, flag: str, what: str, names: Sequence[str], items: tuple) -> tuple:
        """The items (schemes by label, conditions by name) that `names` names, in
        the file's order; an unknown name is a CampaignError naming the file."""
        known = [getattr(x, "label", None) or x.name for x in items]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise CampaignError(
                f"{self.path}: {flag} {','.join(unknown)}: not a {what} of this campaign "
                f"(expected some of {', '.join(known)})"
            )
        return tuple(x for x, k in zip(items, known, strict=True) if k in names)

    def variant(
        self,
        name: str | None = None,
        seed: int | None = None,
        pages: int | None = None,
        schemes: Sequence[str] | None = None,
        conditions: Sequence[str] | None = None,
        offsets: str | None = None,
    ) -> Campaign:
        """The same campaign with another name, seed, first-N-pages, or only some of its
        schemes (by label) and conditions (by name): the stability rerun of issue 18 (a
        page subset, another seed, another day), or part of a long campaign first. With
        a new name it is a rerun of this one (`rerun_of`), stored and published on its
        own."""
        flags: list[str] = []
        c = self
        if schemes:
            c = replace(c, schemes=self._pick("--schemes", "scheme label", schemes, self.schemes))
            flags.append(f"--schemes {','.join(schemes)}")
        if conditions:
            picked = self._pick("--conditions", "condition", conditions, self.conditions)
            c = replace(c, conditions=picked)
            flags.append(f"--conditions {','.join(conditions)}")
        if seed is not None and seed != self.seed and (name is None or name == self.name):
            raise CampaignError(
                f"{self.path}: --seed {seed} needs --name: cells do not name their seed, so a "
                "run with another seed is its own campaign (a rerun)"
            )
        if pages is not None:
            if c.workload.kind != "pageload":
                raise CampaignError(f"{self.path}: --pages applies to pageload campaigns only")
            current = c.workload.pages
            if isinstance(current, tuple):
                wl = replace(c.workload, pages=current[:pages])
            else:
                wl = replace(c.workload, pages=min(pages, current) if current else pages)
            c = replace(c, workload=wl)
            flags.append(f"--pages {pages}")
        if seed is not None:
            c = replace(c, seed=seed)
            flags.append(f"--seed {seed}")
        if offsets is not None and offsets != self.offsets:
            if name is None or name == self.name:
                raise CampaignError(
                    f"{self.path}: --offsets {offsets} needs --name: the cells would meet other "
                    "stretches of the traces than the stored ones (a rerun is its own campaign)"
                )
            if offsets not in MODES:
                raise CampaignError(f"--offsets {offsets!r}: expected one of {', '.join(MODES)}")
            c = replace(c, offsets=offsets)
            flags.append(f"--offsets {offsets}")
        if name is not None and name != self.name:
            if not _NAME_RE.match(name):
                raise CampaignError(f"--name {name!r}: expected letters, digits and ._+=:-")
            c = replace(c, name=name, rerun_of=self.rerun_of or self.name)
            flags.append(f"--name {name}")
        return replace(c, variant_flags=self.variant_flags + tuple(flags))


def cell_key(condition: str, item: str, trial: int, scheme_label: str) -> str:
    return f"{condition}|{item}|t{trial}|{scheme_label}"


def parse_size(value: Any, where: str) -> int:
    """A campaign size (dchlab.units.parse_size: `10KB`, `1MiB`, or a byte count)."""
    try:
        return units.parse_size(value)
    except (ValueError, TypeError) as exc:
        raise CampaignError(f"{where}: {exc}") from None


# ---------------------------------------------------------------- validation


class _V:
    """Validation helpers that prefix every error with the file name."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def err(self, where: str, msg: str) -> CampaignError:
        return CampaignError(f"{self.path}: {where}: {msg}")

    def mapping(self, v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.err(where, f"expected a mapping, got {type(v).__name__}")
        return v

    def string(self, v: Any, where: str) -> str:
        if not isinstance(v, str) or not v.strip():
            raise self.err(where, f"expected a non-empty string, got {v!r}")
        return v

    def name(self, v: Any, where: str) -> str:
        s = self.string(v, where)
        if not _NAME_RE.match(s) or "|" in s:
            raise self.err(where, f"expected a name of letters, digits and _.+=:- , got {s!r}")
        return s

    def pos_int(self, v: Any, where: str) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise self.err(where, f"expected a positive integer, got {v!r}")
        return v

    def number(self, v: Any, where: str, minimum: float = 0.0) -> float:
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        if not ok or not math.isfinite(v) or v < minimum:
            raise self.err(where, f"expected a finite number >= {minimum}, got {v!r}")
        return float(v)

    def boolean(self, v: Any, where: str) -> bool:
        if not isinstance(v, bool):
            raise self.err(where, f"expected true or false, got {v!r}")
        return v

    def args(self, v: Any, where: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if isinstance(v, str):
            return tuple(v.split())
        if isinstance(v, list) and all(isinstance(a, str | int | float) for a in v):
            return tuple(str(a) for a in v)
        raise self.err(where, f"expected a list of command-line arguments, got {v!r}")

    def unknown(self, d: dict[str, Any], allowed: set[str], where: str) -> None:
        extra = sorted(set(d) - allowed)
        if extra:
            raise self.err(
                f"{where}.{extra[0]}" if where else extra[0],
                f"unknown field (expected one of: {', '.join(sorted(allowed))})",
            )


def _check_channel(v: _V, spec: str, where: str) -> None:
    """Validate a channel spec's grammar and base name without building any trace.

    Uses the traces helper's parser (`dchlab.traces.profiles.parse_spec`) for the
    modifiers; the base must be a built-in, `fixed:<rtt>ms/<rate>mbit`, a scenario
    name or an existing profile file (relative to the campaign file or the cwd).
    """
    from dchlab.traces import builtin, profiles

    try:
        parsed = profiles.parse_spec(spec)
    except ValueError as e:
        raise v.err(where, str(e)) from e
    base = parsed.base
    try:  # the one channel-name grammar (traces/builtin.py), as chanemu reads it
        fixed = builtin.parse_builtin(base)
    except ValueError as e:
        raise v.err(where, str(e)) from e
    ok = (
        base in profiles.known_channels()
        or fixed is not None
        or Path(base).is_file()
        or (v.path.parent / base).is_file()
    )
    if not ok:
        raise v.err(
            where,
            f"unknown channel {base!r}: expected {', '.join(profiles.known_channels())}, "
            f"{builtin.FIXED_SYNTAX} (rate may be `unlimited`) or the path of a profile TOML",
        )


#: Extra agent flags a scheme entry or a condition may carry: both agents, client only,
#: gateway only (TestbedConfig.agent_args / client_args / gateway_args).
_ARG_FIELDS = ("agent_args", "client_args", "gateway_args")


def _agent_flags(v: _V, d: dict[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    return {f: v.args(d.get(f), f"{where}.{f}") for f in _ARG_FIELDS}


def _parse_scheme(v: _V, raw: Any, where: str) -> Scheme:
    if isinstance(raw, str):
        s = v.name(raw, where)
        return Scheme(label=s, scheme=s)
    d = v.mapping(raw, where)
    v.unknown(d, {"label", "scheme", *_ARG_FIELDS}, where)
    if "scheme" not in d:
        raise v.err(f"{where}.scheme", "missing (the testbed scheme, e.g. dchannel)")
    scheme = v.name(d["scheme"], f"{where}.scheme")
    label = v.name(d.get("label", scheme), f"{where}.label")
    return Scheme(label=label, scheme=scheme, **_agent_flags(v, d, where))


def _parse_condition(v: _V, raw: Any, where: str, check_channels: bool) -> Condition:
    d = v.mapping(raw, where)
    v.unknown(d, {"name", "hbc", "llc", *_ARG_FIELDS, "server_delay_ms", "cc", "x"}, where)
    for req in ("name", "hbc", "llc"):
        if req not in d:
            raise v.err(f"{where}.{req}", "missing")
    hbc = v.string(d["hbc"], f"{where}.hbc")
    llc = v.string(d["llc"], f"{where}.llc")
    if check_channels:
        _check_channel(v, hbc, f"{where}.hbc")
        _check_channel(v, llc, f"{where}.llc")
    cc = v.string(d.get("cc", "cubic"), f"{where}.cc")
    if cc not in ("cubic", "bbr", "reno"):
        raise v.err(f"{where}.cc", f"expected cubic, bbr or reno, got {cc!r}")
    x = v.mapping(d.get("x", {}), f"{where}.x")
    return Condition(
        name=v.name(d["name"], f"{where}.name"),
        hbc=hbc,
        llc=llc,
        **_agent_flags(v, d, where),
        server_delay_ms=v.number(d.get("server_delay_ms", 0.0), f"{where}.server_delay_ms"),
        cc=cc,
        x=dict(x),
    )


def _parse_pages(v: _V, raw: Any, where: str) -> int | tuple[str, ...] | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return v.pos_int(raw, where)
    if isinstance(raw, list) and raw:
        return tuple(v.string(p, f"{where}[{i}]") for i, p in enumerate(raw))
    raise v.err(where, f"expected a page count or a list of page names, got {raw!r}")


def _parse_workload(v: _V, raw: Any) -> Workload:
    d = v.mapping(raw, "workload")
    kind = d.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise v.err("workload.kind", f"expected one of {', '.join(WORKLOAD_KINDS)}, got {kind!r}")
    allowed = {
        "pageload": {"kind", "corpus", "pages", "timeout_s", "speed_index"},
        "curl-phases": {"kind", "corpus", "url", "timeout_s"},
        "bulk": {"kind", "sizes", "timeout_s"},
        "app": {"kind", "profiles", "interactions", "timeout_s"},
        "session": {"kind", "corpus", "pages", "session_pages", "timeout_s", "speed_index"},
    }[kind]
    v.unknown(d, allowed, "workload")
    timeout = v.number(d.get("timeout_s", 60.0), "workload.timeout_s", minimum=1.0)
    speed_index = v.boolean(d.get("speed_index", False), "workload.speed_index")
    if kind == "pageload":
        return Workload(
            kind=kind,
            corpus=v.string(d.get("corpus", "synthetic:1"), "workload.corpus"),
            pages=_parse_pages(v, d.get("pages"), "workload.pages"),
            timeout_s=timeout,
            speed_index=speed_index,
        )
    if kind == "session":  # browsing sessions (dchlab.workloads.session)
        return Workload(
            kind=kind,
            corpus=v.string(d.get("corpus", "synthetic:1"), "workload.corpus"),
            pages=_parse_pages(v, d.get("pages"), "workload.pages"),
            session_pages=v.pos_int(d.get("session_pages", 4), "workload.session_pages"),
            timeout_s=timeout,
            speed_index=speed_index,
        )
    if kind == "curl-phases":
        if "url" not in d:
            raise v.err("workload.url", "missing (the URL curl fetches)")
        return Workload(
            kind=kind,
            corpus=d.get("corpus") and v.string(d["corpus"], "workload.corpus"),
            url=v.string(d["url"], "workload.url"),
            timeout_s=timeout,
        )
    if kind == "bulk":
        sizes = d.get("sizes")
        if not isinstance(sizes, list) or not sizes:
            raise v.err("workload.sizes", f"expected a non-empty list of sizes, got {sizes!r}")
        return Workload(
            kind=kind,
            sizes=tuple(
                parse_size(s, f"{v.path}: workload.sizes[{i}]") for i, s in enumerate(sizes)
            ),
            timeout_s=timeout,
        )
    profs = d.get("profiles")
    if not isinstance(profs, list) or not profs:
        raise v.err(
            "workload.profiles", f"expected a non-empty list of app profiles, got {profs!r}"
        )
    inter = d.get("interactions", ["launch", "search", "item"])
    if not isinstance(inter, list) or not inter:
        raise v.err("workload.interactions", f"expected a list, got {inter!r}")
    return Workload(
        kind=kind,
        profiles=tuple(v.name(p, f"workload.profiles[{n}]") for n, p in enumerate(profs)),
        interactions=tuple(v.name(i, f"workload.interactions[{n}]") for n, i in enumerate(inter)),
        timeout_s=timeout,
    )


def _check_paper(v: _V, paper: dict[str, Any], conditions: list[str], arms: list[str]) -> None:
    """paper.values: {condition: {scheme label: number | {metric: number}}}."""
    v.unknown(paper, {"source", "metric", "values", "notes"}, "paper")
    values = v.mapping(paper.get("values", {}), "paper.values")
    for cond, per_arm in values.items():
        if cond not in conditions:
            raise v.err(f"paper.values.{cond}", f"not a condition name ({', '.join(conditions)})")
        for arm, val in v.mapping(per_arm, f"paper.values.{cond}").items():
            where = f"paper.values.{cond}.{arm}"
            if arm not in arms:
                raise v.err(where, f"not a scheme label ({', '.join(arms)})")
            if isinstance(val, dict):
                for metric, num in val.items():
                    v.number(num, f"{where}.{metric}", minimum=-1e9)
            else:
                v.number(val, where, minimum=-1e9)
    notes = paper.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise v.err("paper.notes", "expected a list of strings")


def parse_campaign(data: Any, path: Path, check_channels: bool = True) -> Campaign:
    v = _V(path)
    d = v.mapping(data, "top level")
    v.unknown(d, _TOP_KEYS, "")
    for req in ("name", "schemes", "conditions", "workload"):
        if req not in d:
            raise v.err(req, "missing")
    name = v.name(d["name"], "name")
    if not isinstance(d["schemes"], list) or not d["schemes"]:
        raise v.err("schemes", "expected a non-empty list")
    schemes = tuple(_parse_scheme(v, s, f"schemes[{i}]") for i, s in enumerate(d["schemes"]))
    labels = [s.label for s in schemes]
    dup = sorted({lbl for lbl in labels if labels.count(lbl) > 1})
    if dup:
        raise v.err("schemes", f"duplicate label {dup[0]!r} (give each arm its own `label:`)")
    if not isinstance(d["conditions"], list) or not d["conditions"]:
        raise v.err("conditions", "expected a non-empty list")
    conditions = tuple(
        _parse_condition(v, c, f"conditions[{i}]", check_channels)
        for i, c in enumerate(d["conditions"])
    )
    cnames = [c.name for c in conditions]
    dupc = sorted({n for n in cnames if cnames.count(n) > 1})
    if dupc:
        raise v.err("conditions", f"duplicate condition name {dupc[0]!r}")
    workload = _parse_workload(v, d["workload"])
    trials = v.pos_int(d.get("trials", 1), "trials")
    seed = d.get("seed", 1)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise v.err("seed", f"expected a non-negative integer, got {seed!r}")
    offsets = d.get("offsets", "random")
    if offsets not in MODES:
        raise v.err("offsets", f"expected one of {', '.join(MODES)}, got {offsets!r}")
    paper = v.mapping(d.get("paper", {}), "paper")
    analysis = v.mapping(d.get("analysis", {"kind": "gain"}), "analysis")
    v.unknown(
        analysis,
        {
            "kind",
            "baseline",
            "metric",
            "metrics",
            "best_of",
            "stats",
            "stat",
            "ideal",
            "singles",
            "llc_usage",
            "versus",
            "hindsight",
        },
        "analysis",
    )
    akind = analysis.get("kind", "gain")
    if akind not in ANALYSIS_KINDS:
        raise v.err("analysis.kind", f"expected one of {', '.join(ANALYSIS_KINDS)}, got {akind!r}")
    baseline = analysis.get("baseline", "all-hbc")
    if akind not in ("phases", "reward-error") and baseline not in labels:
        raise v.err("analysis.baseline", f"{baseline!r} is not one of the schemes {labels}")
    best_of = v.mapping(analysis.get("best_of", {}), "analysis.best_of")
    for blabel, members in best_of.items():
        if not isinstance(members, list) or not all(m in labels for m in members):
            raise v.err(
                f"analysis.best_of.{blabel}", f"expected a list of scheme labels of {labels}"
            )
    if not isinstance(analysis.get("llc_usage", False), bool):
        raise v.err("analysis.llc_usage", f"expected true or false, got {analysis['llc_usage']!r}")
    versus = v.mapping(analysis.get("versus", {}), "analysis.versus")
    if versus:
        v.unknown(versus, {"candidate", "reference"}, "analysis.versus")
        for k in ("candidate", "reference"):
            if versus.get(k) not in labels:
                raise v.err(
                    f"analysis.versus.{k}", f"{versus.get(k)!r} is not one of the schemes {labels}"
                )
    hindsight = analysis.get("hindsight", [])
    if not isinstance(hindsight, list) or (
        hindsight and (len(hindsight) < 2 or any(m not in labels for m in hindsight))
    ):
        raise v.err(
            "analysis.hindsight",
            f"expected a list of at least two scheme labels of {labels}, got {hindsight!r}",
        )
    singles = analysis.get("singles", [])
    if akind == "heatmap":
        if (
            not isinstance(singles, list)
            or len(singles) < 1
            or any(m not in labels for m in singles)
        ):
            raise v.err(
                "analysis.singles",
                f"expected a list of the single-network schemes (labels of {labels}), got {singles!r}",
            )
        for i, cond in enumerate(conditions):
            if not {"a", "b"} <= set(cond.x):
                raise v.err(
                    f"conditions[{i}].x",
                    "a heatmap needs x: {a: <network A>, b: <network B>} (its row and column)",
                )
    _check_paper(v, paper, cnames, labels + list(best_of))
    quick = v.mapping(d.get("quick", {}), "quick")
    v.unknown(
        quick,
        {"schemes", "conditions", "trials", "pages", "sizes", "interactions", "profiles"},
        "quick",
    )
    for i, lbl in enumerate(quick.get("schemes", [])):
        if lbl not in labels:
            raise v.err(f"quick.schemes[{i}]", f"{lbl!r} is not a scheme label of this campaign")
    for i, cn in enumerate(quick.get("conditions", [])):
        if cn not in cnames:
            raise v.err(f"quick.conditions[{i}]", f"{cn!r} is not a condition name")
    if "trials" in quick:
        v.pos_int(quick["trials"], "quick.trials")
    quick = dict(quick)
    if "pages" in quick:
        quick["pages"] = _parse_pages(v, quick["pages"], "quick.pages")
    if "sizes" in quick:
        quick["sizes"] = [
            parse_size(s, f"{path}: quick.sizes[{i}]") for i, s in enumerate(quick["sizes"])
        ]
    cdn = None
    if "cdn" in d:
        try:
            cdn = parse_spec(d["cdn"], f"{path}: cdn")
        except CdnSpecError as e:
            raise CampaignError(str(e)) from e
    return Campaign(
        path=path,
        name=name,
        description=str(d.get("description", "")).strip(),
        paper=dict(paper),
        schemes=schemes,
        conditions=conditions,
        workload=workload,
        trials=trials,
        seed=seed,
        offsets=offsets,
        analysis={"kind": akind, "baseline": baseline, **analysis},
        quick_spec=quick,
        cdn=cdn,
    )


def load_campaign(path: str | Path, check_channels: bool = True) -> Campaign:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise CampaignError(f"{p}: cannot read campaign file: {e.strerror}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise CampaignError(f"{p}: not valid YAML: {e}") from e
    return parse_campaign(data, p, check_channels=check_channels)
