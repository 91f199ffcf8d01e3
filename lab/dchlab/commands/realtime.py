"""`dch realtime`: cloud gaming and video calls on a real WebRTC stack (aiortc).

Run one real-time session per app, scheme and trial, each in a fresh testbed: the
server in srv, the device on ue, VP8 video (and Opus audio for a video call) with
aiortc's REMB congestion control; cloud-gaming inputs go over a data channel and the
server's frames show the latest input in a machine-readable patch. Reports
input-to-display latency (p50/p95/p99) and its parts (each measured, adding up to
it), frame delay and its parts (encode, network,
jitter buffer, decode), delivered frame rate, freezes (> 200 ms without a new frame),
bitrate and bytes per channel. For an app and trial every scheme sees the same trace
offset (paired). See docs/realtime.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dchlab.commands import add_command
from dchlab.workloads.cli_common import add_common, fmt_ms, paired_runs, row_state, run_jobs
from dchlab.workloads.realtime.frame_release import FRAME_RELEASES

APPS = ("cloud-gaming", "video-call")


def _parts(p50: dict[str, float | None] | None) -> str:
    """', parts p50: name ms ...' of input-to-display's parts (latency_parts), in path
    order ('' when the session has none)."""
    if not p50:
        return ""
    return ", parts p50: " + " ".join(
        f"{k} {'-' if v is None else f'{v:.1f}'}" for k, v in p50.items()
    )


def _show(row: dict[str, Any]) -> str:
    if row.get("rt_app") == "cloud-gaming":
        what = (
            f"input-to-display p50/p95/p99 {fmt_ms(row.get('input_to_display_p50_ms'))}/"
            f"{fmt_ms(row.get('input_to_display_p95_ms'))}/"
            f"{fmt_ms(row.get('input_to_display_p99_ms'))} ms "
            f"({row.get('inputs_displayed')}/{row.get('inputs_sent')} inputs"
            f"{_parts(row.get('i2d_parts_p50_ms'))})"
        )
    else:
        what = (
            f"audio delay p50/p95 {fmt_ms(row.get('audio_delay_p50_ms'))}/"
            f"{fmt_ms(row.get('audio_delay_p95_ms'))} ms, up video p95 "
            f"{fmt_ms(row.get('frame_delay_up_p95_ms'))} ms"
        )
    fps = row.get("fps_delivered")
    mbps, shown = row.get("bitrate_mbps"), row.get("shown_mbps")
    return (
        f"{row['scheme']:<12} {row['page']:<13} #{row['trial']} {what}; frame delay p50/p95 "
        f"{fmt_ms(row.get('frame_delay_p50_ms'))}/{fmt_ms(row.get('frame_delay_p95_ms'))} ms "
        f"(encode {row.get('encode_ms')}, jitter buffer {row.get('jitter_buffer_ms')}, decode "
        f"{row.get('decode_ms')} ms), {'-' if fps is None else f'{fps:.1f}'} fps, "
        f"{row.get('freezes')} freezes, {'-' if mbps is None else f'{mbps:.2f}'} Mbit/s "
        f"({'-' if shown is None else f'{shown:.2f}'} shown, target {row.get('target_mbps')}, {row.get('key_frames')} key frames), "
        f"HBC {row.get('bytes_hbc')} B, LLC {row.get('bytes_llc')} B: {row_state(row)}"
    )


def cmd_realtime(args: argparse.Namespace) -> int:
    from dchlab.workloads.realtime.run import realtime

    apps = [a.strip() for a in args.app.split(",") if a.strip()]
    bad = [a for a in apps if a not in APPS]
    if bad or not apps:
        print(
            f"error: --app: unknown {', '.join(bad) or '(none)'}: expected {', '.join(APPS)}",
            file=sys.stderr,
        )
        return 2
    if args.duration <= 0 or args.input_hz <= 0 or (args.fps is not None and args.fps <= 0):
        print("error: --duration, --fps and --input-hz must be > 0", file=sys.stderr)
        return 2
    rates = [r for r in (args.min_bitrate, args.start_bitrate, args.max_bitrate) if r is not None]
    if any(r <= 0 for r in rates) or rates != sorted(rates):
        print(
            "error: --min-bitrate, --start-bitrate and --max-bitrate must be > 0 and "
            "min <= start <= max",
            file=sys.stderr,
        )
        return 2
    jobs = [
        (
            f"{spec.scheme} {app} #{trial}",
            lambda s=spec, a=app: [
                realtime(
                    s,
                    a,
                    args.duration,
                    args.fps,
                    args.input_hz,
                    args.start_bitrate,
                    args.max_bitrate,
                    args.min_bitrate,
                    args.frame_release,
                )
            ],
        )
        for app, trial, spec in paired_runs(args, apps)
    ]
    return run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_realtime)
    p.add_argument(
        "--app",
        default="cloud-gaming",
        help="comma-separated apps: cloud-gaming, video-call (default cloud-gaming)",
    )
    p.add_argument("--duration", type=float, default=60.0, help="session length, s (default 60)")
    p.add_argument(
        "--fps", type=int, default=None, help="video frame rate (default 30; docs/realtime.md)"
    )
    p.add_argument(
        "--input-hz",
        type=float,
        default=60.0,
        help="cloud-gaming input events per second (default 60; the issue's range 60-120)",
    )
    p.add_argument(
        "--start-bitrate",
        type=float,
        default=None,
        help="video start bitrate, Mbit/s (default: cloud-gaming 10, video-call 0.5)",
    )
    p.add_argument(
        "--max-bitrate",
        type=float,
        default=None,
        help="video bitrate cap, Mbit/s (default 20)",
    )
    p.add_argument(
        "--min-bitrate",
        type=float,
        default=None,
        help="video bitrate floor whatever the congestion control says, Mbit/s (default "
        "aiortc's 0.25; = the start for a fixed-rate service)",
    )
    p.add_argument(
        "--frame-release",
        choices=FRAME_RELEASES,
        default=FRAME_RELEASES[0],
        help="when the video jitter buffers hand a frame to the decoder: next (default, "
        "aiortc's: when the next frame's first packet arrives) or marker (libwebrtc's: on "
        "the packet with the RTP marker bit, the frame's last); docs/realtime.md",
    )
    add_common(p)
