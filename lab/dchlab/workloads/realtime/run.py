"""A real-time session on the testbed: one row per (scheme, app, trial).

`realtime(spec, app, ...)` builds a fresh testbed, starts the session's server in srv
(a supervised daemon on server.test's address, so every scheme routes it like the
other workloads' servers), runs the device end on ue for `duration_s` and turns its
summary into a row: RealtimeColumns, the channels' counters (bytes_hbc, bytes_llc)
and, in stats["realtime"], the whole summary with its per-input and per-frame
samples. Paired runs as in dchlab.workloads.api: the testbed seed comes from (seed,
`realtime:<app>`, trial), never the scheme.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dchlab import REPO_ROOT
from dchlab.testbed.addressing import SERVER_TEST
from dchlab.workloads.measure import RunSpec, in_testbed, testbed_config
from dchlab.workloads.realtime.frame_release import check_rule
from dchlab.workloads.rows import Outcome, RealtimeColumns, make_row

APPS = ("cloud-gaming", "video-call")
#: Frame rate per app: 30 fps, the issue's fallback for cloud gaming where two cores
#: do not keep up with 60 (docs/realtime.md has the measurement; --fps 60 runs it),
#: and a video call's cameras.
DEFAULT_FPS = {"cloud-gaming": 30, "video-call": 30}
#: Set-up (ICE, DTLS) and records on top of the session's own length (s).
SLACK_S = 90.0
#: Lines of the server's log a failed session's reason quotes (traceback marker
#: lines, only ^ and ~, left out).
SERVER_LOG_LINES = 8
#: How long a failed session waits for the server's last lines to reach its log (s):
#: the server logs its error before it closes signalling, and the testbed's log
#: thread copies its output to the file a moment later.
SERVER_LOG_SETTLE_S = 0.5


def _lab_env() -> dict[str, str]:
    return {"PYTHONPATH": str(Path(REPO_ROOT) / "lab")}


def columns(app: str, s: dict[str, Any]) -> RealtimeColumns:
    """The row columns of a session summary `s` (dchlab.workloads.realtime.summary)."""
    down = s.get("video_down") or {}
    fd = down.get("frame_delay_ms") or {}
    parts = down.get("parts_median_ms") or {}
    i2d = s.get("input_to_display_ms") or {}
    a_down, a_up = s.get("audio_down") or {}, s.get("audio_up") or {}
    dec = s.get("input_to_display_parts") or {}
    residual = dec.get("residual") or {}
    extremes = [abs(v) for v in (residual.get("min"), residual.get("max")) if v is not None]
    return RealtimeColumns(
        rt_app=app,
        duration_s=s.get("duration_s"),
        frame_release=s.get("frame_release"),
        connection_lost_s=s.get("connection_lost_s"),
        input_to_display_p50_ms=i2d.get("p50"),
        input_to_display_p95_ms=i2d.get("p95"),
        input_to_display_p99_ms=i2d.get("p99"),
        inputs_sent=s.get("inputs_sent"),
        inputs_displayed=s.get("inputs_displayed"),
        frame_delay_p50_ms=fd.get("p50"),
        frame_delay_p95_ms=fd.get("p95"),
        frame_delay_p99_ms=fd.get("p99"),
        fps_delivered=down.get("fps_delivered"),
        freezes=down.get("freezes"),
        freeze_ms=down.get("freeze_ms"),
        bitrate_mbps=down.get("bitrate_mbps"),
        shown_mbps=down.get("shown_mbps"),
        bitrate_steady_mbps=down.get("bitrate_steady_mbps"),
        target_mbps=down.get("target_mbps"),
        start_bitrate_mbps=s.get("start_bitrate_mbps"),
        max_bitrate_mbps=s.get("max_bitrate_mbps"),
        min_bitrate_mbps=s.get("min_bitrate_mbps"),
        warmup_s=down.get("warmup_s"),
        key_frames=down.get("key_frames"),
        frame_bytes_delta_p50=((down.get("frame_bytes") or {}).get("delta") or {}).get("p50"),
        frame_bytes_key_p50=((down.get("frame_bytes") or {}).get("key") or {}).get("p50"),
        encode_cpu_ms=(down.get("encode_cpu_ms") or {}).get("p50"),
        cpu_server_pct=(s.get("cpu_pct") or {}).get("server"),
        cpu_device_pct=(s.get("cpu_pct") or {}).get("device"),
        encode_ms=parts.get("encode"),
        decode_ms=parts.get("decode"),
        jitter_buffer_ms=parts.get("jitter_buffer"),
        frame_delay_up_p95_ms=((s.get("video_up") or {}).get("frame_delay_ms") or {}).get("p95"),
        audio_delay_p50_ms=(a_down.get("delay_ms") or {}).get("p50"),
        audio_delay_p95_ms=(a_down.get("delay_ms") or {}).get("p95"),
        audio_delay_up_p95_ms=(a_up.get("delay_ms") or {}).get("p95"),
        i2d_parts_p50_ms=dec.get("p50_ms"),
        i2d_parts_p95_ms=dec.get("p95_ms"),
        i2d_inputs_accounted=dec.get("inputs_accounted"),
        i2d_residual_max_ms=max(extremes) if extremes else None,
        i2d_without_waits_p50_ms=(dec.get("without_waits") or {}).get("p50"),
        i2d_without_waits_p95_ms=(dec.get("without_waits") or {}).get("p95"),
    )


def judge(app: str, s: dict[str, Any]) -> str:
    """Why the session's measurement is invalid ('' when it is valid): no video shown,
    or (cloud gaming) no input displayed; (video call) no tone heard either way."""
    reasons = []
    if not (s.get("video_down") or {}).get("frames_shown"):
        reasons.append("no server video frame was shown")
    if app == "cloud-gaming" and not s.get("inputs_displayed"):
        reasons.append("no input event was displayed")
    if app == "video-call":
        if not (s.get("video_up") or {}).get("frames_shown"):
            reasons.append("no device video frame was shown")
        for d in ("audio_down", "audio_up"):
            if not (s.get(d) or {}).get("marks_heard"):
                reasons.append(f"no tone mark heard ({d})")
    return "; ".join(reasons)


def server_said(daemon: Any, lines: int = SERVER_LOG_LINES) -> str:
    """The last `lines` lines of `daemon`'s log that say something: a traceback's
    marker lines (only ^ and ~, Python 3.11+) are left out."""
    tail = daemon.log_tail(lines * 4).splitlines()
    said = [t.strip() for t in tail if t.strip(" ^~")]
    return "\n".join(said[-lines:])


def run_session(
    tb: Any,
    app: str,
    duration_s: float,
    fps: int,
    input_hz: float,
    start_mbps: float | None = None,
    max_mbps: float | None = None,
    min_mbps: float | None = None,
    frame_release: str = "next",
) -> dict[str, Any]:
    """The server in srv and the device on ue of started testbed `tb`: the summary, or
    {"error": ...} when the device failed. `start_mbps`, `max_mbps`, `min_mbps`: the
    video's start bitrate, cap and floor (None: the app's, stack.BITRATES);
    `frame_release`: the video jitter buffers' rule (frame_release.FRAME_RELEASES)."""
    server = [sys.executable, "-m", "dchlab.workloads.realtime.server", "--address", SERVER_TEST]
    daemon = tb.spawn(
        "realtime-server", ["env", f"PYTHONPATH={_lab_env()['PYTHONPATH']}", *server], ns="srv"
    )
    tb.wait_ready(["realtime-server"], timeout=60)
    argv = [
        sys.executable, "-m", "dchlab.workloads.realtime.device", "--server", SERVER_TEST,
        "--app", app, "--duration", str(duration_s), "--fps", str(fps),
        "--input-hz", str(input_hz),
        *(["--start-bitrate", str(start_mbps)] if start_mbps is not None else []),
        *(["--max-bitrate", str(max_mbps)] if max_mbps is not None else []),
        *(["--min-bitrate", str(min_mbps)] if min_mbps is not None else []),
        "--frame-release", frame_release,
    ]  # fmt: skip
    proc = tb.run_ue(argv, capture_output=True, timeout=duration_s + SLACK_S, env=_lab_env())
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = proc.stderr.decode(errors="replace")[-600:]
        time.sleep(SERVER_LOG_SETTLE_S)
        said = server_said(daemon)
        return {"error": f"device exited {proc.returncode}: {err}\nserver log (end):\n{said}"}
    return dict(json.loads(lines[-1]))


