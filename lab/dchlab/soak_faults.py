"""Soak of the channel-fault experiment (docs/reliability.md, "Channel faults"):
repeat dchlab.faults_run N times per link and print the distributions of per-flow
stall, failover and return times, and how many transfers completed byte-exact.

    sudo PYTHONPATH=lab .venv/bin/python -m dchlab.soak_faults --runs 10 --link llc --link hbc

Needs root and the release binaries (chanemu, dchannel, webreplay). Each run is one
testbed (~20 s); seeds 1..N move the emulators' random draws, not the schedule.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from dchlab.faults_run import DOWN_MS, PERIOD_MS, SIZE, FaultRun, run_outage
from dchlab.testbed import TestbedError


def _quantiles(xs: list[float]) -> str:
    """n, p50, p90, max (nearest rank), ms."""
    if not xs:
        return "n=0"
    s = sorted(xs)

    def q(p: float) -> float:
        return s[max(0, math.ceil(p * len(s)) - 1)]

    return f"n={len(s)} p50={q(0.5):.0f} p90={q(0.9):.0f} max={s[-1]:.0f}"


def summarize(link: str, runs: list[FaultRun]) -> list[str]:
    """Lines of the figures for one link's runs."""
    ok = sum(r.ok for r in runs)
    windows = [w for r in runs for w in r.windows]
    lines = [
        f"{link} down {DOWN_MS[0] / 1000:g}-{DOWN_MS[1] / 1000:g} s of every {PERIOD_MS / 1000:g} s, "
        f"{SIZE / 1e6:g} MB HTTPS download under dchannel: {ok}/{len(runs)} byte-exact, "
        f"{len(windows)} whole outage windows inside transfers",
        f"  per-flow stall, whole transfer (ms): {_quantiles([s for r in runs for s in r.stall_ms.values()])}",
        f"  stall overlapping an outage (ms):    {_quantiles([w.stall_ms for w in windows])}",
        f"  transfer time (ms): {_quantiles([r.transfer_s * 1000 for r in runs])}",
    ]
    for role in ("client", "gateway"):
        fo = [w.failover_ms[role] for w in windows]
        back = [w.return_ms[role] for w in windows]
        lines.append(
            f"  {role}: last packet onto the dead {link} after outage start (ms): {_quantiles(fo)}"
        )
        lines.append(
            f"  {role}: first packet onto the {link} after it is back (ms): "
            f"{_quantiles([b for b in back if b is not None])}; never: {sum(b is None for b in back)}"
        )
    carried = [w.carried_bytes for w in windows]
    lines.append(
        f"  bytes over the live link during an outage: {_quantiles([float(c) for c in carried])}"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m dchlab.soak_faults", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--runs", type=int, default=10, help="runs per link (default 10)")
    p.add_argument("--link", action="append", choices=["llc", "hbc"], help="link to take down (repeatable; default both)")  # fmt: skip
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    p.add_argument("--agent-arg", action="append", default=[], metavar="ARG", help="extra argument for both agents (repeatable), e.g. --agent-arg=--channel-dead-ms --agent-arg=600")  # fmt: skip
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be ≥ 1")
    out: dict[str, list[dict[str, object]]] = {}
    for link in args.link or ["llc", "hbc"]:
        runs, aborted = [], 0
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix=f"dch-faults-{link}-") as tmp:
                try:
                    run = run_outage(link, Path(tmp), seed=i + 1, agent_args=tuple(args.agent_arg))
                except TestbedError as exc:  # the testbed itself failed: not a figure
                    aborted += 1
                    print(f"{link} run {i + 1}/{args.runs}: testbed failed: {exc}", file=sys.stderr)
                    continue
            runs.append(run)
            print(
                f"{link} run {i + 1}/{args.runs}: {json.dumps(run.as_dict())}",
                file=sys.stderr,
                flush=True,
            )
        out[link] = [r.as_dict() for r in runs]
        if args.agent_arg:
            print(f"agent arguments: {' '.join(args.agent_arg)}")
        print("\n".join(summarize(link, runs)), flush=True)
        if aborted:
            print(f"  ({aborted} runs aborted by a testbed failure, not counted)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
