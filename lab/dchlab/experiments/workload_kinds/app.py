"""`kind: app`: app interactions (launch, search, item) of app profiles (dchlab.apps)."""

from __future__ import annotations

from typing import Any

from dchlab.experiments.campaign import Workload
from dchlab.experiments.campaign_check import Validator
from dchlab.experiments.workload_kinds import WorkloadKind, register
from dchlab.run_config import RunConfig
from dchlab.workloads.pool import TestbedPool


@register
class App(WorkloadKind):
    name = "app"
    fields = frozenset({"profiles", "interactions"})
    item_is_page = True

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        profs = d.get("profiles")
        if not isinstance(profs, list) or not profs:
            raise v.err(
                "workload.profiles", f"expected a non-empty list of app profiles, got {profs!r}"
            )
        inter = d.get("interactions", ["launch", "search", "item"])
        if not isinstance(inter, list) or not inter:
            raise v.err("workload.interactions", f"expected a list, got {inter!r}")
        return Workload(
            kind=self.name,
            profiles=tuple(v.name(p, f"workload.profiles[{n}]") for n, p in enumerate(profs)),
            interactions=tuple(
                v.name(i, f"workload.interactions[{n}]") for n, i in enumerate(inter)
            ),
            timeout_s=timeout_s,
        )

    def items(self, wl: Workload) -> list[str]:
        return [f"{p}/{i}" for p in wl.profiles for i in wl.interactions]

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        from dchlab.workloads import api

        out = []
        for it in items:
            profile, _, interaction = it.partition("/")
            out.append(dict(api.app(run, profile, interaction, timeout_s=wl.timeout_s)))
        return out
