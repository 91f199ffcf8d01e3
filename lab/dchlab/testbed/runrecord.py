"""Run records in /run/dch/<prefix>.json: what a run created, so anything can undo it.

A record lists the run's namespaces, the supervised processes (pid + kernel start
time, so a recycled pid is never killed), /etc/netns directories and the owner
(the Python process that built the testbed). `teardown_record` removes all of it;
it is used by the normal teardown and by `dch cleanup` for runs whose owner died.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

RUN_DIR = Path(os.environ.get("DCH_RUN_RECORDS", "/run/dch"))
#: Parent of the runs' directories (logs, hosts file, stats, Chromium profiles).
RUNS_TMP = Path(tempfile.gettempdir()) / "dch-runs"
#: Namespace names are `<prefix>-ue|gw|srv` (N devices: `-ue1` ... `-ueN` and the
#: cells `-llc`, `-hbc`); a prefix is `dtb` + 6 hex digits.
PREFIX_RE = re.compile(r"^dtb[0-9a-f]{6}$")
NETNS_RE = re.compile(r"^(dtb[0-9a-f]{6})-(ue[0-9]*|gw|srv|llc|hbc)$")
#: A LocalReplay's namespace (workloads/localreplay.py): its owner's pid in hex.
LOCALREPLAY_NETNS_RE = re.compile(r"^dchlr([0-9a-f]{6})[0-9a-f]{4}$")


def proc_start_time(pid: int) -> int | None:
    """Kernel start time (clock ticks since boot) of `pid`, None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])  # field 22 of stat(5); fields[0] is field 3


def alive(pid: int, start: int | None) -> bool:
    """True if `pid` runs and is the same process (same start time) as recorded."""
    now = proc_start_time(pid)
    return now is not None and (start is None or now == start)


@dataclass
class ProcEntry:
    name: str
    pid: int
    start: int | None


@dataclass
class RunRecord:
    prefix: str
    owner_pid: int
    owner_start: int | None
    run_dir: str
    keep_logs: bool = False
    netns: list[str] = field(default_factory=list)
    procs: list[ProcEntry] = field(default_factory=list)
    etc_netns: list[str] = field(default_factory=list)
    created: float = field(default_factory=time.time)

    @classmethod
    def for_this_process(
        cls, prefix: str, run_dir: Path, keep_logs: bool, netns: list[str], *, etc_netns: list[str]
    ) -> RunRecord:
        """The record of a run this process owns (not yet saved)."""
        pid = os.getpid()
        return cls(
            prefix, pid, proc_start_time(pid), str(run_dir), keep_logs, netns, etc_netns=etc_netns
        )

    @property
    def path(self) -> Path:
        return RUN_DIR / f"{self.prefix}.json"

    def save(self) -> None:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.path)

    def owner_alive(self) -> bool:
        return alive(self.owner_pid, self.owner_start)

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        data = json.loads(path.read_text())
        data["procs"] = [ProcEntry(**p) for p in data.get("procs", [])]
        return cls(**data)


def new_prefix() -> str:
    """A fresh per-run prefix no record or namespace uses yet."""
    existing = set(list_netns())
    while True:
        prefix = "dtb" + secrets.token_hex(3)
        if not (RUN_DIR / f"{prefix}.json").exists() and f"{prefix}-gw" not in existing:
            return prefix


def list_netns() -> list[str]:
    try:
        return sorted(p.name for p in Path("/run/netns").iterdir())
    except OSError:
        return []


def netns_pids(ns: str) -> list[int]:
    """Processes whose network namespace is `ns` (what `ip netns pids` prints, without
    starting it: the nsfs inode of /run/netns/NS against each /proc/PID/ns/net)."""
    try:
        target = os.stat(f"/run/netns/{ns}")
    except OSError:
        return []
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                st = os.stat(f"/proc/{name}/ns/net")
            except OSError:
                continue  # gone, or a kernel thread
            if st.st_ino == target.st_ino and st.st_dev == target.st_dev:
                pids.append(int(name))
    return pids


_MNT_DETACH = 2


def delete_netns(ns: str) -> None:
    """`ip netns del NS` without starting it (unmount and remove /run/netns/NS; the
    kernel frees the namespace and its interfaces once nothing uses it)."""
    path = f"/run/netns/{ns}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(path.encode(), _MNT_DETACH) != 0 or not _unlink(path):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, stdin=subprocess.DEVNULL)


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def remove_dir_later(path: Path) -> None:
    """Remove a run directory without waiting for it (a used Chromium profile takes
    ~0.1-0.2 s to delete): renamed to `<name>.trash-<pid>` at once, deleted by a
    non-daemon thread (the interpreter waits for it at exit); `dch cleanup` deletes
    trash whose process is gone."""
    trash = path.with_name(f"{path.name}.trash-{os.getpid()}")
    try:
        path.rename(trash)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return
    t = threading.Thread(target=shutil.rmtree, args=(trash, True), name="dch-rmtree")
    t.start()
    _PENDING.append(t)
    _PENDING[:] = [p for p in _PENDING if p.is_alive()]


