"""Synthesis speed per scenario: `python -m dchlab.traces.bench [--repeat N]`.

Prints, per Table 1 scenario, the median wall time of `synthesize()` (model +
quantile fit + rank map + capacity) and of writing its files, over N runs.
Reported in docs/benchmarks.md (section "traces").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dchlab.traces.scenario_files import write_scenario
from dchlab.traces.scenarios import SCENARIOS
from dchlab.traces.synth import synthesize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    synthesize("MM-D", 1)  # warm imports (scipy) out of the measurement
    print(f"{'scenario':8}  {'rows':>7}  {'synth ms':>9}  {'write_scenario ms':>17}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCENARIOS:
            synth, full = [], []
            for i in range(args.repeat):
                t0 = time.perf_counter()
                rtt, _ = synthesize(name, i + 1)
                t1 = time.perf_counter()
                write_scenario(name, i + 1, Path(tmp) / f"{name}-{i}")
                t2 = time.perf_counter()
                synth.append((t1 - t0) * 1000)
                full.append((t2 - t1) * 1000)
            print(
                f"{name:8}  {len(rtt):7d}  {statistics.median(synth):9.0f}  {statistics.median(full):17.0f}"
            )


if __name__ == "__main__":
    main()
