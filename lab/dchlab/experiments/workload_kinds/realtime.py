"""`kind: realtime`: real-time sessions (cloud gaming, video calls) on aiortc between ue
and srv (dchlab.workloads.realtime; docs/realtime.md).

    workload: {kind: realtime, apps: [cloud-gaming, video-call], duration_s: 60,
               fps: 30, input_hz: 60, start_mbps: 10, max_mbps: 20, min_mbps: 0.25,
               frame_release: next}

`start_mbps`, `max_mbps`, `min_mbps` (optional): the video's start bitrate, cap and
floor in Mbit/s, as `dch realtime --start-bitrate/--max-bitrate/--min-bitrate`; left
out, each app's own (cloud-gaming starts at 10, video-call at 0.5). `frame_release`
(optional, `next` by default): when the video jitter buffers release a frame, `next`
(aiortc's: on the next frame's first packet) or `marker` (libwebrtc's: on the RTP
marker bit), as `dch realtime --frame-release` (dchlab.workloads.realtime.frame_release).

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
from dchlab.workloads.realtime.frame_release import FRAME_RELEASES

APPS = ("cloud-gaming", "video-call")


@register
class Realtime(WorkloadKind):
    name = "realtime"
    fields = frozenset(
        {
            "apps",
            "duration_s",
            "fps",
            "input_hz",
            "start_mbps",
            "max_mbps",
            "min_mbps",
            "frame_release",
        }
    )

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
        rates = {
            k: None if d.get(k) is None else v.number(d[k], f"workload.{k}", minimum=0.01)
            for k in ("start_mbps", "max_mbps", "min_mbps")
        }
        given = [r for r in (rates["min_mbps"], rates["start_mbps"], rates["max_mbps"]) if r]
        if given != sorted(given):
            raise v.err(
                "workload.start_mbps",
                f"expected min_mbps <= start_mbps <= max_mbps, got {rates}",
            )
        release = d.get("frame_release", FRAME_RELEASES[0])
        if release not in FRAME_RELEASES:
            raise v.err(
                "workload.frame_release",
                f"expected one of {', '.join(FRAME_RELEASES)}, got {release!r}",
            )
        return Workload(
            kind=self.name,
            apps=tuple(apps),
            duration_s=duration,
            fps=None if fps is None else v.pos_int(fps, "workload.fps"),
            input_hz=v.number(d.get("input_hz", 60.0), "workload.input_hz", minimum=1.0),
            start_mbps=rates["start_mbps"],
            max_mbps=rates["max_mbps"],
            min_mbps=rates["min_mbps"],
            frame_release=release,
            timeout_s=timeout_s,
        )

    def items(self, wl: Workload) -> list[str]:
        return list(wl.apps)

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        from dchlab.workloads.realtime.run import realtime

        return [
            realtime(
                run,
                app,
                wl.duration_s,
                wl.fps,
                wl.input_hz,
                wl.start_mbps,
                wl.max_mbps,
                wl.min_mbps,
                wl.frame_release,
            )
            for app in items
        ]
