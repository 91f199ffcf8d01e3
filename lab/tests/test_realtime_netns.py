"""Cloud-gaming sessions on aiortc through the testbed (issue 40): all-hbc over a fixed
40 ms RTT / 200 Mbit/s HBC.

The latency's composition (10 s at a fixed 2 Mbit/s): every input is delivered to the
server and shown in a frame; no input shows sooner than the RTT (the input's way up
and the frame's way down cross the 40 ms link once each); the median input-to-display
latency is within the RTT plus the parts measured on the way (encode, decode, jitter
buffer, sender queue and output, and one frame interval of waiting for the next
capture). The video is held at 2 Mbit/s there so that what is checked is the path, not
the shared machine's CPU: at the default ~10 Mbit/s, sessions at load average 11-17.5 on
the 2 cores exceeded the bound by 7-36 ms over 60 s and by 37-418 ms over 10 s
(docs/realtime.md, the Check).

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
#: Scheduling slack on a shared 2-core machine (ms).
TOLERANCE_MS = 30.0
SPEC = RunSpec(scheme="all-hbc", hbc="fixed:40ms/200mbit", llc="urllc")


def _require() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    pytest.importorskip("aiortc")


def test_cloud_gaming_input_to_display_is_the_rtt_plus_the_measured_parts() -> None:
    _require()
    from dchlab.workloads.realtime.run import realtime

    row = realtime(SPEC, "cloud-gaming", duration_s=10, fps=30, input_hz=60,
                   start_mbps=2.0, max_mbps=2.0)  # fmt: skip
    assert row["valid"], row["invalid_reason"]
    s = row["stats"]["realtime"]
    assert row["workload"] == "realtime" and row["page"] == "cloud-gaming"
    assert s["inputs_sent"] >= 0.9 * 10 * 60
    assert s["inputs_received"] == s["inputs_sent"]  # a lossless link loses none
    assert s["inputs_displayed"] == s["inputs_sent"]
    samples = s["samples"]["input_to_display_ms"]
    assert len(samples) == s["inputs_displayed"]
    assert min(samples) >= RTT_MS
    parts = s["video_down"]["parts_median_ms"]
    assert None not in parts.values(), parts
    bound = RTT_MS + 1000 / 30 + sum(parts[p] for p in ("sender_queue", "encode",
            "jitter_buffer", "decode", "output")) + TOLERANCE_MS  # fmt: skip
    assert row["input_to_display_p50_ms"] <= bound, (row["input_to_display_p50_ms"], parts)
    assert row["frame_delay_p50_ms"] >= RTT_MS / 2
    assert row["bytes_hbc"] > 0 and row["fps_delivered"] > 0
    assert (row["start_bitrate_mbps"], row["max_bitrate_mbps"]) == (2.0, 2.0)
    assert row["target_mbps"] <= 2.0


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
