"""Reading a campaign file: YAML to a validated Campaign (dchlab.experiments.campaign),
every error naming the file and the field (`conditions[2].hbc`). The workload block is
parsed by its kind (dchlab.experiments.workload_kinds); the schema is documented in
docs/experiments.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dchlab import protocol
from dchlab.experiments.campaign import Campaign, Condition, Scheme, Workload
from dchlab.experiments.campaign_check import (
    CampaignError,
    Validator,
    check_channel,
    parse_size,
)
from dchlab.experiments.offsets import MODES
from dchlab.experiments.workload_kinds import get_kind, workload_kinds
from dchlab.pages.cdn import CdnSpecError, parse_spec
from dchlab.testbed import llc_share
from dchlab.testbed.config import MAX_DEVICES
from dchlab.workloads.bgusers import clients as bg_clients
from dchlab.workloads.bgusers import think

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
    "protocol",
}


#: Extra agent flags a scheme entry or a condition may carry: both agents, client only,
#: gateway only (TestbedConfig.agent_args / client_args / gateway_args).
_ARG_FIELDS = ("agent_args", "client_args", "gateway_args")
#: How many devices share the LLC, and whether they share the HBC (a condition's).
_DEVICE_FIELDS = ("devices", "shared_hbc", "llc_share", "bg_think", "bg_client")


def _agent_flags(v: Validator, d: dict[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    return {f: v.args(d.get(f), f"{where}.{f}") for f in _ARG_FIELDS}


def _parse_scheme(v: Validator, raw: Any, where: str) -> Scheme:
    if isinstance(raw, str):
        s = v.name(raw, where)
        return Scheme(label=s, scheme=s)
    d = v.mapping(raw, where)
    v.unknown(d, {"label", "scheme", "protocol", *_ARG_FIELDS}, where)
    if "scheme" not in d:
        raise v.err(f"{where}.scheme", "missing (the testbed scheme, e.g. dchannel)")
    scheme = v.name(d["scheme"], f"{where}.scheme")
    label = v.name(d.get("label", scheme), f"{where}.label")
    proto = None
    if "protocol" in d:
        try:
            proto = protocol.check(d["protocol"], f"{where}.protocol")
        except protocol.ProtocolError as e:
            raise v.err(f"{where}.protocol", str(e).partition(": ")[2]) from e
    return Scheme(label=label, scheme=scheme, protocol=proto, **_agent_flags(v, d, where))


def _parse_condition(v: Validator, raw: Any, where: str, check_channels: bool) -> Condition:
    d = v.mapping(raw, where)
    v.unknown(d, {"name", "hbc", "llc", *_ARG_FIELDS, "server_delay_ms", "cc", "x", *_DEVICE_FIELDS}, where)  # fmt: skip
    for req in ("name", "hbc", "llc"):
        if req not in d:
            raise v.err(f"{where}.{req}", "missing")
    hbc = v.string(d["hbc"], f"{where}.hbc")
    llc = v.string(d["llc"], f"{where}.llc")
    if check_channels:
        check_channel(v, hbc, f"{where}.hbc")
        check_channel(v, llc, f"{where}.llc")
    cc = v.string(d.get("cc", "cubic"), f"{where}.cc")
    if cc not in ("cubic", "bbr", "reno"):
        raise v.err(f"{where}.cc", f"expected cubic, bbr or reno, got {cc!r}")
    x = v.mapping(d.get("x", {}), f"{where}.x")
    devices = v.pos_int(d.get("devices", 1), f"{where}.devices")
    if devices > MAX_DEVICES:
        raise v.err(f"{where}.devices", f"expected 1 to {MAX_DEVICES}, got {devices}")
    shared_hbc = v.boolean(d.get("shared_hbc", False), f"{where}.shared_hbc")
    if shared_hbc and devices == 1:
        raise v.err(f"{where}.shared_hbc", "needs devices > 1 (one device has its HBC alone)")
    try:
        share = llc_share.check(d.get("llc_share", "none"), f"{where}.llc_share")
    except ValueError as e:
        raise v.err(f"{where}.llc_share", str(e).partition(": ")[2]) from e
    bg_think = v.string(d.get("bg_think", think.DEFAULT), f"{where}.bg_think")
    if bg_think != "idle":
        try:
            think.parse(bg_think, f"{where}.bg_think")
        except ValueError as exc:
            raise v.err(f"{where}.bg_think", str(exc).split(": ", 1)[1]) from None
    try:
        bg_client = bg_clients.check(
            v.string(d.get("bg_client", bg_clients.DEFAULT), f"{where}.bg_client"),
            f"{where}.bg_client",
        )
    except ValueError as exc:
        raise v.err(f"{where}.bg_client", str(exc).split(": ", 1)[1]) from None
    return Condition(
        name=v.name(d["name"], f"{where}.name"),
        hbc=hbc,
        llc=llc,
        **_agent_flags(v, d, where),
        server_delay_ms=v.number(d.get("server_delay_ms", 0.0), f"{where}.server_delay_ms"),
        cc=cc,
        x=dict(x),
        devices=devices,
        shared_hbc=shared_hbc,
        llc_share=share,
        bg_think=bg_think,
        bg_client=bg_client,
    )


def _parse_protocol(v: Validator, raw: Any, schemes: tuple[Scheme, ...]) -> str:
    """`protocol:` (h2 | h3 | recorded), refusing the schemes that cannot carry it (their
    own `protocol:` if they give one): a campaign must not measure TCP where it asked for
    QUIC."""
    try:
        proto = protocol.check(raw, "protocol")
        for i, s in enumerate(schemes):
            protocol.refuse(s.scheme, s.protocol or proto, f"schemes[{i}]")
    except protocol.ProtocolError as e:
        field, _, why = str(e).partition(": ")
        raise v.err(field, why) from e
    return proto


def _parse_workload(v: Validator, raw: Any) -> Workload:
    """The `workload:` block, parsed by its kind (dchlab.experiments.workload_kinds)."""
    d = v.mapping(raw, "workload")
    kinds = workload_kinds()
    if d.get("kind") not in kinds:
        raise v.err("workload.kind", f"expected one of {', '.join(kinds)}, got {d.get('kind')!r}")
    kind = get_kind(d["kind"])
    v.unknown(d, {"kind", "timeout_s", *kind.fields}, "workload")
    timeout = v.number(d.get("timeout_s", 60.0), "workload.timeout_s", minimum=1.0)
    return kind.parse(v, d, timeout)


def _check_paper(
    v: Validator, paper: dict[str, Any], conditions: list[str], arms: list[str]
) -> None:
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
    v = Validator(path)
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
            "by_protocol",
            "machine_limit",
        },
        "analysis",
    )
    akind = analysis.get("kind", "gain")
    # imported here: the analysis plug-ins import the campaign model, which re-exports
    # this module's load_campaign
    from dchlab.experiments.analyses import get_analysis, known_analyses

    # the registered plug-ins (experiments/analyses/); a list or a mapping is no kind
    if not isinstance(akind, str) or akind not in known_analyses():
        kinds = ", ".join(known_analyses())
        raise v.err("analysis.kind", f"expected one of {kinds}, got {akind!r}")
    baseline = analysis.get("baseline", "all-hbc")
    if get_analysis(akind).uses_baseline and baseline not in labels:
        raise v.err("analysis.baseline", f"{baseline!r} is not one of the schemes {labels}")
    best_of = v.mapping(analysis.get("best_of", {}), "analysis.best_of")
    for blabel, members in best_of.items():
        if not isinstance(members, list) or not all(m in labels for m in members):
            raise v.err(
                f"analysis.best_of.{blabel}", f"expected a list of scheme labels of {labels}"
            )
    for flag in ("llc_usage", "by_protocol"):
        if not isinstance(analysis.get(flag, False), bool):
            raise v.err(f"analysis.{flag}", f"expected true or false, got {analysis[flag]!r}")
    # the default lives with the analysis (analyses/users.py MACHINE_LIMIT)
    limit = analysis.get("machine_limit")
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int | float) or not limit >= 1
    ):
        raise v.err(
            "analysis.machine_limit",
            f"expected a number >= 1 (all-hbc's slowdown against N = 1), got {limit!r}",
        )
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
        quick["pages"] = v.pages(quick["pages"], "quick.pages")
    if "sizes" in quick:
        quick["sizes"] = [
            parse_size(s, f"{path}: quick.sizes[{i}]") for i, s in enumerate(quick["sizes"])
        ]
    proto = _parse_protocol(v, d.get("protocol", protocol.DEFAULT), schemes)
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
        protocol=proto,
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
