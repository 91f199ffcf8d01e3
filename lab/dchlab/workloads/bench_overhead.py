"""Benchmark: what a page load costs beyond its PLT, through the real testbed
(docs/benchmarks.md, "Page-load overhead"). Needs root, the release binaries, Chromium.

    PYTHONPATH=lab .venv/bin/python -m dchlab.workloads.bench_overhead \\
        [--corpus synthetic:1] [--pages 3] [--scheme all-hbc,dchannel] [--trials 1] [--cli]

Default: one process calls `dchlab.workloads.api.load_one` for every (page, trial,
scheme), as `dch pageload` and the campaign runner do, and prints per load the wall
time, the PLT and the overhead (wall − PLT), then wall time, sum of PLTs, loads/hour,
the overhead's median and p90 and the median of every phase of `stats.timing`.

`--compare`: every (page, trial, scheme) twice, in the default mode and in the
per-load one of before (DCH_BROWSER_DRIVER=subprocess, DCH_PREPARE_AHEAD=0: a Python
driver on ue starts Chromium once the testbed is up), alternating which goes first;
prints the paired PLT differences (same trace offset) and each mode's overhead.

`--compare-metrics`: the same pairing, "new" with the page metrics' screencast (Speed
Index, atf_ms: DCH_SPEED_INDEX=1) against "old" without it (the default; FCP and LCP
are read in both): what the visual metrics cost.

`--evidence`: the loads keep their run directories; per load, the DNS queries dnsmasq
answered, the connections and requests webreplay logged, against the resources
Chromium counted (cold: every origin looked up, every resource fetched).

`--cli`: runs `./dch pageload --corpus C --pages N --scheme S --trials T --json
--no-store` as a child and reports (wall − Σ PLT) / loads, the command's own start
included (the issue's check).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from dchlab import REPO_ROOT
from dchlab.run_config import RunConfig

T = TypeVar("T")


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values`, linear between ranks."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summarize(wall_s: float, rows: list[dict[str, Any]], overheads_ms: list[float]) -> str:
    plts = [float(r.get("plt_ms") or 0.0) for r in rows]
    n = len(rows)
    valid = sum(1 for r in rows if r.get("valid"))
    lines = [
        f"loads {n} (valid {valid}), wall {wall_s:.2f} s, sum of PLTs {sum(plts) / 1000:.2f} s, "
        f"loads/hour {3600 * n / wall_s:.0f}",
        f"(wall - sum PLT) / loads = {(wall_s - sum(plts) / 1000) / max(n, 1):.3f} s",
    ]
    if overheads_ms:
        lines.append(
            f"overhead per load (load_one wall - PLT): median {statistics.median(overheads_ms):.0f} ms, "
            f"p90 {pct(overheads_ms, 0.9):.0f} ms, min {min(overheads_ms):.0f} ms, "
            f"max {max(overheads_ms):.0f} ms; median PLT {statistics.median(plts):.0f} ms"
        )
    return "\n".join(lines)


def phase_medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median per phase over `rows`' stats.timing ({group: {phase: ms}})."""
    samples: dict[str, list[float]] = {}
    for r in rows:
        timing = (r.get("stats") or {}).get("timing") or {}
        for group, phases in timing.items():
            if isinstance(phases, dict):
                for name, ms in phases.items():
                    samples.setdefault(f"{group}.{name}", []).append(float(ms))
    return {k: statistics.median(v) for k, v in samples.items()}


def paired(args: argparse.Namespace, names: list[str]) -> list[tuple[str, int, RunConfig]]:
    """(page, trial, run) of every page, trial and scheme, the schemes of one (page,
    trial) back to back."""
    schemes = [s.strip() for s in args.scheme.split(",") if s.strip()]
    return [(name, trial, RunConfig(scheme=scheme, hbc=args.hbc, llc=args.llc, trial=trial))
            for name in names for trial in range(args.trials) for scheme in schemes]  # fmt: skip


