"""The real-time workload's pure parts (issue 40): the frame patch (also through a real
VP8 encode and decode at a starved bitrate), the capture-time unwrap, tone marks, the
latency / freeze / rate arithmetic and the per-frame parts, each against hand-computed
values."""

from __future__ import annotations

import numpy as np
import pytest

from dchlab.workloads.realtime import metrics, patch, summary, tones
from dchlab.workloads.realtime.scene import Scene, luma_of


def test_patch_round_trip_keeps_every_field() -> None:
    luma = np.full((360, 640), 128, dtype=np.uint8)
    for v in (
        patch.PatchValues(0, 0, 0),
        patch.PatchValues(1, 2, 3),
        patch.PatchValues(2**32 - 1, 123_456_789, 2**32 - 2),
    ):
        patch.draw(luma, v)
        assert patch.read(luma) == v


def test_patch_rejects_damage_and_noise() -> None:
    luma = np.zeros((360, 640), dtype=np.uint8)
    patch.draw(luma, patch.PatchValues(7, 8, 9))
    # Invert one payload cell (row 0, cell 20: a bit of the frame id): the CRC catches it.
    c = patch.CELL
    luma[:c, 20 * c : 21 * c] = 255 - luma[:c, 20 * c : 21 * c]
    assert patch.read(luma) is None
    noise = np.random.default_rng(3).integers(0, 256, size=(360, 640), dtype=np.uint8)
    assert patch.read(noise) is None
    assert patch.read(np.zeros((40, 640), dtype=np.uint8)) is None  # smaller than the patch
    with pytest.raises(ValueError, match="smaller than the 640x48 patch"):
        patch.draw(np.zeros((360, 320), dtype=np.uint8), patch.PatchValues(1, 1, 1))


def test_patch_survives_vp8_at_250_kbit() -> None:
    """aiortc's own VP8 encoder at its floor bitrate (250 kbit/s) and its decoder: every
    frame's patch reads back exactly, though the content around it is noise."""
    vpx = pytest.importorskip("aiortc.codecs.vpx")
    from aiortc.jitterbuffer import JitterFrame

    enc, dec = vpx.Vp8Encoder(), vpx.Vp8Decoder()
    enc.target_bitrate = vpx.MIN_BITRATE
    scene = Scene()
    read = []
    for n in range(40):
        values = patch.PatchValues(n, 1000 + n, 5_000_000 + n * 33_333)
        payloads, ts = enc.encode(scene.frame(n, values, 30))
        data = b"".join(vpx.vp8_depayload(p) for p in payloads)
        for f in dec.decode(JitterFrame(data, ts)):
            read.append(patch.read(luma_of(f)))
    assert read == [patch.PatchValues(n, 1000 + n, 5_000_000 + n * 33_333) for n in range(40)]


def test_capture_time_unwraps_against_the_reader_clock() -> None:
    # 4295.0 s is just past 2^32 µs (4294.967296 s): the patch holds 32_704 µs.
    t = 4295.0
    assert patch.now_us(t) == 4_295_000_000 - 2**32 == 32_704
    assert patch.unwrap_us(32_704, t + 0.080) == pytest.approx(t)
    # A capture just before the wrap read just after it.
    assert patch.unwrap_us(2**32 - 1_000, 4294.98) == pytest.approx(4294.966296)


def test_input_to_display_is_the_first_frame_reflecting_each_input() -> None:
    sent = {1: 10.000, 2: 10.016, 3: 10.033, 4: 10.050}
    # display time, seq in the patch (out of order on purpose; seq 2 is never drawn:
    # frame 3 reflects it too, the server drew the latest seq it had)
    shown = [(10.090, 3), (10.050, 0), (10.070, 1), (10.100, 3)]
    got = metrics.input_to_display(sent, shown)
    assert got.keys() == {1, 2, 3}  # 4 undelivered
    assert got[1] == pytest.approx(0.070)
    assert got[2] == pytest.approx(0.074)
    assert got[3] == pytest.approx(0.057)


def test_freezes_rate_and_bitrate() -> None:
    # gaps 0.125, 0.25, 0.125, 0.3125, 0.1875 (exact binary fractions): two are > 0.2 s
    assert metrics.freezes([0.0, 0.125, 0.375, 0.5, 0.8125, 1.0]) == (2, 0.5625)
    assert metrics.frame_rate([0.0, 0.5, 1.0]) == pytest.approx(2.0)
    assert metrics.frame_rate([1.0]) is None
    assert metrics.bitrate_bps([(0.0, 1000), (1.0, 1000), (2.0, 500)]) == pytest.approx(10_000)
    p = metrics.percentiles([0.010 * k for k in range(1, 11)])  # 10 ... 100 ms
    # numpy's linear interpolation: p50 between 50 and 60; p95 at rank 8.55 -> 95.5
    assert p == {"p50": 55.0, "p95": 95.5, "p99": 99.1, "mean": 55.0}


