"""Input-to-display latency taken apart: per input, the time between consecutive
events of its way from the device's input to the frame that shows it, so that the
parts add up to the whole.

Rule: every part is the difference of two timestamps the media pipeline's probes
took on one clock (time.monotonic(): device and server are namespaces of one
machine), in this order along the path (s = the input, s' = the first input with a
seq >= s the server received, whose arrival made the server's patch show >= s; F =
the first frame displayed whose patch shows >= s, as metrics.input_to_display):

  superseded      send(s') - send(s): 0 unless s arrived after s' (or never)
  input_send_wait send(s') -> its DTLS datagram left the device (device's loop)
  network_up      left the device -> the server's kernel received it (the wire)
  input_rx_wait   kernel -> the data channel handed it to the server (server's loop)
  render_wait     -> the next frame slot (or the first capture, if sooner); at
                  most one frame interval
  render_late     -> the first frame captured after it (the loop late to its slot,
                  slots skipped)
  undisplayed     -> F's capture (frames captured after it that were never shown)
  render          F's capture -> its picture handed to aiortc
  encode_queue    -> the encoder thread starts on it
  encode          -> the encoder returns
  send_wait       -> its first packet leaves (the loop takes the encoder's result)
  packetize       -> its last packet leaves (aiortc sends a frame's packets back
                  to back: SRTP per packet, no pacer)
  network_down    -> the device's kernel received the last packet before the frame's
                  release, a retransmission included (the wire, and its NACK round
                  trip; packets of an already released frame do not count)
  rx_wait         -> the device's loop handled that packet
  jitter_buffer   -> the jitter buffer released the frame (aiortc releases a frame
                  when the next frame's first packet arrives: ~one frame interval)
  decode_queue    -> the decoder thread starts on it
  decode          -> the decoder returns
  output          -> the application reads the patch (display)

`WAITS` are the parts that are time waiting for a CPU or an event loop (the shared
machine's starvation); `WIRE` the emulated links'. An input whose chain lacks a
timestamp (a probe that saw nothing) is left out (`inputs_accounted` counts the
rest). `residual` = whole - sum of parts per input: 0 up to float rounding when the
parts cover the path; anything else is a bug in the accounting.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dchlab.workloads.realtime import metrics

PARTS = (
    "superseded", "input_send_wait", "network_up", "input_rx_wait", "render_wait",
    "render_late", "undisplayed", "render", "encode_queue", "encode", "send_wait",
    "packetize", "network_down", "rx_wait", "jitter_buffer", "decode_queue", "decode",
    "output",
)  # fmt: skip
WAITS = (
    "input_send_wait", "input_rx_wait", "render_late", "encode_queue", "send_wait",
    "rx_wait", "decode_queue", "output",
)  # fmt: skip
WIRE = ("network_up", "network_down")
_WRAP = 1 << 32


def _ints(d: Mapping[Any, Any] | None) -> dict[int, Any]:
    return {int(k): v for k, v in (d or {}).items()}


def _first_receiver(sent: dict[int, float], got: dict[int, float]) -> dict[int, int]:
    """{s: s'} for each sent seq s: s' the seq >= s the server received first."""
    out: dict[int, int] = {}
    best: int | None = None  # the earliest-received seq among those >= s
    for s in sorted(set(sent) | set(got), reverse=True):
        if s in got and (best is None or got[s] <= got[best]):
            best = s
        if s in sent and best is not None:
            out[s] = best
    return out


def _frame_chains(device: Mapping[str, Any], server: Mapping[str, Any]) -> dict[int, list[float]]:
    """{frame id: [capture, rendered, encode start, encode end, first sent, last sent,
    kernel last, loop last, released, decode start, decode end, display]} of each
    frame displayed whose every timestamp is known."""
    frames, rendered = _ints(server.get("frames")), _ints(server.get("rendered"))
    tick = int(server.get("tick") or 1)
    encode = {round(ts / tick): v for ts, v in _ints(server.get("encode")).items()}
    origin, ssrc = device.get("rtp_origin"), device.get("video_ssrc")
    if origin is None or ssrc is None:
        return {}
    sent = _ints((server.get("sent_rtp") or {}).get(str(ssrc)))
    kernel = _ints((device.get("rx_kernel_rtp") or {}).get(str(ssrc)))
    last, released = _ints(device.get("last_packet")), _ints(device.get("released"))
    # the latest arrival before the release, retransmissions included (stack.Probes)
    kernel_last = _ints(device.get("rx_kernel_last"))
    decode = _ints(device.get("decode"))
    out: dict[int, list[float]] = {}
    seen: set[int] = set()
    for t, pts, fid, _seq, _t_patch in sorted(device.get("shown") or [], key=lambda s: s[0]):
        fid, pts = int(fid), int(pts)
        if fid in seen:
            continue
        seen.add(fid)
        rtp = (pts + int(origin)) % _WRAP
        got: list[Any] = [frames.get(fid), rendered.get(fid), encode.get(fid), sent.get(rtp),
                          kernel.get(rtp), last.get(rtp), released.get(rtp), decode.get(pts)]  # fmt: skip
        if any(g is None for g in got):
            continue
        cap, ren, enc, snt, ker, lst, rel, dec = got
        ker_last = kernel_last.get(rtp, ker[1])
        out[fid] = [float(cap), float(ren), float(enc[0]), float(enc[1]), float(snt[0]),
                    float(snt[1]), float(ker_last), float(lst), float(rel), float(dec[0]),
                    float(dec[1]), float(t)]  # fmt: skip
    return out


def per_input(
    device: Mapping[str, Any], server: Mapping[str, Any], fps: int
) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
    """({seq: whole latency s}, {seq: {part: s}}) of the inputs displayed (the whole
    as metrics.input_to_display; parts only for inputs whose chain is complete)."""
    sent = {int(k): float(v) for k, v in (device.get("inputs_sent") or {}).items()}
    got = {int(k): float(v) for k, v in (server.get("inputs_received") or {}).items()}
    wire_in = {int(k): float(v) for k, v in (server.get("inputs_wire") or {}).items()}
    shown = sorted(device.get("shown") or [], key=lambda s: s[0])
    firsts: dict[int, list[Any]] = {}
    for s in shown:
        firsts.setdefault(int(s[2]), s)
    new = sorted(firsts.values(), key=lambda s: s[0])
    display = [(float(s[0]), int(s[3])) for s in new]
    whole = metrics.input_to_display(sent, display)
    frame_of = _frame_of(sent, [(float(s[0]), int(s[3]), int(s[2])) for s in new])
    chains = _frame_chains(device, server)
    captures = sorted(float(v) for v in (server.get("frames") or {}).values())
    dtls = sorted(float(t) for t in device.get("dtls_sent") or [])
    start, period = server.get("slot_start"), 1.0 / fps
    first_rx = _first_receiver(sent, got)
    parts: dict[int, dict[str, float]] = {}
    for s, fid in frame_of.items():
        chain, s2 = chains.get(fid), first_rx.get(s)
        if chain is None or s2 is None or s2 not in wire_in or start is None:
            continue
        i = bisect.bisect_left(dtls, sent[s2])
        j = bisect.bisect_left(captures, got[s2])
        if i == len(dtls) or j == len(captures):
            continue
        left, cap1 = dtls[i], captures[j]
        due = float(start) + math.ceil((got[s2] - float(start)) / period) * period
        slot = min(due, cap1)
        cap, ren, enc0, enc1, snt0, snt1, ker, lst, rel, dec0, dec1, t = chain
        parts[s] = dict(zip(PARTS, (
            sent[s2] - sent[s], left - sent[s2], wire_in[s2] - left, got[s2] - wire_in[s2],
            slot - got[s2], cap1 - slot, cap - cap1, ren - cap, enc0 - ren, enc1 - enc0,
            snt0 - enc1, snt1 - snt0, ker - snt1, lst - ker, rel - lst, dec0 - rel,
            dec1 - dec0, t - dec1,
        ), strict=True))  # fmt: skip
    return whole, parts


def _frame_of(sent: dict[int, float], shown: Sequence[tuple[float, int, int]]) -> dict[int, int]:
    """{seq: frame id of the first frame of `shown` ([(display, patch seq, frame id)]
    in display order) whose patch seq >= seq} (metrics.input_to_display's frame)."""
    out: dict[int, int] = {}
    pending, i, best = sorted(sent), 0, 0
    for _t, seq, fid in shown:
        if seq <= best:
            continue
        best = seq
        while i < len(pending) and pending[i] <= best:
            out[pending[i]] = fid
            i += 1
    return out


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    out = metrics.percentiles(values)
    out["min"] = round(min(values) * 1000, 2) if values else None
    out["max"] = round(max(values) * 1000, 2) if values else None
    return out


def decompose(device: Mapping[str, Any], server: Mapping[str, Any], fps: int) -> dict[str, Any]:
    """The session's input-to-display decomposition (module docstring), in ms: per
    part p50/p95 (`p50_ms`, `p95_ms`) and all stats (`parts`: p50, p95, p99, mean,
    min, max), the whole over the inputs accounted, `wire` (network_up +
    network_down per input), `waits` (the sum of WAITS per input), `rest` (whole -
    wire - render_wait: what the RTT and one frame interval do not bound), `not_wire`
    (whole - wire),
    `without_waits` (whole - waits) and `residual` (whole - sum of parts)."""
    whole, parts = per_input(device, server, fps)
    seqs = sorted(parts)
    col = {p: [parts[s][p] for s in seqs] for p in PARTS}
    total = [whole[s] for s in seqs]
    wire = [sum(parts[s][p] for p in WIRE) for s in seqs]
    waits = [sum(parts[s][p] for p in WAITS) for s in seqs]
    residual = [whole[s] - sum(parts[s].values()) for s in seqs]
    stats = {p: _stats(v) for p, v in col.items()}
    return {
        "inputs_displayed": len(whole),
        "inputs_accounted": len(seqs),
        "frame_interval_ms": round(1000 / fps, 2),
        "parts": stats,
        "p50_ms": {p: stats[p]["p50"] for p in PARTS},
        "p95_ms": {p: stats[p]["p95"] for p in PARTS},
        "whole": _stats(total),
        "wire": _stats(wire),
        "waits": _stats(waits),
        "rest": _stats(
            [w - n - parts[s]["render_wait"] for w, n, s in zip(total, wire, seqs, strict=True)]
        ),
        "not_wire": _stats([w - n for w, n in zip(total, wire, strict=True)]),
        "without_waits": _stats([w - x for w, x in zip(total, waits, strict=True)]),
        "residual": _stats(residual),
    }
