"""Kills, measured (docs/reliability.md, "Kills"): what a SIGKILL or a SIGINT at a random
moment leaves behind, for campaigns and for testbeds.

Campaigns: `dch run` on a small real campaign (bulk downloads through real testbeds) is
SIGKILLed at random moments and started again, K times, then left to finish. After
every kill the store must open and read whole, hold at most one finished row per cell
and never fewer finished cells than before the kill (a stored row is never lost); at
the end every cell has exactly one finished row.

Testbeds: `dch shell -- sleep` runs N times; each gets SIGINT or SIGKILL, sent to the
owner (`dch shell`) or to one of its supervised children (emulator, agent, DNS, replay
server), at a random moment of its life (set-up included). When the owner survives it
must tear everything down by itself; when it was killed, `dch cleanup` must. Either way,
nothing of the run may remain: namespaces, /etc/netns entries, its run record,
processes (supervised or anything whose command line names the run) and interfaces.

    ./dch soak kills --campaign-kills 20 --testbed-runs 100

Needs root and the release binaries. The moments come from `--seed`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dchlab.paths import repo_root
from dchlab.testbed import runrecord

log = logging.getLogger(__name__)

#: 3 schemes x 2 sizes x 2 trials = 12 cells, each a real testbed (about 2 s each here).
CAMPAIGN = """
name: soak-kills
description: small real campaign for the kill soak (dchlab.soak_kills)
schemes: [all-hbc, all-llc, dchannel]
conditions:
  - {name: embb-urllc, hbc: embb, llc: urllc}
