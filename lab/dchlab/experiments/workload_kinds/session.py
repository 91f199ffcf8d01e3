"""`kind: session`: browsing sessions, a landing page and the pages after it in one
browser (dchlab.workloads.session)."""

from __future__ import annotations

from typing import Any

from dchlab.experiments.campaign import Workload
from dchlab.experiments.campaign_check import Validator
from dchlab.experiments.workload_kinds import WorkloadKind, WorkloadUnavailable, register
from dchlab.run_config import RunConfig
from dchlab.workloads.pool import TestbedPool


@register
class Session(WorkloadKind):
    name = "session"
    fields = frozenset({"corpus", "pages", "session_pages", "speed_index"})

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        return Workload(
            kind=self.name,
            corpus=v.string(d.get("corpus", "synthetic:1"), "workload.corpus"),
            pages=v.pages(d.get("pages"), "workload.pages"),
            session_pages=v.pos_int(d.get("session_pages", 4), "workload.session_pages"),
            timeout_s=timeout_s,
            speed_index=v.boolean(d.get("speed_index", False), "workload.speed_index"),
        )

    def items(self, wl: Workload) -> list[str]:
        """The landing pages; group_items makes a cell of each page of a session."""
        from dchlab.workloads.session import session_sites

        try:
            return session_sites(wl.corpus or "synthetic:1", wl.pages, wl.session_pages)
        except OSError as e:
            raise WorkloadUnavailable(f"corpus {wl.corpus!r}: {e}") from e

    def group_items(self, wl: Workload, item: str) -> list[str]:
        from dchlab.workloads.session import page_item

        return [page_item(item, i) for i in range(wl.session_pages + 1)]

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        """One browsing session; the rows of its pending pages."""
        from dchlab.workloads.session import campaign_session

        site = items[0].rpartition("#")[0]
        corpus = wl.corpus or "synthetic:1"
        return campaign_session(run, corpus, site, wl.session_pages, items, wl.timeout_s)
