"""Cloud-gaming sessions on aiortc through the testbed (issue 40): all-hbc over a fixed
40 ms and 5 ms RTT / 200 Mbit/s HBC.

The Check (two 20-s sessions at the default bitrate, 10 Mbit/s at the start): every
input is delivered to the server and shown in a frame; none shows sooner than the RTT;
the latency is taken apart into parts measured by the pipeline's own probes
(dchlab.workloads.realtime.latency_parts) that add up to it per input (residual
< 0.01 ms); the kernel-stamped wire parts are at least the configured one-way delays;
the median latency is within the RTT + one frame interval + the median of the other
measured parts (encode, decode, jitter buffer, render, packetizing and the measured
waits for a CPU or an event loop) + TOLERANCE_MS; and from 40 ms to 5 ms the wire's
median drops by 35 ms (+- WIRE_DIFF_TOL_MS) and the median latency, with the change
of the measured non-wire parts' median taken out, by 35 ms (+- DIFF_TOL_MS).

Why the default bitrate now: the test used to run at a fixed 2 Mbit/s because the
bound, then RTT + frame interval + encode + decode + jitter buffer + sender queue +
output, missed by 7-36 ms at ~10 Mbit/s on the loaded 2-core machine: the time frames
and inputs waited for the CPU was in none of its parts. With the waits measured the
bound holds at the default rate (docs/realtime.md, the Check, has the sessions). The
medians are compared, not the p95s: the emulated links (userspace chanemu processes,
which wait for the CPU like everything else under `nice`) add up to ~50 ms to the wire
at the p95 on this machine, which the RTT does not bound.

The default video (5 s): it starts at the issue's 10 Mbit/s: the encoder's target is
10 Mbit/s until the receiver's congestion controller first reports (3 s in), and the
game scene costs the encoder that much, so the first 3 s deliver it (docs/realtime.md,
the video bitrate)."""

from __future__ import annotations

import pytest
from conftest import require_binaries, require_root

from dchlab.workloads.measure import RunSpec

pytestmark = pytest.mark.netns

RTT_MS = 40.0
#: The Check's other RTT (ms): 35 ms less.
RTT_LOW_MS = 5.0
#: Allowance over the Check's bound at the median (ms): the emulated link's own excess
#: over its configured delay (serialization, the emulator's scheduling: 1.7-3.1 ms at
#: the median, docs/realtime.md) and medians of parts not adding up exactly.
TOLERANCE_MS = 15.0
#: The wire's median difference between 40 and 5 ms RTT may miss 35 ms by this (ms).
WIRE_DIFF_TOL_MS = 5.0
#: The latency's median difference, less the non-wire parts' median difference, may
#: miss 35 ms by this (ms): medians of sums are not sums of medians.
DIFF_TOL_MS = 15.0
#: A part's timestamps may disagree with the whole by this much (ms): float rounding.
RESIDUAL_MS = 0.01
SESSION_S = 20
FPS = 30
SPEC = RunSpec(scheme="all-hbc", hbc="fixed:40ms/200mbit", llc="urllc")
SPEC_LOW = RunSpec(scheme="all-hbc", hbc="fixed:5ms/200mbit", llc="urllc")


def _require() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    pytest.importorskip("aiortc")


