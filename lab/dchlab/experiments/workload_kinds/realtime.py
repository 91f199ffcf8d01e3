"""`kind: realtime`: real-time sessions (cloud gaming, video calls) on aiortc between ue
and srv (dchlab.workloads.realtime; docs/realtime.md).

    workload: {kind: realtime, apps: [cloud-gaming, video-call], duration_s: 60,
               fps: 30, input_hz: 60}

One item per app; each cell is one session, its row a summary (RealtimeColumns) with
the per-input and per-frame samples in stats.realtime.samples (for CDFs:
analysis.stat_samples with e.g. `realtime.samples.input_to_display_ms`).
"""

from __future__ import annotations

from typing import Any

from dchlab.experiments.campaign import Workload
from dchlab.experiments.campaign_check import Validator
from dchlab.experiments.workload_kinds import WorkloadKind, register
from dchlab.run_config import RunConfig
from dchlab.workloads.pool import TestbedPool

APPS = ("cloud-gaming", "video-call")


@register
class Realtime(WorkloadKind):
    name = "realtime"
    fields = frozenset({"apps", "duration_s", "fps", "input_hz"})

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        apps = d.get("apps", list(APPS))
        if not isinstance(apps, list) or not apps:
            raise v.err("workload.apps", f"expected a non-empty list of {', '.join(APPS)}, got {apps!r}")  # fmt: skip
        for n, a in enumerate(apps):
            if a not in APPS:
                raise v.err(f"workload.apps[{n}]", f"expected one of {', '.join(APPS)}, got {a!r}")
        duration = v.number(d.get("duration_s", 60.0), "workload.duration_s", minimum=1.0)
        if timeout_s < duration:
            raise v.err(
                "workload.timeout_s",
                f"{timeout_s:g} s is shorter than a session (duration_s {duration:g} s)",
            )
        fps = d.get("fps")
        return Workload(
            kind=self.name,
            apps=tuple(apps),
            duration_s=duration,
            fps=None if fps is None else v.pos_int(fps, "workload.fps"),
            input_hz=v.number(d.get("input_hz", 60.0), "workload.input_hz", minimum=1.0),
            timeout_s=timeout_s,
        )

    def items(self, wl: Workload) -> list[str]:
        return list(wl.apps)

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        from dchlab.workloads.realtime.run import realtime

        return [realtime(run, app, wl.duration_s, wl.fps, wl.input_hz) for app in items]