def test_tone_marks_are_found_and_matched() -> None:
    """The sender's frames, delayed by 30 ms + 300 samples (a frame boundary is not
    where the receiver sees it) and received one 20 ms frame at a time: every mark's
    delay is 30 ms + 300/48000 s = 36.25 ms (plus the threshold crossing's lag)."""
    shift = 300
    sent = [tones.frame_samples(n) for n in range(3 * tones.MARK_PERIOD_FRAMES)]
    t0 = 100.0
    frame_s = tones.FRAME_SAMPLES / tones.SAMPLE_RATE
    marks = {k: t0 + n * frame_s for n, (_, k) in enumerate(sent) if k is not None}
    assert sorted(marks) == [0, 1, 2]
    stream = np.concatenate([np.zeros(shift, dtype=np.int16), *(s for s, _ in sent)])
    det = tones.OnsetDetector()
    for i in range(len(stream) // tones.FRAME_SAMPLES):
        part = stream[i * tones.FRAME_SAMPLES : (i + 1) * tones.FRAME_SAMPLES]
        det.feed(part, t0 + 0.030 + i * frame_s)
    assert [idx for _, idx in det.onsets] == [0, 1, 2]  # 600, 900, 1200 Hz
    got = tones.match_marks(det.onsets, marks)
    assert [k for k, _ in got] == [0, 1, 2]
    # The onset is where the sine first exceeds ONSET (amplitude/4): asin(1/4)/(2 pi f)
    # after the burst's start, 0.067 ms at 600 Hz: 4 samples (0.083 ms) at most here.
    for _, d in got:
        assert 0 <= d - (0.030 + shift / tones.SAMPLE_RATE) <= 4 / tones.SAMPLE_RATE + 1e-9


def test_frame_parts_join_both_ends_records() -> None:
    """Frame 1 of a 30 fps stream (tick 3000): captured 10.000, encoded 10.002-10.008,
    first packet 10.030, decoded 10.070-10.074, shown 10.075; the receiver's media time
    is RTP - origin (origin 1000, so RTP 4000 is media time 3000 = frame 1)."""
    sender = {
        "frames": {"1": 10.000},
        "tick": 3000,
        "encode": {"2999": [10.002, 10.008, 4000, 2_000_000]},  # the encoder's rounding
    }
    receiver = {
        "shown": [[10.075, 3000, 1, 7, 10.000], [10.090, 3000, 1, 7, 10.000]],
        "decode": {"3000": [10.070, 10.074]},
        "first_packet": {"4000": 10.030},
        "rtp_origin": 1000,
        "rx_bytes": {"video": [[10.0, 1000], [10.5, 1000]]},
    }
    v = summary.video(sender, receiver)
    assert v["frames_shown"] == 1  # the second display of frame 1 is not a new frame
    assert v["frame_delay_ms"]["p50"] == 75.0
    assert v["parts_median_ms"] == {
        "sender_queue": 2.0,
        "encode": 6.0,
        "network": 22.0,
        "jitter_buffer": 40.0,
        "decode": 4.0,
        "output": 1.0,
    }
    assert v["bitrate_mbps"] == 0.032  # 2000 B * 8 / 0.5 s
    assert v["target_mbps"] == 2.0


def test_a_session_is_judged_by_what_it_showed() -> None:
    from dchlab.workloads.realtime.run import columns, judge

    ok = {
        "video_down": {"frames_shown": 900, "frame_delay_ms": {"p50": 70.0, "p95": 90.0},
                       "parts_median_ms": {"encode": 5.0, "decode": 1.0, "jitter_buffer": 35.0}},
        "inputs_displayed": 1800,
        "input_to_display_ms": {"p50": 110.0, "p95": 150.0, "p99": 200.0},
    }  # fmt: skip
    assert judge("cloud-gaming", ok) == ""
    assert judge("cloud-gaming", {**ok, "inputs_displayed": 0}) == "no input event was displayed"
    assert judge("video-call", ok) == (
        "no device video frame was shown; no tone mark heard (audio_down); "
        "no tone mark heard (audio_up)"
    )
    c = columns("cloud-gaming", ok)
    assert (c.input_to_display_p95_ms, c.frame_delay_p50_ms, c.jitter_buffer_ms) == (
        150.0,
        70.0,
        35.0,
    )
    assert c.audio_delay_p50_ms is None
