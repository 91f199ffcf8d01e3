"""Testbed setup and teardown time per scheme (docs/benchmarks.md, "Testbed").

sudo PYTHONPATH=lab .venv/bin/python -m dchlab.testbed.bench [--runs 5] [SCHEME...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from dchlab.testbed import Testbed, TestbedConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("schemes", nargs="*", default=["hbc-only", "dchannel", "mptcp", "ideal"])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(
        f"{'scheme':12} {'setup p50':>10} {'setup max':>10} {'teardown p50':>13} {'teardown max':>13}"
    )
    for scheme in args.schemes:
        up, down = [], []
        for _ in range(args.runs):
            t0 = time.monotonic()
            tb = Testbed(TestbedConfig(scheme=scheme)).start()
            t1 = time.monotonic()
            tb.close()
            up.append(t1 - t0)
            down.append(time.monotonic() - t1)
        print(
            f"{scheme:12} {statistics.median(up) * 1e3:8.0f}ms {max(up) * 1e3:8.0f}ms "
            f"{statistics.median(down) * 1e3:11.0f}ms {max(down) * 1e3:11.0f}ms"
        )


if __name__ == "__main__":
    main()
