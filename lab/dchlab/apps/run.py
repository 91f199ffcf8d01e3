"""App interactions on the testbed: one row per (scheme, profile, interaction, trial).

`app(spec, profile, interaction)` compiles the profile into a corpus (cached), builds a
fresh testbed serving it (cold app per trial: fresh namespaces, DNS cache, TCP state and
browser profile), runs the interaction's session in Chromium on `ue`
(dchlab.apps.driver) and turns the page's record into a row: `irt_ms`, request counts,
dependency-order check, bytes per channel. Paired runs as in dchlab.workloads.api: the
testbed seed comes from (seed, `app:<profile>/<interaction>`, trial), never the scheme.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dchlab import REPO_ROOT
from dchlab.apps.compile import cached_corpus, request_url, shell_url
from dchlab.apps.profile import AppProfile, load_profile, session_for
from dchlab.workloads import rows
from dchlab.workloads.measure import RunSpec, in_testbed, testbed_config
from dchlab.workloads.rows import AppColumns, Outcome, make_row

#: Row keys this workload adds to ROW_KEYS: AppColumns' fields (re-exported).
APP_KEYS = rows.APP_KEYS
#: Slack for comparing page clocks: Resource Timing and performance.now() share one
#: clock, but Chromium coarsens both to 5 µs (100 µs without cross-origin isolation).
CLOCK_SLACK_MS = 0.2


def item_key(profile: str, interaction: str) -> str:
    return f"{profile}/{interaction}"


def critical_think_ms(p: AppProfile, interaction: str) -> float:
    """Largest sum of server think times along one dependency chain: the part of the
    IRT no channel can remove (IRT - this = network + client time)."""
    it = p.interactions[interaction]
    byid = it.by_id()
    memo: dict[str, float] = {}

    def f(i: str) -> float:
        if i not in memo:
            memo[i] = byid[i].think_ms + max((f(q) for q in byid[i].after), default=0.0)
        return memo[i]

    return round(max(f(r.id) for r in it.requests), 1)


def check_interaction(p: AppProfile, res: dict[str, Any]) -> dict[str, Any]:
    """Evaluate one interaction record from the page against the profile.

    Returns {answered, violations, problems, timing: {id: entry}}: a request counts as
    answered when the page handled it (JSON parsed / image decoded) and Resource Timing
    has its entry; a violation is a request whose fetch started before one of its
    parents' responses had fully arrived (Resource Timing responseEnd), or which the
    page sent before it had handled a parent.
    """
    it = p.interactions[res["interaction"]]
    rec = {r["id"]: r for r in res.get("requests") or []}
    by_url: dict[str, dict[str, Any]] = {}
    for e in res.get("timing") or []:
        by_url.setdefault(e["url"], e)  # the first fetch of a URL is the app's
    timing: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    answered = 0
    for r in it.requests:
        url = request_url(p, r)
        got = rec.get(r.id)
        entry = by_url.get(url)
        if entry is not None:
            timing[r.id] = entry
        if got is None:
            problems.append(f"{r.id}: never sent")
        elif got.get("url") != url:
            problems.append(f"{r.id}: sent to {got.get('url')}, expected {url}")
        elif got.get("done") is None:
            problems.append(f"{r.id}: no response handled")
        elif entry is None:
            problems.append(f"{r.id}: no Resource Timing entry")
        else:
            answered += 1
    violations = 0
    for r in it.requests:
        got, entry = rec.get(r.id), timing.get(r.id)
        if not got or not r.after:
            continue
        for par in r.after:
            pg, pe = rec.get(par), timing.get(par)
            if pg and pg.get("done") is not None and got["sent"] + CLOCK_SLACK_MS < pg["done"]:
                violations += 1
                problems.append(f"{r.id} sent at {got['sent']:.1f} before {par} was handled")
            elif entry and pe and entry["start"] + CLOCK_SLACK_MS < pe["response_end"]:
                violations += 1
                problems.append(
                    f"{r.id} started at {entry['start']:.1f} ms before {par}'s response "
                    f"ended at {pe['response_end']:.1f} ms"
                )
    # Origins to which this interaction opened a connection (Resource Timing shows a
    # connect phase only for the request that waited for a new connection; 0 on reuse).
    opened = sorted(
        {
            str(urlsplit(e["url"]).hostname)
            for e in timing.values()
            if (e.get("connect_end") or 0) > (e.get("connect_start") or 0)
        }
    )
    return {
        "answered": answered,
        "violations": violations,
        "problems": problems,
        "timing": timing,
        "opened": opened,
    }


@dataclass(frozen=True)
class AppResult:
    """What one app interaction measured: its Outcome columns, its AppColumns and what
    the row's stats keep of the check (`problems`, `protocols`, `opened`; empty: the
    interaction did not run)."""

    outcome: Outcome = field(default_factory=Outcome)
    columns: AppColumns = field(default_factory=AppColumns)
    detail: dict[str, Any] = field(default_factory=dict)


def app_result(p: AppProfile, interaction: str, out: dict[str, Any]) -> AppResult:
    """The driver's session result `out` judged (the measured interaction is last)."""
    it = p.interactions[interaction]
    done = out.get("interactions") or []
    warm = [d for d in done[:-1] if d.get("interaction") != interaction]
    columns = AppColumns(
        app_profile=p.name,
        interaction=interaction,
        requests=len(it.requests),
        requests_answered=0,
        order_violations=0,
        depth=it.depth(),
        warm_irt_ms={d["interaction"]: d.get("irt_ms") for d in warm} or None,
        critical_think_ms=critical_think_ms(p, interaction),
    )
    measured: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    reasons = []
    if out.get("error"):
        reasons.append(str(out["error"]))
    for d in warm:
        if d.get("error"):
            reasons.append(f"warm-up {d['interaction']}: {d['error']}")
    last = done[-1] if done and done[-1].get("interaction") == interaction else None
    if last is None:
        reasons.append(reasons.pop(0) if reasons else f"{interaction} did not run")
    else:
        chk = check_interaction(p, last)
        columns = replace(
            columns,
            irt_ms=last.get("irt_ms"),
            input_delay_ms=(
                last["t_handler"] - last["t_input"]
                if last.get("t_handler") is not None and last.get("t_input") is not None
                else None
            ),
            requests_answered=chk["answered"],
            order_violations=chk["violations"],
            connections_opened=len(chk["opened"]),
        )
        measured = {
            "size_bytes": sum(int(e.get("body_size") or 0) for e in chk["timing"].values()),
            "resources_loaded": chk["answered"],
            "resources_failed": len(it.requests) - chk["answered"],
        }
        if last.get("error"):
            reasons.append(str(last["error"]))
        if chk["answered"] < len(it.requests):
            reasons.append(
                f"{len(it.requests) - chk['answered']} of {len(it.requests)} requests unanswered"
            )
        if chk["violations"]:
            reasons.append(f"{chk['violations']} dependency-order violations")
        if last.get("irt_ms") is None:
            reasons.append("no end-screen paint recorded")
        protos = sorted({str(e.get("protocol") or "?") for e in chk["timing"].values()})
        detail = {"problems": chk["problems"][:20], "protocols": protos, "opened": chk["opened"]}
    why = "; ".join(dict.fromkeys(reasons))
    outcome = Outcome(**measured, valid=not reasons, invalid_reason=why)
    return AppResult(outcome, columns, detail)


