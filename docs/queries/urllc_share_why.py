"""Why the measured device's gain moves with N and the sharing rule (docs/results.md,
"URLLC shared by N devices"): per condition, dchannel's rows only, medians over the
loads of

- `ue1 kB`, `others kB`: LLC bytes received by the measured device (ue1) and by all
  background devices together during the load (the devices' `llc` interface counters);
- `LLC down p50/p99 ms`, `drops`: the shared LLC downlink's one-way delay (every
  device's packets, base 2.5 ms included) and its queue drops;
- `over_share kB`: rule (b), the gateway's downlink bytes diverted to the HBC over all
  devices (`peers[i].limits.llc_share_diverted_bytes`);
- `others est kB`: rule (c), the largest other-users queue the gateway's probes learned
  for any device at the load's end (`peers[i].llc_others_bytes`);
- `gw RTT ms`: the LLC RTT the gateway's Algorithm 1 used for ue1 at the load's end
  (`peers[ue1].rtt_ms.llc`, the minimum over a window of probes: it stays at the base
  under every rule, which is why rule (a) cannot see the others' queue);
- `PLT hbc / dch`: all-hbc's and dchannel's median PLT.

    .venv/bin/python docs/queries/urllc_share_why.py [results/published/urllc_share.parquet]
"""

import json
import statistics
import sys
from collections import defaultdict

import duckdb


def _per_load(stats: dict) -> dict[str, float]:
    ifs = stats.get("interfaces", {})
    ue1 = ifs.get("ue", {}).get("llc", {}).get("rx_bytes", 0)
    others = sum(
        v.get("llc", {}).get("rx_bytes", 0)
        for k, v in ifs.items()
        if k.startswith("ue") and k != "ue"
    )
    down = stats.get("links", {}).get("llc", {}).get("downlink", {})
    peers = stats.get("agents", {}).get("gateway", {}).get("peers", [])
    return {
        "ue1": ue1 / 1e3,
        "others": others / 1e3,
        "p50": down.get("delay_ms", {}).get("p50", float("nan")),
        "p99": down.get("delay_ms", {}).get("p99", float("nan")),
        "drops": down.get("pkts_dropped_queue", 0),
        "over": sum(p.get("limits", {}).get("llc_share_diverted_bytes", 0) for p in peers) / 1e3,
        "est": max((p.get("llc_others_bytes", 0) for p in peers), default=0) / 1e3,
        "rtt": _ue1(peers).get("rtt_ms", {}).get("llc", float("nan")),
    }


def _ue1(peers: list[dict]) -> dict:
    """The gateway's peer entry of the measured device (named ue1 with N > 1 devices)."""
    named = [p for p in peers if p.get("peer") == "ue1"]
    return named[0] if named else (peers[0] if peers else {})


def main(path: str) -> None:
    rows = duckdb.execute(
        f"SELECT condition, scheme, plt_ms, stats FROM '{path}' WHERE valid ORDER BY condition"
    ).fetchall()
    plt: dict[tuple[str, str], list[float]] = defaultdict(list)
    loads: dict[str, list[dict[str, float]]] = defaultdict(list)
    for cond, scheme, ms, stats in rows:
        plt[(cond, scheme)].append(ms)
        if scheme == "dchannel" and stats:
            loads[cond].append(_per_load(json.loads(stats) if isinstance(stats, str) else stats))
    cols = ["ue1", "others", "p50", "p99", "drops", "over", "est", "rtt"]
    print("| condition | loads | ue1 kB | others kB | LLC down p50 ms | p99 ms | drops | over_share kB "
          "| others est kB | gw RTT ms | PLT hbc / dch ms |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for cond in sorted(loads):
        med = {c: statistics.median(x[c] for x in loads[cond]) for c in cols}
        hbc = statistics.median(plt[(cond, "all-hbc")]) if plt[(cond, "all-hbc")] else float("nan")
        dch = statistics.median(plt[(cond, "dchannel")])
        print(f"| {cond} | {len(loads[cond])} | {med['ue1']:.0f} | {med['others']:.0f} | {med['p50']:.1f} "
              f"| {med['p99']:.0f} | {med['drops']:.0f} | {med['over']:.0f} | {med['est']:.1f} | {med['rtt']:.1f} | {hbc:.0f} / {dch:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/published/urllc_share.parquet")
