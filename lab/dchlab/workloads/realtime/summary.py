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
  plus delivered frame rate, freezes, received bitrate and the encoder's target.
Cloud gaming adds input-to-display latency per input (dchlab.workloads.realtime.metrics)
and the inputs' one-way delay; video call adds audio delay per tone mark both ways.
`samples` keeps the per-input and per-frame values for CDFs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dchlab.workloads.realtime import metrics, tones

PARTS = ("sender_queue", "encode", "network", "jitter_buffer", "decode", "output")


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


def video(sender: Mapping[str, Any], receiver: Mapping[str, Any]) -> dict[str, Any]:
    """The video direction from `sender` to `receiver` (their records and probes)."""
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
    n_freeze, freeze_s = metrics.freezes(times)
    rx = [(float(t), int(b)) for t, b in (receiver.get("rx_bytes") or {}).get("video", [])]
    bps = metrics.bitrate_bps(rx)
    targets = [e[3] for e in encode.values()]
    fps = metrics.frame_rate(times)
    return {
        "frames_sent": len(frames),
        "frames_skipped": int(sender.get("skipped") or 0),
        "frames_shown": len(shown),
        "frames_unreadable": int(receiver.get("unreadable") or 0),
        "fps_delivered": None if fps is None else round(fps, 2),
        "freezes": n_freeze,
        "freeze_ms": round(freeze_s * 1000, 1),
        "bitrate_mbps": None if bps is None else round(bps / 1e6, 3),
        "target_mbps": round(sum(targets) / len(targets) / 1e6, 3) if targets else None,
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
    down = video(server, device)
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
    else:
        up = video(device, server)
        samples["frame_delay_up_ms"] = _ms(up.pop("_delays"))
        out["video_up"] = up
        a_down, a_up = audio(server, device), audio(device, server)
        samples["audio_delay_ms"] = _ms(a_down.pop("_delays"))
        samples["audio_delay_up_ms"] = _ms(a_up.pop("_delays"))
        out["audio_down"], out["audio_up"] = a_down, a_up
    out["samples"] = samples
    return out