workload: {kind: bulk, sizes: [20KB, 60KB], timeout_s: 30}
trials: 2
analysis: {kind: bulk, baseline: all-hbc, metric: total_ms}
"""
CAMPAIGN_CELLS = 12


def _dch() -> list[str]:
    return [str(repo_root() / "dch")]


# ---------------------------------------------------------------- campaigns


@dataclass
class CampaignKills:
    kills: int = 0
    kill_moments_s: list[float] = field(default_factory=list)
    finished_after_kill: list[int] = field(default_factory=list)  # finished cells per kill
    corrupt: list[str] = field(default_factory=list)  # store problems seen after a kill
    duplicates: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # cells finished before a kill, gone after
    final_cells: int = 0
    final_rows: int = 0
    cleanup_removed: int = 0
    leftovers: list[str] = field(default_factory=list)
    full_run_s: float = 0.0  # an uninterrupted run of the campaign (the moments' range)
    rounds: int = 0  # fresh stores used
    incomplete_rounds: int = 0  # rounds whose final run left a cell unfinished or doubled

    @property
    def ok(self) -> bool:
        return (
            not self.corrupt
            and not self.duplicates
            and not self.lost
            and not self.leftovers
            and self.incomplete_rounds == 0
            and self.final_cells == CAMPAIGN_CELLS
            and self.final_rows == CAMPAIGN_CELLS
        )


def _finished_cells(db: Path) -> tuple[dict[str, int], str | None]:
    """{cell: finished rows} from a fresh read-only connection, or (.., problem)."""
    import duckdb

    if not db.exists():
        return {}, None
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
            if "results" not in tables:
                return {}, None
            # read every row and column whole: a torn write would fail here
            con.execute("SELECT * FROM results").fetchall()
            got = con.execute(
                "SELECT cell, count(*) FROM results WHERE error IS NULL GROUP BY cell"
            ).fetchall()
        return {str(c): int(n) for c, n in got}, None
    except duckdb.Error as e:
        return {}, f"{db}: {e}"


def soak_campaign(kills: int, rng: random.Random, workdir: Path) -> CampaignKills:
    """SIGKILL `dch run` at `kills` random moments, in rounds: each round is the small
    campaign in a fresh store, killed and restarted until a run finishes it; then it
    must hold exactly one finished row per cell. Moments are uniform over the time an
    uninterrupted run took (measured first), so kills land anywhere in a run: at
    start-up, in a load, in a store write."""
    spec = workdir / "soak-kills.yaml"
    spec.write_text(textwrap.dedent(CAMPAIGN))
    out = CampaignKills()

    def cmd(db: Path) -> list[str]:
        # --any-revision: a commit made while the soak runs must not turn finished cells
        # into pending ones (resume is per code revision by default).
        return [*_dch(), "run", str(spec), "--store", str(db), "--max-setup-errors", "0",
                "--any-revision"]  # fmt: skip

    start = time.monotonic()
    subprocess.run(cmd(workdir / "calibrate.duckdb"), capture_output=True, timeout=900)
    full_s = time.monotonic() - start
    out.full_run_s = round(full_s, 1)
    out.cleanup_removed += _cleanup()
    rounds = 0
    while out.kills < kills and rounds < 4 * kills:
        rounds += 1
        db = workdir / f"round{rounds}.duckdb"
        before: dict[str, int] = {}
        while out.kills < kills:
            moment = rng.uniform(0.2, full_s)
            proc = subprocess.Popen(cmd(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t0 = time.monotonic()
            try:
                proc.wait(moment)
                killed = False  # it finished the campaign first
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                killed = True
            where = f"round {rounds}, " + (f"kill {out.kills + 1}" if killed else "final run")
            if killed:
                out.kills += 1
                out.kill_moments_s.append(round(time.monotonic() - t0, 2))
            out.cleanup_removed += _cleanup()
            cells, problem = _finished_cells(db)
            if problem:
                out.corrupt.append(f"{where}: {problem}")
            out.duplicates += [f"{where}: {c} x{n}" for c, n in cells.items() if n > 1]
            out.lost += [f"{where}: {c}" for c in before if c not in cells]
            out.finished_after_kill.append(len(cells))
            log.info("%s: %d/%d cells finished", where, len(cells), CAMPAIGN_CELLS)
            before = cells
            if not killed:
                break
        # finish the round (a run that is not killed) and check it whole
        subprocess.run(cmd(db), capture_output=True, timeout=900)
        cells, problem = _finished_cells(db)
        if problem:
            out.corrupt.append(f"round {rounds} final: {problem}")
        out.duplicates += [f"round {rounds} final: {c} x{n}" for c, n in cells.items() if n > 1]
        out.final_cells, out.final_rows = len(cells), sum(cells.values())
        if (out.final_cells, out.final_rows) != (CAMPAIGN_CELLS, CAMPAIGN_CELLS):
            out.incomplete_rounds += 1
    out.rounds = rounds
    out.leftovers = _testbed_leftovers_of(_dead_prefixes())
    return out


# ---------------------------------------------------------------- testbeds


@dataclass
class TestbedKill:
    target: str  # "owner" or the supervised child's name
    sig: str
    moment_s: float
    owner_survived: bool
    owner_exit: int | None
    cleanup_needed: bool
    leftovers: list[str]


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A soak started in the
    background of a non-interactive shell (`cmd &`) ignores SIGINT, and an ignored
    signal stays ignored across exec — `dch shell` would then never see the SIGINTs
    this soak sends it, and neither would the daemons it starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _record_of(owner_pid: int) -> runrecord.RunRecord | None:
    for path in sorted(runrecord.RUN_DIR.glob("dtb*.json")):
        try:
            rec = runrecord.RunRecord.load(path)
        except (OSError, ValueError, TypeError):
            continue
        if rec.owner_pid == owner_pid:
            return rec
    return None


def _cleanup() -> int:
    got = subprocess.run(
        [*_dch(), "cleanup", "--records-only"], capture_output=True, text=True, timeout=120
    )
    return sum(1 for line in got.stdout.splitlines() if line.startswith("removed "))


def _dead_prefixes() -> list[str]:
    """Prefixes of recorded runs whose owner is gone (what `dch cleanup` would remove)."""
    out = []
    for path in sorted(runrecord.RUN_DIR.glob("dtb*.json")):
        try:
            rec = runrecord.RunRecord.load(path)
        except (OSError, ValueError, TypeError):
            continue
        if not rec.owner_alive():
            out.append(rec.prefix)
    return out


def _cmdline_pids(text: str) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmd:
            pids.append(int(name))
    return pids


def _testbed_leftovers_of(
    prefixes: list[str], procs: Sequence[tuple[int, int | None]] = ()
) -> list[str]:
    """Everything of the runs `prefixes` that still exists."""
    left: list[str] = []
    netns = runrecord.list_netns()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for prefix in prefixes:
        left += [f"netns {ns}" for ns in netns if ns.startswith(prefix)]
        etc = Path("/etc/netns")
        if etc.is_dir():
            left += [f"/etc/netns/{d.name}" for d in etc.iterdir() if d.name.startswith(prefix)]
        if (runrecord.RUN_DIR / f"{prefix}.json").exists():
            left.append(f"record {prefix}")
        left += [f"process {p} naming {prefix}" for p in _cmdline_pids(prefix)]
        left += [
            f"link {line.split(':')[1].strip()}" for line in links.splitlines() if prefix in line
        ]
    left += [f"process {p}" for p, start in procs if _still_running(p, start)]
    return left


def _still_running(pid: int, start: int | None, wait_s: float = 5.0) -> bool:
    """True if the process still runs after `wait_s` (a SIGKILLed process takes a few ms
    to go). A zombie holds nothing but its PID (PID 1 on some machines never reaps
    orphans), so it does not count."""
    deadline = time.monotonic() + wait_s
    while True:
        if not runrecord.alive(pid, start) or _zombie(pid):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def testbed_kill(rng: random.Random, max_moment_s: float = 6.0) -> TestbedKill:
    """One `dch shell` run, one signal at a random moment, then the check."""
    cmd = [
        *_dch(),
        "shell",
        "--scheme",
        "dchannel",
        "--hbc",
        "embb",
        "--llc",
        "urllc",
        "--",
        "sleep",
        "20",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    moment = rng.uniform(0.0, max_moment_s)
    sig = rng.choice([signal.SIGINT, signal.SIGKILL])
    to_owner = rng.random() < 0.5
    deadline = time.monotonic() + moment
    rec = None
    while time.monotonic() < deadline and proc.poll() is None:
        rec = _record_of(proc.pid) or rec
        time.sleep(0.02)
    rec = _record_of(proc.pid) or rec
    children = [p for p in (rec.procs if rec else []) if runrecord.alive(p.pid, p.start)]
    target = "owner"
    if not to_owner and children:
        child = rng.choice(children)
        target = child.name
        os.kill(child.pid, sig)
    elif proc.poll() is None:
        os.kill(proc.pid, sig)
    try:
        code = proc.wait(60)
    except subprocess.TimeoutExpired:  # a hung owner is a finding too: stop it, record it
        proc.kill()
        code = proc.wait()
    survived = not (target == "owner" and sig == signal.SIGKILL)
    prefix = rec.prefix if rec else None
    procs = [(p.pid, p.start) for p in rec.procs] if rec else []
    cleanup_needed = False
    if not survived:
        cleanup_needed = True
        last = _record_of(proc.pid) or rec
        procs = [(p.pid, p.start) for p in last.procs] if last else procs
        _cleanup()
    left = _testbed_leftovers_of([prefix] if prefix else [], procs)
    return TestbedKill(
        target=target,
        sig=signal.Signals(sig).name,
        moment_s=round(moment, 2),
        owner_survived=survived,
        owner_exit=code,
        cleanup_needed=cleanup_needed,
        leftovers=left,
    )


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="dch soak kills",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument(
        "--campaign-kills", type=int, default=20, help="SIGKILLs of dch run (default 20)"
    )
    p.add_argument(
        "--testbed-runs", type=int, default=100, help="dch shell runs signalled (default 100)"
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the moments and targets")
    p.add_argument("--json", action="store_true", help="one JSON object with every figure")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rng = random.Random(args.seed)
    report: dict[str, object] = {}
    ok = True
    if args.campaign_kills:
        with tempfile.TemporaryDirectory(prefix="dch-soak-kills-") as d:
            c = soak_campaign(args.campaign_kills, rng, Path(d))
        report["campaign"] = c.__dict__ | {"ok": c.ok}
        ok &= c.ok
        print(
            f"campaign: {c.kills} SIGKILLs of dch run over {c.rounds} rounds (moments "
            f"{c.kill_moments_s} s, uniform over a {c.full_run_s} s run); finished cells after "
            f"each {c.finished_after_kill}; corrupt {len(c.corrupt)}, duplicates "
            f"{len(c.duplicates)}, lost {len(c.lost)}, incomplete rounds "
            f"{c.incomplete_rounds}; leftovers {len(c.leftovers)}"
        )
    runs = [testbed_kill(rng) for _ in range(args.testbed_runs)]
    if runs:
        bad = [r for r in runs if r.leftovers]
        report["testbeds"] = [r.__dict__ for r in runs]
        ok &= not bad
        by: dict[str, int] = {}
        for r in runs:
            key = f"{r.sig} to {'owner' if r.target == 'owner' else 'a child'}"
            by[key] = by.get(key, 0) + 1
        print(
            f"testbeds: {len(runs)} runs ({', '.join(f'{n} {k}' for k, n in sorted(by.items()))}); "
            f"{sum(r.cleanup_needed for r in runs)} needed dch cleanup; runs with leftovers: "
            f"{len(bad)}"
        )
        for r in bad:
            print(f"  {r.sig} to {r.target} at {r.moment_s} s: {', '.join(r.leftovers)}")
    if args.json:
        print(json.dumps(report, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
