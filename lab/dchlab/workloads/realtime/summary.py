"""A real-time session's summary from both ends' records (dchlab.workloads.realtime.media
Record plus stack.Probes, as JSON: object keys are strings).

Video per direction (sender -> receiver), per new frame shown (the first display of
each frame id), all on one monotonic clock:
  frame delay   = display - capture;
  its parts     = sender queue (capture -> encode start), encode, network (encode
                  end -> first packet's arrival: pacing, send, propagation, queues),
                  jitter buffer (first packet -> decode start: the rest of the frame's
                  packets, reassembly, the queue to the decoder thread), decode, output
                  (decode end -> the application has the frame);
  plus delivered frame rate, freezes, received bitrate and the encoder's target;
  what the encoder made (key frames, bytes per key and delta frame, CPU time per
  frame) and, per second of the session, the received bitrate, the encoder's target
  and the receiver's congestion-control estimate (REMB) (`timeline_1s`), and the
  received bitrate after the first WARMUP_S (`bitrate_steady_mbps`); the receiver's
  loss reports (packets NACKed, PLIs: each PLI costs a key frame).
Cloud gaming adds input-to-display latency per input (dchlab.workloads.realtime.metrics),
taken apart into parts that add up to it (`input_to_display_parts`,
dchlab.workloads.realtime.latency_parts) and the inputs' one-way delay; video call adds audio delay per tone mark both ways.
`cpu_pct` is each end's process CPU time over its session (100 = one core).
`samples` keeps the per-input and per-frame values for CDFs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dchlab.workloads.realtime import latency_parts, metrics, tones

PARTS = ("sender_queue", "encode", "network", "jitter_buffer", "decode", "output")
#: The first seconds of a session (from its first frame's capture) that
#: `bitrate_steady_mbps` leaves out: aiortc's congestion controller takes its first
#: throughput measurement 3 s in (aiortc/rate.py, AimdRateControl.update), and the
#: first key frame is drained by then.
WARMUP_S = 5.0


def _ints(d: Mapping[str, Any]) -> dict[int, Any]:
    return {int(k): v for k, v in d.items()}


def _ms(values: list[float]) -> list[float]:
    return [round(v * 1000, 2) for v in values]


def new_frames(shown: list[list[float]]) -> list[list[float]]:
    """The first display of each frame id, in display order."""
    seen: set[int] = set()
    out = []
    for s in sorted(shown, key=lambda s: s[0]):
        if int(s[2]) not in seen:
            seen.add(int(s[2]))
            out.append(s)
    return out


def _per_second(points: list[tuple[float, float]], t0: float, seconds: int) -> list[list[float]]:
    """`points` [(time, value)] grouped by whole second since `t0` (seconds
    0..`seconds`-1; earlier and later points left out)."""
    bins: list[list[float]] = [[] for _ in range(seconds)]
    for t, v in points:
        i = int(t - t0)
        if 0 <= i < seconds:
            bins[i].append(v)
    return bins


def timeline(
    encode: Mapping[int, Any], rx: list[tuple[float, int]], remb: list[tuple[float, int]],
    t0: float, seconds: int,
) -> dict[str, list[float | None]]:  # fmt: skip
    """Per second since `t0`: received Mbit/s (`rx`: [(arrival, bytes)]), the
    encoder's mean target (Mbit/s, over the frames whose encode started then) and the
    receiver's last REMB estimate (Mbit/s, None before its first)."""
    rx_bins = _per_second([(t, b) for t, b in rx], t0, seconds)
    target_bins = _per_second([(e[0], e[3]) for e in encode.values()], t0, seconds)
    remb_bins = _per_second([(t, b) for t, b in remb], t0, seconds)
    out: dict[str, list[float | None]] = {"rx_mbps": [], "target_mbps": [], "remb_mbps": []}
    last: float | None = None
    for r, tg, rb in zip(rx_bins, target_bins, remb_bins, strict=True):
        out["rx_mbps"].append(round(8 * sum(r) / 1e6, 3))
        out["target_mbps"].append(round(sum(tg) / len(tg) / 1e6, 3) if tg else None)
        last = rb[-1] / 1e6 if rb else last
        out["remb_mbps"].append(None if last is None else round(last, 3))
    return out