_PENDING: list[threading.Thread] = []


@atexit.register
def wait_removals() -> None:
    """Wait until the run directories being removed in the background are gone (before
    a measurement, so their disk and CPU work never overlaps it). Also registered at
    import, so at exit it runs after every Testbed.close() registered later (atexit is
    LIFO): the removals those start while the interpreter exits, which threading's own
    shutdown would not wait for, finish too."""
    for t in list(_PENDING):
        t.join()


def remove_dead_trash(parent: Path) -> list[str]:
    """Delete `*.trash-<pid>` directories under `parent` whose process is gone."""
    removed = []
    for d in sorted(parent.glob("*.trash-*")) if parent.is_dir() else []:
        pid = d.name.rsplit("-", 1)[1]
        if pid.isdigit() and proc_start_time(int(pid)) is None:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


def _kill_all(pids: list[tuple[int, int | None]], grace: float) -> None:
    """SIGTERM, wait up to `grace` s, then SIGKILL whatever is left."""
    live = [(p, s) for p, s in pids if alive(p, s) and p != os.getpid()]
    for pid, _ in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        time.sleep(0.02)
        _reap()
        live = [(p, s) for p, s in live if alive(p, s) and not _zombie(p)]
    for pid, _ in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _reap()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _reap() -> None:
    """Collect exited children of ours (PID 1 here does not reap orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def teardown_record(rec: RunRecord, *, grace: float = 2.0) -> list[str]:
    """Remove everything `rec` lists; returns the names of what was removed."""
    removed: list[str] = []
    # 1. Processes in the run's namespaces (workloads, agents, servers, anything they spawned).
    for ns in rec.netns:
        if ns in list_netns():
            pids = netns_pids(ns)
            _kill_all([(p, proc_start_time(p)) for p in pids], grace)
            removed += [f"process {p} in {ns}" for p in pids]
    # 2. Supervised processes outside them (the emulators live in the root namespace).
    procs = [(p.pid, p.start) for p in rec.procs if alive(p.pid, p.start)]
    _kill_all(procs, grace)
    removed += [f"process {p}" for p, _ in procs]
    # 3. Namespaces (their interfaces, TUN ends and veths go with them) and /etc/netns.
    for ns in rec.netns:
        if ns in list_netns():
            delete_netns(ns)
            removed.append(f"netns {ns}")
    for d in rec.etc_netns:
        if Path(d).exists():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    if not rec.keep_logs and rec.run_dir and Path(rec.run_dir).exists():
        remove_dir_later(Path(rec.run_dir))
    rec.path.unlink(missing_ok=True)
    return removed


def cleanup_dead_runs(*, include_orphans: bool = True) -> list[str]:
    """Tear down every recorded run whose owner process is gone (for `dch cleanup`).

    With include_orphans, also remove namespaces that match the testbed's naming
    (`dtb<6 hex>-ue|gw|srv`, `-ue<i>`, `-llc`, `-hbc`) but have no record of a live run.
    """
    removed: list[str] = []
    live_prefixes: set[str] = set()
    if RUN_DIR.exists():
        for path in sorted(RUN_DIR.glob("dtb*.json")):
            try:
                rec = RunRecord.load(path)
            except (OSError, ValueError, TypeError) as exc:
                log.warning("unreadable run record %s (%s); removing it", path, exc)
                path.unlink(missing_ok=True)
                continue
            if rec.owner_alive():
                live_prefixes.add(rec.prefix)
                continue
            removed += teardown_record(rec)
            removed.append(f"record {path}")
    removed += remove_dead_trash(RUNS_TMP)
    if include_orphans:
        for ns in list_netns():
            m = NETNS_RE.match(ns)
            if m and m.group(1) not in live_prefixes:
                orphan = RunRecord(
                    prefix=m.group(1),
                    owner_pid=0,
                    owner_start=None,
                    run_dir="",
                    keep_logs=True,
                    netns=[ns],
                    etc_netns=[f"/etc/netns/{ns}"],
                )
                removed += teardown_record(orphan)
            m = LOCALREPLAY_NETNS_RE.match(ns)
            if m and not Path(f"/proc/{int(m.group(1), 16)}").exists():
                # its owner died without closing it (a LocalReplay keeps no record)
                _kill_all([(pid, proc_start_time(pid)) for pid in netns_pids(ns)], 2.0)
                delete_netns(ns)
                removed.append(f"netns {ns}")
        etc = Path("/etc/netns")
        for d in sorted(etc.iterdir()) if etc.is_dir() else []:
            m = NETNS_RE.match(d.name)
            if m and m.group(1) not in live_prefixes and d.name not in list_netns():
                shutil.rmtree(d, ignore_errors=True)
                removed.append(str(d))
    return removed
