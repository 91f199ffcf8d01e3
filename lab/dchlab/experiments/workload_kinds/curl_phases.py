"""`kind: curl-phases`: one curl fetch with its phase breakdown (the paper's Table 2)."""

from __future__ import annotations

from typing import Any

from dchlab.experiments.campaign import Workload
from dchlab.experiments.campaign_check import Validator
from dchlab.experiments.workload_kinds import WorkloadKind, register
from dchlab.run_config import RunConfig
from dchlab.workloads.pool import TestbedPool


@register
class CurlPhases(WorkloadKind):
    name = "curl-phases"
    fields = frozenset({"corpus", "url"})

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        if "url" not in d:
            raise v.err("workload.url", "missing (the URL curl fetches)")
        return Workload(
            kind=self.name,
            corpus=d.get("corpus") and v.string(d["corpus"], "workload.corpus"),
            url=v.string(d["url"], "workload.url"),
            timeout_s=timeout_s,
        )

    def items(self, wl: Workload) -> list[str]:
        return ["curl"]

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        from dchlab.workloads import api

        return [dict(api.curl_phases(run, wl.url) if wl.url else api.curl_phases(run))]
