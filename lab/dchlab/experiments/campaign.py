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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# CampaignError, parse_size: re-exported (the campaign API of callers and tests)
from dchlab.experiments.campaign_check import NAME_RE, CampaignError, parse_size  # noqa: F401
from dchlab.experiments.offsets import MODES
from dchlab.pages.cdn import CdnSpec
from dchlab.workloads.bgusers import clients as bg_clients
from dchlab.workloads.bgusers import think

if TYPE_CHECKING:
    from dchlab.experiments.workload_kinds import WorkloadKind


@dataclass(frozen=True)
class Scheme:
    """One arm of the comparison: a testbed scheme plus extra agent flags."""

    label: str  # unique within the campaign; used in cells, tables and plots
    scheme: str  # testbed scheme string, e.g. `dchannel:alpha=0.5`
    agent_args: tuple[str, ...] = ()  # both agents
    client_args: tuple[str, ...] = ()  # `dchannel client` (ue) only
    gateway_args: tuple[str, ...] = ()  # `dchannel gateway` (gw) only
    #: This arm's page-load protocol (dchlab.protocol); None: the campaign's `protocol:`.
    #: Arms of two protocols in one campaign share each (page, trial)'s paired seed and
    #: unit of work, so an h2 load and an h3 load of the same page are a pair.
    protocol: str | None = None


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
    # devices sharing the one LLC (ue1 measured) and whether they share one HBC too
    # (TestbedConfig.devices, shared_hbc; docs/testbed.md "N devices")
    devices: int = 1
    shared_hbc: bool = False
    # how they share the LLC: none | token-bucket | probe | priority (dchlab.testbed.llc_share)
    llc_share: str = "none"
    # with devices > 1: the background users' think time or `idle` (RunConfig.bg_think)
    bg_think: str = think.DEFAULT
    # with devices > 1: the background users' client, rust | python (RunConfig.bg_client)
    bg_client: str = bg_clients.DEFAULT


@dataclass(frozen=True)
class Workload:
    """What a cell measures besides scheme and trial; `kind` names its registered
    WorkloadKind (dchlab.experiments.workload_kinds), which parses and measures it."""

    kind: str
    corpus: str | None = None  # pageload / curl-phases / session
    # pageload: first N pages, or names; session: first N landing pages, or names
    pages: int | tuple[str, ...] | None = None
    session_pages: int = 4  # session: pages visited after the landing page
    url: str | None = None  # curl-phases
    sizes: tuple[int, ...] = ()  # bulk, bytes
    profiles: tuple[str, ...] = ()  # app: app profiles (social, shopping, news)
    interactions: tuple[str, ...] = ()  # app: launch, search, item
    apps: tuple[str, ...] = ()  # realtime: cloud-gaming, video-call
    duration_s: float = 60.0  # realtime: one session's length
    fps: int | None = None  # realtime: video frame rate (None: the app's default)
    input_hz: float = 60.0  # realtime: cloud-gaming input events per second
    # realtime: the video's start bitrate, cap and floor, Mbit/s (None: the app's own,
    # docs/realtime.md "Bitrate")
    start_mbps: float | None = None
    max_mbps: float | None = None
    min_mbps: float | None = None
    # realtime: when the video jitter buffers release a frame (next: aiortc's, marker:
    # libwebrtc's; dchlab.workloads.realtime.frame_release)
    frame_release: str = "next"
    timeout_s: float = 60.0
    # pageload / session: record the screencast for Speed Index and atf_ms (costs the
    # PLT ~6%, docs/benchmarks.md "Page metrics"); FCP and LCP are always measured
    speed_index: bool = False

    def kind_of(self) -> WorkloadKind:
        """The registered kind that parses, plans and measures this workload."""
        from dchlab.experiments.workload_kinds import get_kind

        return get_kind(self.kind)


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
    #: Page-load protocol of every run: h2 (TCP, the default), h3 or recorded
    #: (dchlab.protocol).
    protocol: str = "h2"

    def protocol_of(self, s: Scheme) -> str:
        """The page-load protocol arm `s` runs under (its own, else the campaign's)."""
        return s.protocol or self.protocol

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
        takes_pages = self.workload.kind_of().pages_flag
        if pages and takes_pages and (not n_file or len(pages) < n_file):
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
            if not c.workload.kind_of().pages_flag:
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
            if not NAME_RE.match(name):
                raise CampaignError(f"--name {name!r}: expected letters, digits and ._+=:-")
            c = replace(c, name=name, rerun_of=self.rerun_of or self.name)
            flags.append(f"--name {name}")
        return replace(c, variant_flags=self.variant_flags + tuple(flags))


def cell_key(condition: str, item: str, trial: int, scheme_label: str) -> str:
    return f"{condition}|{item}|t{trial}|{scheme_label}"


# Reading a file (after the model: campaign_file builds these classes).
from dchlab.experiments.campaign_file import load_campaign as load_campaign  # noqa: E402
from dchlab.experiments.campaign_file import parse_campaign as parse_campaign  # noqa: E402