def encoded(encode: Mapping[int, Any]) -> dict[str, Any]:
    """What the encoder made of the frames it encoded (probes of 6 fields,
    stack.Probes.encode): key frames, bytes per key / delta frame, CPU ms per frame."""
    full = [e for e in encode.values() if len(e) >= 6]
    key = [float(e[2]) for e in full if e[5] == 1]
    delta = [float(e[2]) for e in full if e[5] == 0]
    return {
        "key_frames": len(key),
        "frame_bytes": {
            "key": metrics.percentiles(key, scale=1.0),
            "delta": metrics.percentiles(delta, scale=1.0),
        },
        "encode_cpu_ms": metrics.percentiles([float(e[4]) for e in full]),
    }


def video(
    sender: Mapping[str, Any], receiver: Mapping[str, Any], dark_until: float | None = None
) -> dict[str, Any]:
    """The video direction from `sender` to `receiver` (their records and probes).
    `dark_until`: the session's end when its connection was lost (the freeze from the
    last frame to it counts)."""
    frames = _ints(sender.get("frames") or {})
    tick = int(sender.get("tick") or 1)
    # the encoder's media timestamps are the frame slots' on the 90 kHz clock, rounded
    encode = {round(ts / tick): v for ts, v in _ints(sender.get("encode") or {}).items()}
    decode = _ints(receiver.get("decode") or {})
    origin = receiver.get("rtp_origin")
    first = {
        (ts - origin) % (1 << 32): t
        for ts, t in _ints(receiver.get("first_packet") or {}).items()
        if origin is not None
    }
    shown = new_frames(receiver.get("shown") or [])
    delays: list[float] = []
    parts: dict[str, list[float]] = {p: [] for p in PARTS}
    for t, rtp, fid, _seq, t_patch in shown:
        cap = frames.get(int(fid), t_patch)
        delays.append(t - cap)
        enc, dec, arr = encode.get(int(fid)), decode.get(int(rtp)), first.get(int(rtp))
        if enc is None or dec is None or arr is None:
            continue
        parts["sender_queue"].append(enc[0] - cap)
        parts["encode"].append(enc[1] - enc[0])
        parts["network"].append(arr - enc[1])
        parts["jitter_buffer"].append(dec[0] - arr)
        parts["decode"].append(dec[1] - dec[0])
        parts["output"].append(t - dec[1])
    times = [s[0] for s in shown]
    n_freeze, freeze_s = metrics.freezes(times, end=dark_until)
    rx = [(float(t), int(b)) for t, b in (receiver.get("rx_bytes") or {}).get("video", [])]
    bps = metrics.bitrate_bps(rx)
    # what the player saw: each displayed frame's encoded size at its display time
    # (retransmitted and duplicate packets, and frames never shown, are not in it)
    seen = [(float(f[0]), int(encode[int(f[2])][2])) for f in shown if int(f[2]) in encode]
    shown_bps = metrics.bitrate_bps(seen)
    targets = [e[3] for e in encode.values()]
    fps = metrics.frame_rate(times)
    t0 = min(frames.values(), default=None)
    steady = None if t0 is None else metrics.bitrate_bps([a for a in rx if a[0] >= t0 + WARMUP_S])
    remb = [(float(t), int(b)) for t, b in receiver.get("remb") or []]
    seconds = 0 if t0 is None or not rx else math.ceil(max(t for t, _ in rx) - t0)
    return {
        "frames_sent": len(frames),
        "frames_skipped": int(sender.get("skipped") or 0),
        "frames_shown": len(shown),
        "frames_unreadable": int(receiver.get("unreadable") or 0),
        "fps_delivered": None if fps is None else round(fps, 2),
        "freezes": n_freeze,
        "freeze_ms": round(freeze_s * 1000, 1),
        "bitrate_mbps": None if bps is None else round(bps / 1e6, 3),
        "shown_mbps": None if shown_bps is None else round(shown_bps / 1e6, 3),
        "target_mbps": round(sum(targets) / len(targets) / 1e6, 3) if targets else None,
        # the receiver's loss reports (for the audio too in a video call: one process)
        "nack_packets": sum(int(n) for _, n in receiver.get("nack") or []),
        "plis": len(receiver.get("pli") or []),
        "warmup_s": WARMUP_S,
        "bitrate_steady_mbps": None if steady is None else round(steady / 1e6, 3),
        **encoded(encode),
        "timeline_1s": timeline(encode, rx, remb, t0 or 0.0, seconds),
        "frame_delay_ms": metrics.percentiles(delays),
        "parts_median_ms": {p: metrics.median_ms(v) for p, v in parts.items()},
        "parts_p95_ms": {p: metrics.percentiles(v)["p95"] for p, v in parts.items()},
        "_delays": delays,
    }


