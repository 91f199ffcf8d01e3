"""Benchmark: Chromium driver overhead per load outside the PLT (docs/benchmarks.md).

    python -m dchlab.workloads.bench_driver [--corpus synthetic] [--pages 5] [--loads 3]

Loads pages over a local webreplay (private netns, no channels, needs root). Reports per
load the wall time of the whole driver subprocess (Python start, Chromium start, CDP,
load, network-quiet tail, shutdown, profile removal) against the PLT; overhead = wall −
PLT is the time a campaign spends per load beyond the measurement itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main(argv: list[str] | None = None) -> int:
    from dchlab.pages import open_corpus
    from dchlab.workloads.localreplay import LocalReplay

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", default="synthetic")
    ap.add_argument("--pages", type=int, default=5)
    ap.add_argument("--loads", type=int, default=3, help="loads per page")
    args = ap.parse_args(argv)
    corpus = open_corpus(args.corpus)
    rows = []
    with LocalReplay(corpus) as lr:
        for page in corpus.pages[: args.pages]:
            for _ in range(args.loads):
                t0 = time.monotonic()
                r = lr.load(page.entry_url)
                wall = (time.monotonic() - t0) * 1000
                rows.append(
                    {
                        "page": page.name,
                        "valid": r["valid"],
                        "plt_ms": r["plt_ms"],
                        "driver_ms": r["driver_ms"],
                        "wall_ms": wall,
                        "overhead_ms": wall - (r["plt_ms"] or 0),
                        "resources": r["resources_loaded"],
                    }
                )
                print(json.dumps(rows[-1]))
    ok = [r for r in rows if r["valid"]]

    def med(key: str) -> float:
        return statistics.median(r[key] for r in ok)

    print(
        f"{len(ok)}/{len(rows)} valid loads; median PLT {med('plt_ms'):.0f} ms, "
        f"driver (browser start..stop) {med('driver_ms'):.0f} ms, "
        f"wall per load {med('wall_ms'):.0f} ms, overhead outside PLT {med('overhead_ms'):.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