def _session_checked(spec: RunSpec, rtt_ms: float) -> dict:
    """One SESSION_S cloud-gaming session under `spec`: its decomposition, after the
    Check's assertions for one RTT."""
    from dchlab.workloads.realtime.run import realtime

    row = realtime(spec, "cloud-gaming", duration_s=SESSION_S, fps=FPS, input_hz=60)
    assert row["valid"], row["invalid_reason"]
    s = row["stats"]["realtime"]
    assert row["workload"] == "realtime" and row["page"] == "cloud-gaming"
    assert s["inputs_sent"] >= 0.9 * SESSION_S * 60
    assert s["inputs_received"] == s["inputs_sent"]  # a lossless link loses none
    assert s["inputs_displayed"] == s["inputs_sent"]
    samples = s["samples"]["input_to_display_ms"]
    assert len(samples) == s["inputs_displayed"]
    assert min(samples) >= rtt_ms
    d = s["input_to_display_parts"]
    assert d["inputs_displayed"] == s["inputs_displayed"]
    assert d["inputs_accounted"] >= 0.95 * d["inputs_displayed"], d["inputs_accounted"]
    assert max(abs(d["residual"]["min"]), abs(d["residual"]["max"])) <= RESIDUAL_MS
    assert row["i2d_residual_max_ms"] <= RESIDUAL_MS
    # the wire, kernel-stamped: at least the link's one-way delay each way
    for part in ("network_up", "network_down"):
        assert d["parts"][part]["min"] >= rtt_ms / 2 - 0.5, (part, d["parts"][part])
    assert d["parts"]["render_wait"]["max"] <= 1000 / FPS + 0.01
    # the Check: RTT + one frame interval + the other parts, each measured
    bound = rtt_ms + 1000 / FPS + d["rest"]["p50"] + TOLERANCE_MS
    assert d["whole"]["p50"] <= bound, (d["whole"], d["p50_ms"])
    if d["inputs_accounted"] == d["inputs_displayed"]:
        assert row["input_to_display_p50_ms"] == d["whole"]["p50"]
    assert d["wire"]["p50"] <= rtt_ms + TOLERANCE_MS, d["wire"]
    assert row["i2d_parts_p50_ms"] == d["p50_ms"] and row["i2d_parts_p95_ms"] == d["p95_ms"]
    assert row["frame_delay_p50_ms"] >= rtt_ms / 2
    assert row["bytes_hbc"] > 0 and row["fps_delivered"] > 0
    assert (row["start_bitrate_mbps"], row["max_bitrate_mbps"]) == (10.0, 20.0)
    print(  # what the assertions saw (pytest -s)
        f"RTT {rtt_ms} ms: whole p50 {d['whole']['p50']} (bound {bound:.1f} with tolerance),"
        f" wire p50 {d['wire']['p50']}, not_wire p50 {d['not_wire']['p50']},"
        f" waits p50/p95 {d['waits']['p50']}/{d['waits']['p95']} ms"
    )
    return dict(d)


def test_cloud_gaming_input_to_display_is_the_rtt_plus_the_measured_parts() -> None:
    _require()
    high = _session_checked(SPEC, RTT_MS)
    low = _session_checked(SPEC_LOW, RTT_LOW_MS)
    drop = RTT_MS - RTT_LOW_MS
    wire_drop = high["wire"]["p50"] - low["wire"]["p50"]
    assert abs(wire_drop - drop) <= WIRE_DIFF_TOL_MS, (high["wire"], low["wire"])
    whole_drop = high["whole"]["p50"] - low["whole"]["p50"]
    rest_drop = high["not_wire"]["p50"] - low["not_wire"]["p50"]
    assert abs(whole_drop - rest_drop - drop) <= DIFF_TOL_MS, (
        high["whole"], low["whole"], high["not_wire"], low["not_wire"],
    )  # fmt: skip


def test_cloud_gaming_video_starts_at_10_mbit() -> None:
    _require()
    from dchlab.workloads.realtime.run import realtime

    row = realtime(SPEC, "cloud-gaming", duration_s=5, fps=30, input_hz=60)
    assert row["valid"], row["invalid_reason"]
    assert row["start_bitrate_mbps"] == 10.0 and row["max_bitrate_mbps"] == 20.0
    timeline = row["stats"]["realtime"]["video_down"]["timeline_1s"]
    assert timeline["target_mbps"][0] == 10.0  # the start, before any REMB
    # 9-10 Mbit/s measured on a 200 Mbit/s link; CPU contention skips frames
    assert sum(timeline["rx_mbps"][:3]) / 3 >= 6.0, timeline
    assert row["key_frames"] >= 1 and row["frame_bytes_key_p50"] > row["frame_bytes_delta_p50"]