def realtime(
    spec: RunSpec,
    app: str,
    duration_s: float = 60.0,
    fps: int | None = None,
    input_hz: float = 60.0,
    start_mbps: float | None = None,
    max_mbps: float | None = None,
    min_mbps: float | None = None,
    frame_release: str = "next",
) -> dict[str, Any]:
    """One session of `app` (cloud-gaming | video-call) under `spec`: its row.
    `start_mbps`, `max_mbps`, `min_mbps`: the video's start bitrate, cap and floor
    (None: the app's); `frame_release`: when the video jitter buffers release a frame
    (frame_release.FRAME_RELEASES: next, aiortc's; marker, libwebrtc's)."""
    from dchlab.testbed import Testbed

    if app not in APPS:
        raise ValueError(f"unknown real-time app {app!r}: expected one of {', '.join(APPS)}")
    check_rule(frame_release)
    fps = fps or DEFAULT_FPS[app]
    got: dict[str, Any] = {}

    def body(tb: Any) -> None:
        got.update(
            run_session(
                tb, app, duration_s, fps, input_hz, start_mbps, max_mbps, min_mbps, frame_release
            )
        )

    frame = in_testbed(Testbed(testbed_config(spec, f"realtime:{app}")), body)
    reason = str(got["error"]) if "error" in got else judge(app, got) if got else "did not run"
    outcome = frame.judged(Outcome(valid=not reason, invalid_reason=reason))
    cols = columns(app, got) if "error" not in got else RealtimeColumns(rt_app=app)
    row = make_row(spec, "realtime", app, {**asdict(outcome), **asdict(cols)})
    row["stats"] = {**row["stats"], "realtime": got}
    return row
