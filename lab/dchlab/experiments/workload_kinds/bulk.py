"""`kind: bulk`: downloads of given sizes from server.test (the paper's Fig. 6)."""

from __future__ import annotations

from typing import Any

from dchlab.experiments.campaign import Workload
from dchlab.experiments.campaign_check import Validator, parse_size
from dchlab.experiments.workload_kinds import WorkloadKind, register
from dchlab.run_config import RunConfig
from dchlab.units import format_size
from dchlab.workloads.pool import TestbedPool


@register
class Bulk(WorkloadKind):
    name = "bulk"
    fields = frozenset({"sizes"})

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        sizes = d.get("sizes")
        if not isinstance(sizes, list) or not sizes:
            raise v.err("workload.sizes", f"expected a non-empty list of sizes, got {sizes!r}")
        where = f"{v.path}: workload.sizes"
        return Workload(
            kind=self.name,
            sizes=tuple(parse_size(s, f"{where}[{i}]") for i, s in enumerate(sizes)),
            timeout_s=timeout_s,
        )

    def items(self, wl: Workload) -> list[str]:
        return [format_size(s) for s in wl.sizes]

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        """One row per size, in order (an invalid download has no size_bytes)."""
        from dchlab.workloads import api

        sizes = [s for s in wl.sizes if format_size(s) in items]
        rows = list(api.bulk(run, sizes))
        if len(rows) != len(sizes):
            raise RuntimeError(f"bulk returned {len(rows)} rows for {len(sizes)} sizes")
        return rows
