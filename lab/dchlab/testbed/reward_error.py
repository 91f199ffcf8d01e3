"""Reward-estimation error of the dchannel policy (NSDI'23 Fig. 11).

The sending agent's decision log (`--decision-log`) holds, per packet, Algorithm 1's
estimated completion times c_hbc / c_llc (ms on the sender's own clock, like `t_ms`)
and the decision instant on CLOCK_MONOTONIC (`t_mono_ns`). The receiving agent's
arrival log (`--arrival-log`) holds when each data datagram arrived
(`t_mono_ns`, same clock: all namespaces share CLOCK_MONOTONIC). They join on
(flow_id, seq) per direction (client decisions + gateway arrivals = uplink,
gateway decisions + client arrivals = downlink).

For each packet the dchannel policy steered (outcome "reward"):
  estimated = t_mono_ns + (c_x_ms - t_ms) * 1e6, c_x = c_llc if sent on the LLC else c_hbc
  realised  = the receiver's arrival t_mono_ns
  error_ms  = (estimated - realised) / 1e6   (signed: > 0 = the estimate was pessimistic)
The Fig. 11 distribution is that of |error_ms|.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: decisions made by the reward/cost rule (the only ones with a meaningful estimate).
REWARD_OUTCOME = "reward"


def read_arrivals(path: Path) -> dict[tuple[int, int], int]:
    """{(flow_id, seq): arrival t_mono_ns}; keys seen twice (flow-id wrap) are dropped."""
    out: dict[tuple[int, int], int] = {}
    dup: set[tuple[int, int]] = set()
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            key = (int(row["flow_id"]), int(row["seq"]))
            if key in out:
                dup.add(key)
            out[key] = int(row["t_mono_ns"])
    for key in dup:
        del out[key]
    return out


def errors_ms(decision_log: Path, arrivals: dict[tuple[int, int], int]) -> tuple[list[float], int]:
    """Signed errors (ms) of the reward-steered packets in `decision_log` that arrived,
    and how many such packets have no arrival (lost or cut off at teardown)."""
    errs: list[float] = []
    missing = 0
    with decision_log.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["outcome"] != REWARD_OUTCOME or not row.get("t_mono_ns"):
                continue
            arrived = arrivals.get((int(row["flow_id"]), int(row["seq"])))
            if arrived is None:
                missing += 1
                continue
            c_ms = float(row["c_llc_ms"] if row["channel"] == "llc" else row["c_hbc_ms"])
            estimated_ns = int(row["t_mono_ns"]) + (c_ms - float(row["t_ms"])) * 1e6
            errs.append((estimated_ns - arrived) / 1e6)
    return errs, missing


def summarize(errs: Iterable[float], missing: int = 0) -> dict[str, Any]:
    """p50/p90/p99 of |error| (ms), mean signed error, sample and missing counts."""
    e = np.asarray(list(errs), dtype=float)
    out: dict[str, Any] = {"samples": int(e.size), "missing": missing}
    if e.size:
        a = np.abs(e)
        for q in (50, 90, 99):
            out[f"p{q}"] = round(float(np.percentile(a, q)), 3)
        out["mean_signed"] = round(float(e.mean()), 3)
    return out


def collect(logs: dict[str, dict[str, Path]]) -> dict[str, Any]:
    """From {"client"|"gateway": {"decisions": path, "arrivals": path}}: per sender role
    (client = uplink, gateway = downlink) the |error| samples (ms, 0.01 ms resolution)
    and a summary, plus the pooled sample count."""
    out: dict[str, Any] = {"samples": 0}
    for role, peer, direction in (
        ("client", "gateway", "uplink"),
        ("gateway", "client", "downlink"),
    ):
        errs, missing = errors_ms(logs[role]["decisions"], read_arrivals(logs[peer]["arrivals"]))
        out[direction] = {
            **summarize(errs, missing),
            "abs_ms": [round(abs(x), 2) for x in errs],
        }
        out["samples"] += len(errs)
    return out
