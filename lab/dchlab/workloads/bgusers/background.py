"""Background users in a testbed: one replayer on each of the devices ue2 ... ueN while
ue1 runs the measured workload. Two clients replay the same plans: `rust` (the
`bguser` binary, crates/bguser: Chromium's ClientHello, HTTP/2 settings and DNS
queries; the default: it validates against Chromium, docs/bgusers.md) and `python`
(dchlab.workloads.bgusers.replay, httpx).

Each is a child process started in its device's namespace through Testbed.popen_ue
(tracked: stopped by PID at teardown at the latest). `start` returns once every user is
set up (printed READY), so their start-up costs no CPU during the measurement; `stop`
ends them by PID (SIGTERM, then SIGKILL) and summarizes their logs. Device k's user is
seeded with (seed, k), so a (page, trial) cell sees the same background draws under
every scheme. The pages' request plans are computed once per process and corpus.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dchlab import REPO_ROOT, paths
from dchlab.testbed.errors import TestbedError
from dchlab.testbed.ue import terminate
from dchlab.workloads.bgusers import clients, deps, replay, think
from dchlab.workloads.bgusers.headers import request_headers

#: How long a user may take to start (Python, its plans) before the run fails.
READY_TIMEOUT_S = 30.0

#: Pages in a Rust user's schedule when no maximum is given: at the 3GPP2 mean think
#: time (30 s) that is ~83 h of browsing, back to back (~1 s a page) ~3 h; the user
#: then stops (its log says how many pages it loaded).
SCHEDULE_PAGES = 10_000


@dataclass(frozen=True)
class Users:
    """What the background users replay: the corpus, the pages they draw from, their
    think time (dchlab.workloads.bgusers.think) and the seed."""

    corpus: Any  # dchlab.pages.corpus.Corpus
    pages: tuple[str, ...]
    think: str = think.DEFAULT
    seed: int = 1
    client: str = clients.DEFAULT

    def __post_init__(self) -> None:
        clients.check(self.client, "Users.client")


@dataclass
class Running:
    """One started background user."""

    device: str
    proc: Any
    log: Path


_PLANS: dict[tuple[str, tuple[str, ...]], str] = {}


def plans_text(users: Users) -> str:
    """The users' request plans as JSON text (deps.plans), with every request's Chromium
    headers in order (headers.request_headers; "headers": {page: [[[name, value], ...]
    per request]}, read by the Rust client), computed once per process."""
    key = (str(users.corpus.root), users.pages)
    if key not in _PLANS:
        doc = deps.plans(users.corpus, list(users.pages))
        doc["headers"] = {
            page: [list(request_headers(r["url"], reqs[0]["url"]).items()) for r in reqs]
            for page, reqs in doc["pages"].items()
        }
        _PLANS[key] = json.dumps(doc)
    return _PLANS[key]


def schedule_text(users: Users, seed: int, pages: int, first_think: bool) -> str:
    """The Rust client's schedule: the first `pages` (think time, page) draws of
    replay.draws with `seed`, as JSON {"schedule": [[think_s, page], ...]}."""
    rng = np.random.default_rng(seed)
    it = replay.draws(think.parse(users.think, "think"), rng, sorted(users.pages), first_think)
    return json.dumps({"schedule": [next(it) for _ in range(pages)]})


def argv(users: Users, device_index: int, plans: Path, log: Path, *,
         max_pages: int | None = None, first_think: bool = True) -> list[str]:  # fmt: skip
    """The user's command line for device `device_index` (2 ... N). The Rust client's
    schedule is written beside `log` (`<log>.schedule.json`)."""
    seed = users.seed * 1000 + device_index
    if users.client == "rust":
        sched = log.with_name(log.name + ".schedule.json")
        sched.write_text(schedule_text(users, seed, max_pages or SCHEDULE_PAGES, first_think))
        return [str(paths.binary("bguser")), "--plans", str(plans), "--schedule", str(sched),
                "--log", str(log)]  # fmt: skip
    out = [sys.executable, "-m", "dchlab.workloads.bgusers.replay", "--plans", str(plans),
           "--seed", str(seed), "--think", users.think, "--log", str(log)]  # fmt: skip
    if max_pages is not None:
        out += ["--max-pages", str(max_pages)]
    if not first_think:
        out.append("--no-first-think")
    return out


def env() -> dict[str, str]:
    """The replayer's extra environment (the lab on its path; the CA comes from the
    testbed's SSL_CERT_FILE)."""
    return {"PYTHONPATH": str(Path(REPO_ROOT) / "lab")}


def start(tb: Any, users: Users) -> list[Running]:
    """Start a background user on every device but the measured one; return once all
    are set up (TestbedError if one is not within READY_TIMEOUT_S)."""
    plans = tb.run_dir / "bguser-plans.json"
    plans.write_text(plans_text(users))
    out = []
    for k, role in enumerate(tb.namespaces.device_roles[1:], 2):
        log = tb.run_dir / f"bguser-{role}.jsonl"
        with (tb.run_dir / f"bguser-{role}.err").open("wb") as err:
            proc = tb.popen_ue(argv(users, k, plans, log), device=role, env=env(),
                               stdout=subprocess.PIPE, stderr=err)  # fmt: skip
        out.append(Running(role, proc, log))
    deadline = time.monotonic() + READY_TIMEOUT_S
    for r in out:
        ready, _, _ = select.select([r.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = r.proc.stdout.readline() if ready else b""  # READY, or b"" if it died
        if line.strip() != b"READY":
            stop(out)
            err = (tb.run_dir / f"bguser-{r.device}.err").read_text(errors="replace")[-500:]
            raise TestbedError(f"background user on {r.device} did not start: {err}")
    return out


def stop(running: list[Running]) -> dict[str, Any]:
    """Stop every user by PID and summarize their logs: users, pages loaded, requests,
    failed, mismatched, bytes, and per user the pages it loaded."""
    for r in running:
        terminate(r.proc, grace=2.0)
        if r.proc.stdout is not None:
            r.proc.stdout.close()
    per_user = {r.device: read_log(r.log) for r in running}
    pages = [p for ps in per_user.values() for p in ps]
    total = {k: sum(p[k] for p in pages) for k in ("requests", "failed", "mismatched", "bytes")}
    return {"users": len(running), "pages": len(pages), **total,
            "per_user": {d: [p["page"] for p in ps] for d, ps in per_user.items()}}  # fmt: skip


def read_log(path: Path) -> list[dict[str, Any]]:
    """A replayer's page lines (none if it never finished a page)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
