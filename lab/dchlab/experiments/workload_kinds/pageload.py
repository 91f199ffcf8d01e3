"""`kind: pageload`: one cold Chromium load per page (dchlab.workloads.api.pageload)."""

from __future__ import annotations

from typing import Any

from dchlab.experiments.campaign import Workload
from dchlab.experiments.campaign_check import Validator
from dchlab.experiments.workload_kinds import WorkloadKind, corpus_page_names, register
from dchlab.run_config import RunConfig
from dchlab.workloads.pool import TestbedPool


@register
class PageLoad(WorkloadKind):
    name = "pageload"
    fields = frozenset({"corpus", "pages", "speed_index"})
    item_is_page = True
    corpus_column = True
    pages_flag = True

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        return Workload(
            kind=self.name,
            corpus=v.string(d.get("corpus", "synthetic:1"), "workload.corpus"),
            pages=v.pages(d.get("pages"), "workload.pages"),
            timeout_s=timeout_s,
            speed_index=v.boolean(d.get("speed_index", False), "workload.speed_index"),
        )

    def items(self, wl: Workload) -> list[str]:
        if isinstance(wl.pages, tuple):
            return list(wl.pages)
        return corpus_page_names(wl.corpus or "synthetic:1", wl.pages)

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        from dchlab.workloads import api

        corpus = wl.corpus or "synthetic:1"
        rows = api.pageload(run, corpus, pages=items, timeout_s=wl.timeout_s, pool=pool)
        by_page = {str(r.get("page")): r for r in rows}
        missing = {"valid": False, "error": "no row returned for this page"}
        return [by_page.get(it) or {"page": it, **missing} for it in items]