def run_inproc(args: argparse.Namespace) -> int:
    from dchlab.pages import open_corpus
    from dchlab.workloads.api import load_one
    from dchlab.workloads.pool import TestbedPool

    t_start = time.monotonic()
    corpus = open_corpus(args.corpus)
    names = [p.name for p in corpus.pages[: args.pages]]
    rows: list[dict[str, Any]] = []
    overheads: list[float] = []
    todo = paired(args, names)
    with TestbedPool() as pool:  # the last load expects nothing: nothing is left prepared
        for i, (name, trial, spec) in enumerate(todo):
            pool.expect(todo[i + 1][2] if i + 1 < len(todo) else None)
            t0 = time.monotonic()
            row = load_one(spec, corpus, name, args.timeout, pool)
            if args.evidence:
                print("   ", evidence(row), flush=True)
            wall_ms = (time.monotonic() - t0) * 1000
            over = wall_ms - float(row.get("plt_ms") or 0.0)
            overheads.append(over)
            rows.append(row)
            state = "ok" if row.get("valid") else f"invalid: {row.get('invalid_reason')}"
            print(
                f"{spec.scheme:<10} {name:<18} #{trial} PLT {row.get('plt_ms')} ms, "
                f"wall {wall_ms:.0f} ms, overhead {over:.0f} ms: {state}",
                flush=True,
            )
    wall = time.monotonic() - t_start
    print(summarize(wall, rows, overheads))
    print("median per phase (ms):")
    for k, v in sorted(phase_medians(rows).items()):
        print(f"  {k:<32} {v:8.1f}")
    return 0


OLD_MODE = {"DCH_BROWSER_DRIVER": "subprocess", "DCH_PREPARE_AHEAD": "0"}
# --compare-metrics: "new" with the screencast (Speed Index, atf_ms), "old" without it
# (the default; FCP and LCP are always read).
SCREENCAST_MODES = {"new": {"DCH_SPEED_INDEX": "1"}, "old": {"DCH_SPEED_INDEX": "0"}}