def run_driver(
    tb: Any, p: AppProfile, session: list[str], timeout_s: float, home: Path
) -> dict[str, Any]:
    """Run dchlab.apps.driver on ue; returns its JSON result."""
    argv = [
        sys.executable, "-m", "dchlab.apps.driver", shell_url(p),
        "--session", ",".join(session), "--timeout", str(timeout_s), "--home", str(home),
    ]  # fmt: skip
    env = {"PYTHONPATH": str(Path(REPO_ROOT) / "lab")}
    budget = timeout_s * (len(session) + 1) + 90
    proc = tb.run_ue(argv, capture_output=True, timeout=budget, env=env)
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.decode(errors="replace")[-500:]
        return {"error": f"driver exited {proc.returncode}: {err}", "interactions": []}
    return dict(json.loads(lines[-1]))


def app(
    spec: RunSpec, profile: str | AppProfile, interaction: str, timeout_s: float = 60
) -> dict[str, Any]:
    """One trial of `interaction` of `profile` (a built-in name or a file) under `spec`."""
    from dchlab.testbed import Testbed, make_nss_db

    p = profile if isinstance(profile, AppProfile) else load_profile(profile)
    session = session_for(interaction)
    corpus = cached_corpus(p)
    key = item_key(p.name, interaction)
    driver: dict[str, Any] = {}  # the driver's session result
    measured: list[AppResult] = []

    def body(tb: Any) -> None:
        home = tb.run_dir / "chromium-home"
        make_nss_db(home / ".pki" / "nssdb", tb.ca_cert)
        out = run_driver(tb, p, session, timeout_s, home)
        driver.update(out)
        got = app_result(p, interaction, out)
        if str(out.get("error", "")).startswith("driver exited"):  # the lab failed (runner retries)
            got = replace(got, outcome=replace(got.outcome, invalid_reason=str(out["error"])))
        measured.append(got)

    frame = in_testbed(Testbed(testbed_config(spec, f"app:{key}", corpus.root)), body)
    got = measured[0] if measured else AppResult()  # the testbed failed before the driver ran
    outcome = frame.judged(got.outcome)
    row = make_row(spec, "app", key, {**asdict(outcome), **asdict(got.columns)})
    row["stats"] = {**row["stats"], "app": {**got.detail, "session": driver}}
    return row
