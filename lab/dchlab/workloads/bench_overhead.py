"""Benchmark: what a page load costs beyond its PLT, through the real testbed
(docs/benchmarks.md, "Page-load overhead"). Needs root, the release binaries, Chromium.

    PYTHONPATH=lab .venv/bin/python -m dchlab.workloads.bench_overhead \\
        [--corpus synthetic:1] [--pages 3] [--scheme all-hbc,dchannel] [--trials 1] [--cli]

Default: one process calls `dchlab.workloads.api.load_one` for every (page, trial,
scheme), as `dch pageload` and the campaign runner do, and prints per load the wall
time, the PLT and the overhead (wall − PLT), then wall time, sum of PLTs, loads/hour,
the overhead's median and p90 and the median of every phase of `stats.timing`.

`--cli`: runs `./dch pageload --corpus C --pages N --scheme S --trials T --json
--no-store` as a child and reports (wall − Σ PLT) / loads, the command's own start
included (the issue's check).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dchlab import REPO_ROOT


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


def run_inproc(args: argparse.Namespace) -> int:
    from dchlab.pages import open_corpus
    from dchlab.workloads.api import RunSpec, load_one

    t_start = time.monotonic()
    corpus = open_corpus(args.corpus)
    names = [p.name for p in corpus.pages[: args.pages]]
    rows: list[dict[str, Any]] = []
    overheads: list[float] = []
    for name in names:
        for trial in range(args.trials):
            for scheme in [s.strip() for s in args.scheme.split(",") if s.strip()]:
                spec = RunSpec(scheme=scheme, hbc=args.hbc, llc=args.llc, trial=trial)
                t0 = time.monotonic()
                row = load_one(spec, corpus, name, args.timeout)
                wall_ms = (time.monotonic() - t0) * 1000
                over = wall_ms - float(row.get("plt_ms") or 0.0)
                overheads.append(over)
                rows.append(row)
                state = "ok" if row.get("valid") else f"invalid: {row.get('invalid_reason')}"
                print(
                    f"{scheme:<10} {name:<18} #{trial} PLT {row.get('plt_ms')} ms, "
                    f"wall {wall_ms:.0f} ms, overhead {over:.0f} ms: {state}",
                    flush=True,
                )
    wall = time.monotonic() - t_start
    print(summarize(wall, rows, overheads))
    print("median per phase (ms):")
    for k, v in sorted(phase_medians(rows).items()):
        print(f"  {k:<32} {v:8.1f}")
    return 0


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
    args = ap.parse_args(argv)
    return run_cli(args) if args.cli else run_inproc(args)


if __name__ == "__main__":
    raise SystemExit(main())