def _in_env(env: dict[str, str], call: Callable[[], T]) -> T:
    """call() with `env` set in os.environ, then the environment as it was."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return call()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.update({k: v})


def run_compare(args: argparse.Namespace, modes: dict[str, dict[str, str]] | None = None) -> int:
    """Paired loads in mode "new" and "old"; `modes`: the environment of each (default:
    this driver against the per-load one of before)."""
    modes = modes or {"new": {}, "old": OLD_MODE}

    from dchlab.pages import open_corpus
    from dchlab.workloads.api import load_one
    from dchlab.workloads.pool import BrowserStart, TestbedPool

    corpus = open_corpus(args.corpus)
    names = [p.name for p in corpus.pages[: args.pages]]
    out: dict[str, list[tuple[float, float, bool]]] = {"new": [], "old": []}
    diffs: list[float] = []
    rows: dict[str, list[dict[str, Any]]] = {"new": [], "old": []}
    # one pool per mode: a mode's next load takes the testbed its previous one prepared
    with contextlib.ExitStack() as stack:
        pools = {
            mode: stack.enter_context(TestbedPool(_in_env(modes[mode], BrowserStart.from_env)))
            for mode in ("new", "old")
        }
        todo = paired(args, names)
        for i, (name, trial, spec) in enumerate(todo):
            plt: dict[str, float | None] = {}
            for mode in ("new", "old") if i % 2 == 0 else ("old", "new"):
                pool = pools[mode]
                pool.expect(todo[i + 1][2] if i + 1 < len(todo) else None)
                t0 = time.monotonic()
                load = functools.partial(load_one, spec, corpus, name, args.timeout, pool)
                row = _in_env(modes[mode], load)
                wall = (time.monotonic() - t0) * 1000
                rows[mode].append(row)
                p = row.get("plt_ms")
                plt[mode] = p if row.get("valid") else None
                out[mode].append((wall - float(p or 0), float(p or 0), bool(row.get("valid"))))
            if plt["new"] is not None and plt["old"] is not None:
                diffs.append(plt["new"] - plt["old"])
            print(
                f"{spec.scheme:<10} {name:<18} #{trial} PLT new {plt['new']} old {plt['old']}",
                flush=True,
            )
    for mode, vals in out.items():
        over = [v[0] for v in vals if v[2]]
        if over:
            print(f"{mode}: {len(over)} valid, overhead median {statistics.median(over):.0f} ms, "
                  f"p90 {pct(over, 0.9):.0f} ms, PLT median {statistics.median(v[1] for v in vals if v[2]):.0f} ms")  # fmt: skip
    phases = {mode: phase_medians([r for r in rs if r.get("valid")]) for mode, rs in rows.items()}
    print("median per browser/load phase (ms), new / old:")
    for k in sorted(set(phases["new"]) | set(phases["old"])):
        if k.startswith(("browser.", "load.")):
            new, old = phases["new"].get(k, float("nan")), phases["old"].get(k, float("nan"))
            print(f"  {k:<32} {new:8.1f} / {old:8.1f}")
    if diffs:
        print(f"paired PLT new - old over {len(diffs)} pairs: median {statistics.median(diffs):+.0f} ms, "
              f"mean {statistics.mean(diffs):+.0f} ms, new faster in {sum(d < 0 for d in diffs)}, "
              f"slower in {sum(d > 0 for d in diffs)}")  # fmt: skip
    return 0


def evidence(row: dict[str, Any]) -> str:
    """Cold-load evidence from a kept run directory (then removed)."""
    import shutil

    from dchlab.testbed.runrecord import RUNS_TMP

    run = RUNS_TMP / str((row.get("stats") or {}).get("prefix"))
    try:
        dns = (run / "dnsmasq.log").read_text(errors="replace").splitlines()
        acc = [json.loads(x) for x in (run / "access.log").read_text().splitlines() if x]
    except OSError as e:
        return f"no logs: {e}"
    finally:
        shutil.rmtree(run, ignore_errors=True)
    queried = {x.split()[-3] for x in dns if "query[A]" in x}
    hosts = {a["host"] for a in acc}
    conns = {a["client"] for a in acc}
    return (
        f"dns A queries for {len(queried)} names (hosts served {len(hosts)}, "
        f"not looked up {sorted(hosts - queried)}); {len(conns)} connections, "
        f"{len(acc)} requests logged; Chromium: {row.get('resources_loaded')} loaded, "
        f"{row.get('resources_failed')} failed; main doc dns {row.get('dns_ms')} ms "
        f"connect {row.get('connect_ms')} ms tls {row.get('tls_ms')} ms"
    )


def run_cli(args: argparse.Namespace) -> int:
    cmd = [str(Path(REPO_ROOT) / "dch"), "pageload", "--corpus", args.corpus,
           "--pages", str(args.pages), "--scheme", args.scheme, "--trials", str(args.trials),
           "--hbc", args.hbc, "--llc", args.llc, "--json", "--no-store"]  # fmt: skip
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.stderr.write(proc.stderr[-2000:])
        return 1
    overheads = [
        float(((r.get("stats") or {}).get("timing") or {}).get("load", {}).get("outside_plt", 0))
        for r in rows
    ]
    print(summarize(wall, rows, [o for o in overheads if o]))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", default="synthetic:1")
    ap.add_argument("--pages", type=int, default=3)
    ap.add_argument("--scheme", default="all-hbc,dchannel")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--hbc", default="fixed:40ms/200mbit")
    ap.add_argument("--llc", default="urllc")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--cli", action="store_true", help="time the `dch pageload` command instead")
    ap.add_argument("--compare", action="store_true", help="paired: this mode against the old")
    ap.add_argument(
        "--compare-metrics",
        action="store_true",
        help="paired: with the screencast (Speed Index, $DCH_SPEED_INDEX=1) against without",
    )
    ap.add_argument("--evidence", action="store_true", help="keep logs: DNS queries, connections")
    args = ap.parse_args(argv)
    if args.evidence:
        from dchlab.workloads import api

        config = api.testbed_config

        def keep(*a: Any, **kw: Any) -> Any:
            return replace(config(*a, **kw), keep_logs=True)

        api.testbed_config = keep  # type: ignore[assignment]
    if args.compare:
        return run_compare(args)
    if args.compare_metrics:
        return run_compare(args, SCREENCAST_MODES)
    return run_cli(args) if args.cli else run_inproc(args)


if __name__ == "__main__":
    raise SystemExit(main())
