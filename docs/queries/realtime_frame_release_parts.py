"""Input-to-display taken apart under both frame release rules (docs/results.md, "Frame
release on the marker bit"): per scheme, the mean over the paired sessions of each
part's session p50 (ms, `i2d_parts_p50_ms`), `next` (results/published/realtime.parquet)
beside `marker` (realtime_marker.parquet), for one condition; parts under 0.5 ms in
every column are left out.

    .venv/bin/python docs/queries/realtime_frame_release_parts.py embb40-urllc5
"""

import json
import sys
from collections import defaultdict

import duckdb
from dchlab.workloads.realtime.latency_parts import PARTS

SCHEMES = ("all-hbc", "dchannel", "realtime", "ideal")
RULES = {
    "next": "results/published/realtime.parquet",
    "marker": "results/published/realtime_marker.parquet",
}


def main(condition: str) -> None:
    # only the trials both campaigns measured (paired by trial: same trace offsets)
    trials = {
        r: {
            (s, t)
            for s, t in duckdb.execute(
                f"SELECT scheme, trial FROM '{f}' WHERE valid AND rt_app = 'cloud-gaming' "
                "AND condition = ?",
                [condition],
            ).fetchall()
        }
        for r, f in RULES.items()
    }
    both = trials["next"] & trials["marker"]
    acc: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    order = list(PARTS)  # path order
    for rule, f in RULES.items():
        for scheme, trial, parts, p50 in duckdb.execute(
            f"SELECT scheme, trial, i2d_parts_p50_ms, input_to_display_p50_ms FROM '{f}' "
            "WHERE valid AND rt_app = 'cloud-gaming' AND condition = ?",
            [condition],
        ).fetchall():
            if (scheme, trial) not in both or not parts:
                continue
            for k, v in json.loads(parts).items():
                if v is not None:
                    acc[(rule, scheme)][k].append(float(v))
            acc[(rule, scheme)]["whole (session p50)"].append(float(p50))
    cols = [(s, r) for s in SCHEMES for r in RULES]
    print("| part | " + " | ".join(f"{s} {r}" for s, r in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for k in [*order, "whole (session p50)"]:
        vals = [acc[(r, s)][k] for s, r in cols]
        means = [sum(v) / len(v) if v else None for v in vals]
        if all(m is None or abs(m) < 0.5 for m in means):
            continue
        cells = ["—" if m is None else f"{m:.1f}" for m in means]
        print(f"| {k} | " + " | ".join(cells) + " |")
    n = {s: len(acc[("marker", s)]["whole (session p50)"]) for s in SCHEMES}
    print(f"\npaired sessions per scheme: {n}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "embb40-urllc5")