def audio(sender: Mapping[str, Any], receiver: Mapping[str, Any]) -> dict[str, Any]:
    """The audio direction from `sender` to `receiver`: one-way delay per tone mark."""
    marks = {int(k): float(v) for k, v in (sender.get("marks") or {}).items()}
    onsets = [(float(t), int(i)) for t, i in receiver.get("onsets") or []]
    matched = tones.match_marks(onsets, marks)
    return {
        "marks_sent": len(marks),
        "marks_heard": len(matched),
        "delay_ms": metrics.percentiles([d for _, d in matched]),
        "_delays": [d for _, d in matched],
    }


def summarize(
    app: str, device: Mapping[str, Any], server: Mapping[str, Any], fps: int, input_hz: float
) -> dict[str, Any]:
    """The session's summary (module docstring) from the device's and server's records."""
    out: dict[str, Any] = {"app": app, "fps": fps, "input_hz": input_hz}
    # a lost connection ends the session dark: the rest of it is one freeze
    lost_at, due = device.get("lost_at"), device.get("session_end")
    end = float(due) if lost_at is not None and due is not None else None
    down = video(server, device, end)
    samples: dict[str, list[float]] = {"frame_delay_ms": _ms(down.pop("_delays"))}
    out["video_down"] = down
    if app == "cloud-gaming":
        sent = {int(k): float(v) for k, v in (device.get("inputs_sent") or {}).items()}
        got = {int(k): float(v) for k, v in (server.get("inputs_received") or {}).items()}
        shown = [(float(s[0]), int(s[3])) for s in new_frames(device.get("shown") or [])]
        lat = metrics.input_to_display(sent, shown)
        one_way = [got[s] - sent[s] for s in got if s in sent]
        out["inputs_sent"] = len(sent)
        out["inputs_received"] = len(got)
        out["inputs_displayed"] = len(lat)
        out["input_to_display_ms"] = metrics.percentiles(list(lat.values()))
        out["input_delay_ms"] = metrics.percentiles(one_way)
        samples["input_to_display_ms"] = _ms([lat[s] for s in sorted(lat)])
        out["input_to_display_parts"] = latency_parts.decompose(device, server, fps)
    else:
        up = video(device, server, end)
        samples["frame_delay_up_ms"] = _ms(up.pop("_delays"))
        out["video_up"] = up
        a_down, a_up = audio(server, device), audio(device, server)
        samples["audio_delay_ms"] = _ms(a_down.pop("_delays"))
        samples["audio_delay_up_ms"] = _ms(a_up.pop("_delays"))
        out["audio_down"], out["audio_up"] = a_down, a_up
    out["samples"] = samples
    out["cpu_pct"] = {"server": _cpu_pct(server), "device": _cpu_pct(device)}
    return out


def _cpu_pct(record: Mapping[str, Any]) -> float | None:
    wall = float(record.get("wall_s") or 0.0)
    return round(100 * float(record.get("cpu_s") or 0.0) / wall, 1) if wall > 0 else None
