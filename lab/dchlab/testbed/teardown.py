"""Teardown of one testbed: stop its programs, collect the stats, remove every trace.

In order: the workloads on ue get SIGTERM; the scheme's live counters and the
interface counters are read; every daemon stops at once (the scheme's stop_first()
ones and the servers signalled first) and the stats files they write are read; the
scheme post-processes its logs; the stats are written where asked; and whatever failed
before, the run record's teardown removes the namespaces, processes and run directory.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dchlab.testbed import runrecord
from dchlab.testbed.procs import Supervisor
from dchlab.testbed.ue import UePrograms

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed

log = logging.getLogger(__name__)

#: A daemon's stats file: (stats section, key in it, path the daemon writes at exit).
StatsFile = tuple[str, str, Path]


def teardown(
    tb: Testbed,
    *,
    sup: Supervisor | None,
    record: runrecord.RunRecord | None,
    workloads: UePrograms,
    stats_files: list[StatsFile],
    started: float,
) -> tuple[dict[str, Any], str | None]:
    """Tear `tb` down (its supervisor, run record, programs on ue and declared stats
    files given). Returns its stats, and why they could not be written where
    cfg.stats_path asks (None: they were)."""
    stats: dict[str, Any] = {
        "prefix": tb.prefix,
        **tb.cfg.describe(),
        "kind": tb.scheme.kind,
        "channels": dict(tb.channels),
        "offset_ms": tb.offset_ms,
        "offsets": dict(tb.offsets),
        "duration_s": round(time.monotonic() - started, 3),
    }
    write_error: str | None = None
    t = tb.timing["teardown"]
    stats["timing"] = {k: v.ms for k, v in tb.timing.items()}
    try:
        if tb.failure:
            stats["failure"] = tb.failure
        with t.phase("workloads"):  # signalled now, waited for while daemons stop
            workloads.signal_all()
        if sup is not None and tb.netns:
            _collect(tb, sup, stats_files, stats)
        with t.phase("workloads"):
            workloads.stop_all()
        try:
            write_stats(
                stats, tb.cfg.stats_path, tb.run_dir if record and tb.cfg.keep_logs else None
            )
        except OSError as exc:
            write_error = f"cannot write stats to {tb.cfg.stats_path}: {exc}"
    finally:
        # Whatever failed above, the run's namespaces and processes go.
        if record is not None:
            with t.phase("remove"):
                removed = runrecord.teardown_record(record)
            log.debug("teardown %s removed: %s", tb.prefix, removed)
    return stats, write_error


def write_stats(stats: dict[str, Any], path: Path | str | None, run_dir: Path | None) -> None:
    """The stats as JSON at `path` (cfg.stats_path) and in `run_dir` (kept logs), if given."""
    text = json.dumps(stats, indent=2) + "\n"
    if path:
        Path(path).write_text(text)
    if run_dir is not None:
        (run_dir / "stats.json").write_text(text)


def _collect(
    tb: Testbed, sup: Supervisor, stats_files: list[StatsFile], stats: dict[str, Any]
) -> None:
    """Live counters, then stop the daemons (they write their stats) and read them."""
    t = tb.timing["teardown"]
    with t.phase("counters"):
        try:
            stats.update(tb.scheme.collect(tb))
        except Exception as exc:  # stats are best effort at teardown
            stats["collect_error"] = str(exc)
        stats["interfaces"] = tb.namespaces.interface_counters() if tb.namespaces else {}
    # All together (agents ~60 ms to flush their stats, emulators ~100 ms, no longer
    # one after the other); SIGTERM to the scheme's stop_first() daemons and the
    # servers first. webreplay runs with --grace-ms 0: the workload is gone, so it
    # need not wait for FINs of its connections that the stopping path may drop.
    waves = [[*tb.scheme.stop_first(), "webreplay", "dnsmasq", *sup.daemons]]
    with t.phase("stop_daemons"):
        sup.stop_all(waves, timing=t.ms)
    for section, key, path in stats_files:
        try:
            stats.setdefault(section, {})[key] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            stats.setdefault(section, {})[key] = {"error": f"no stats from {path.name}: {exc}"}
    try:  # after the daemons stopped (logs flushed), before the run dir goes
        tb.scheme.after_stop(tb, stats)
    except Exception as exc:
        stats["after_stop_error"] = str(exc)
