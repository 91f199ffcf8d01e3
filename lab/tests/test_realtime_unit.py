"""The real-time workload's pure parts (issue 40): the frame patch (also through a real
VP8 encode and decode at a starved bitrate), the capture-time unwrap, tone marks, the
latency / freeze / rate arithmetic and the per-frame parts, each against hand-computed
values."""

from __future__ import annotations

import numpy as np
import pytest

from dchlab.workloads.realtime import metrics, patch, stack, summary, tones
from dchlab.workloads.realtime.scene import GameScene, Scene, luma_of


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


@pytest.mark.parametrize("scene_cls", [Scene, GameScene])
def test_patch_survives_vp8_at_250_kbit(scene_cls: type[Scene]) -> None:
    """aiortc's own VP8 encoder at its floor bitrate (250 kbit/s) and its decoder: every
    frame's patch reads back exactly, though the content around it is noise (the game's
    scene: grain over the whole frame too)."""
    vpx = pytest.importorskip("aiortc.codecs.vpx")
    from aiortc.jitterbuffer import JitterFrame

    enc, dec = vpx.Vp8Encoder(), vpx.Vp8Decoder()
    enc.target_bitrate = vpx.MIN_BITRATE
    scene = scene_cls()
    read = []
    for n in range(40):
        values = patch.PatchValues(n, 1000 + n, 5_000_000 + n * 33_333)
        payloads, ts = enc.encode(scene.frame(n, values, 30))
        data = b"".join(vpx.vp8_depayload(p) for p in payloads)
        for f in dec.decode(JitterFrame(data, ts)):
            read.append(patch.read(luma_of(f)))
    assert read == [patch.PatchValues(n, 1000 + n, 5_000_000 + n * 33_333) for n in range(40)]


def _encoded_mbps(scene: Scene, target_bps: int, frames: int = 45, skip: int = 15) -> float:
    """Mbit/s aiortc's VP8 encoder makes of `scene` at 30 fps and `target_bps`, over
    the frames after the first `skip` (the key frame and the rate control's start)."""
    vpx = pytest.importorskip("aiortc.codecs.vpx")
    enc = vpx.Vp8Encoder()
    enc.target_bitrate = target_bps
    sizes = []
    for n in range(frames):
        payloads, _ = enc.encode(scene.frame(n, patch.PatchValues(n, 0, 0), 30))
        sizes.append(sum(len(p) for p in payloads))
    return 8 * sum(sizes[skip:]) * 30 / (frames - skip) / 1e6


def test_the_game_scene_costs_the_encoder_its_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's >= 10 Mbit/s cloud-gaming video: at a 10 Mbit/s target the game's
    scene is encoded at >= 8 Mbit/s (9.2 measured, docs/realtime.md) and without a
    target (40 Mbit/s) at well over it (23.6), so its bitrate is the congestion
    controller's and the cap's; the camera's scene saturates at ~5.5 Mbit/s (its one
    noise square is all the encoder cannot predict), which is why cloud gaming has its
    own scene."""
    vpx = pytest.importorskip("aiortc.codecs.vpx")
    monkeypatch.setattr(vpx, "MAX_BITRATE", 40_000_000)
    assert _encoded_mbps(GameScene(), 10_000_000) >= 8.0
    assert _encoded_mbps(GameScene(), 40_000_000) >= 15.0
    assert _encoded_mbps(Scene(), 40_000_000) <= 7.0


def test_the_game_scene_pans_and_keeps_its_chroma() -> None:
    scene = GameScene()
    assert scene.camera(0) == (320, 180)  # sin(0): the middle of the world
    # frame 60: a quarter of the 240-frame horizontal pan (x at the right end, 640);
    # y = 180 * (1 + sin(2 pi 60 / 330)) = 343.7, made even: 342
    assert scene.camera(60) == (640, 342)
    a, b = scene.render(0, patch.PatchValues(0, 0, 0)), scene.render(1, patch.PatchValues(1, 0, 0))
    assert a.shape == b.shape == (540, 640)
    assert patch.read(a[:360]) == patch.PatchValues(0, 0, 0)
    assert a[360:].std() > 10  # coloured (the camera scene's chroma is flat 128)
    # grain changes every pixel between frames, beyond the pan (a few pixels)
    assert (a[200:300, 100:500] != b[200:300, 100:500]).mean() > 0.8


def test_key_frames_are_told_from_delta_frames() -> None:
    """RFC 7741 §4.2's descriptor, then RFC 6386 §9.1's frame tag (bit 0: 0 = key)."""
    vpx = pytest.importorskip("aiortc.codecs.vpx")
    enc = vpx.Vp8Encoder()
    scene = Scene()
    kinds = []
    for n, force in ((0, False), (1, False), (2, True), (3, False)):
        payloads, _ = enc.encode(scene.frame(n, patch.PatchValues(n, 0, 0), 30), force)
        kinds.append(stack.key_frame(payloads))
    assert kinds == [1, 0, 1, 0]
    assert stack.key_frame([]) == -1 and stack.key_frame([b"\x78xx"]) == -1


def test_bitrates_start_aiortc_encoders_under_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    vpx = pytest.importorskip("aiortc.codecs.vpx")
    monkeypatch.setattr(vpx, "DEFAULT_BITRATE", vpx.DEFAULT_BITRATE)
    monkeypatch.setattr(vpx, "MAX_BITRATE", vpx.MAX_BITRATE)
    monkeypatch.setattr(vpx, "MIN_BITRATE", vpx.MIN_BITRATE)
    stack.set_bitrates(stack.Bitrates(10_000_000, 12_000_000))
    enc = vpx.Vp8Encoder()
    assert enc.target_bitrate == 10_000_000  # aiortc's own start: 500 kbit/s
    enc.target_bitrate = 30_000_000  # a REMB above the cap
    assert enc.target_bitrate == 12_000_000
    enc.target_bitrate = 100_000  # below aiortc's floor, which stays
    assert enc.target_bitrate == 250_000
    stack.set_bitrates(stack.Bitrates(10_000_000, 12_000_000, min_bps=8_000_000))
    enc.target_bitrate = 1_000_000  # a fixed-rate service's floor
    assert enc.target_bitrate == 8_000_000
    assert stack.BITRATES["cloud-gaming"] == stack.Bitrates(10_000_000, 20_000_000)
    with pytest.raises(ValueError, match=r"start \(3 bit/s\) <= max \(2 bit/s\)"):
        stack.Bitrates(3, 2)


def test_the_target_ladder_rebuilds_the_encoder_only_across_steps() -> None:
    """Steps 10 x 1.25^k Mbit/s under a 12.5 Mbit/s cap: an estimate of 9.8 is on step
    8, 11 on 10, 13 at the cap; from 0.5 Mbit/s (a video call's start) 1.0 is on
    0.5 x 1.25^3 = 0.977. Installed on an encoder class, a REMB goes through it."""
    m = 1_000_000
    assert [stack.on_ladder(round(x * m), 10 * m, 12_500_000) for x in (9.8, 10, 11, 13)] == [
        8 * m, 10 * m, 10 * m, 12_500_000,
    ]  # fmt: skip
    assert stack.on_ladder(m, m // 2, 20 * m) == 976_562
    # on step 10 an estimate of 9.1 (9% below) keeps it, 8.9 (11% below) goes to 8;
    # from step 8 an estimate of 10 goes up to 10
    assert stack.on_ladder(9_100_000, 10 * m, 20 * m, current=10 * m) == 10 * m
    assert stack.on_ladder(8_900_000, 10 * m, 20 * m, current=10 * m) == 8 * m
    assert stack.on_ladder(10 * m, 10 * m, 20 * m, current=8 * m) == 10 * m
    vpx = pytest.importorskip("aiortc.codecs.vpx")

    class Encoder(vpx.Vp8Encoder):  # type: ignore[misc, name-defined]
        pass

    stack._ladder_target(Encoder)
    old = (vpx.DEFAULT_BITRATE, vpx.MAX_BITRATE)
    try:
        stack.set_bitrates(stack.Bitrates(10 * m, 12_500_000))
        enc = Encoder()
        enc.target_bitrate = 11_900_000
        assert enc.target_bitrate == 10 * m
        enc.target_bitrate = 9_500_000  # 5% below step 10: held
        assert enc.target_bitrate == 10 * m
        enc.target_bitrate = 7_000_000
        assert enc.target_bitrate == 6_400_000
    finally:
        vpx.DEFAULT_BITRATE, vpx.MAX_BITRATE = old


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


def test_a_lost_connection_ends_the_session_in_one_freeze() -> None:
    """Frames at 0, 0.125, 0.25, then the connection is lost and the session was due
    to end at 1.25: the dark 1.0 s is one freeze; without a loss (no `end`) the tail
    is not a freeze, and an end before the last frame adds nothing."""
    assert metrics.freezes([0.0, 0.125, 0.25], end=1.25) == (1, 1.0)
    assert metrics.freezes([0.0, 0.125, 0.25]) == (0, 0.0)
    assert metrics.freezes([0.0, 0.125, 0.25], end=0.25) == (0, 0.0)
    assert metrics.freezes([0.0, 0.125, 0.25], end=0.375) == (0, 0.0)  # 0.125 s: no freeze
    # the same through the summary: the device's record says when it was lost
    shown = [[t, 3000 * i, i, i + 1, t - 0.05] for i, t in enumerate((10.0, 10.125, 10.25))]
    device = {"shown": shown, "session_end": 11.25}
    held = summary.summarize("cloud-gaming", device, {}, 30, 60.0)["video_down"]
    lost = summary.summarize("cloud-gaming", {**device, "lost_at": 10.3}, {}, 30, 60.0)
    assert (held["freezes"], held["freeze_ms"]) == (0, 0.0)
    assert (lost["video_down"]["freezes"], lost["video_down"]["freeze_ms"]) == (1, 1000.0)


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
    assert v["key_frames"] == 0 and v["frame_bytes"]["delta"]["p50"] is None  # 4 fields


def test_the_bitrate_shown_counts_each_displayed_frame_once() -> None:
    """Frames 0, 1, 2 (4000, 6000, 2000 B) displayed at 10.0, 10.5, 11.0, frame 1
    displayed twice and frame 3 (20 000 B) encoded but never displayed: the player saw
    (4000 + 6000 + 2000) B * 8 / 1.0 s = 0.096 Mbit/s, whatever the wire carried
    (here 0.4 Mbit/s: 50 000 B over 1 s, retransmissions included)."""
    enc = {str(i * 3000): [10.0, 10.005, b, 2_000_000]
           for i, b in enumerate((4000, 6000, 2000, 20_000))}  # fmt: skip
    shown = [[10.0, 0, 0, 1, 9.9], [10.5, 3000, 1, 2, 10.4], [10.6, 3000, 1, 2, 10.4],
             [11.0, 6000, 2, 3, 10.9]]  # fmt: skip
    v = summary.video(
        {"frames": {str(i): 9.9 + i / 2 for i in range(4)}, "tick": 3000, "encode": enc},
        {"shown": shown, "rx_bytes": {"video": [[10.0, 25_000], [11.0, 25_000]]}},
    )
    assert v["frames_shown"] == 3
    assert v["shown_mbps"] == 0.096
    assert v["bitrate_mbps"] == 0.4
    # nothing displayed, or one frame: no span to divide by
    one = summary.video({"tick": 3000, "encode": enc}, {"shown": shown[:1]})
    assert one["shown_mbps"] is None


def test_bitrate_timeline_key_frames_and_the_steady_bitrate() -> None:
    """Frames captured at 100.0 + n/30 for 7 s; a 30 kB key frame at 100.0 and 10 kB
    delta frames (target 8 Mbit/s, then 9 from 103.0), CPU 4 ms each; the receiver
    gets 1000 B every 10 ms from 100.0 (0.8 Mbit/s), sends REMBs at 101.5 (8.5
    Mbit/s) and 103.2, 103.7 (9.0, 9.5), NACKs 3 then 2 packets and one PLI."""
    n = 7 * 30
    frames = {str(i): 100.0 + i / 30 for i in range(n)}
    encode = {
        str(i * 3000): [t, t + 0.005, 30_000 if i == 0 else 10_000,
                        8_000_000 if t < 103.0 else 9_000_000, 0.004, 1 if i == 0 else 0]
        for i, t in ((int(k), v) for k, v in frames.items())
    }  # fmt: skip
    rx = [[100.0 + k / 100, 1000] for k in range(700)]
    remb = [[101.5, 8_500_000], [103.2, 9_000_000], [103.7, 9_500_000]]
    v = summary.video(
        {"frames": frames, "tick": 3000, "encode": encode},
        {"shown": [], "rx_bytes": {"video": rx}, "remb": remb, "nack": [[101.0, 3], [102.0, 2]],
         "pli": [101.1]},
    )  # fmt: skip
    assert (v["nack_packets"], v["plis"]) == (5, 1)
    assert v["key_frames"] == 1
    assert v["frame_bytes"]["key"]["p50"] == 30_000.0
    assert v["frame_bytes"]["delta"]["p50"] == 10_000.0
    assert v["encode_cpu_ms"]["p50"] == 4.0
    # after the 5-s warm-up: arrivals 105.00..106.99, 200 x 1000 B over 1.99 s
    assert v["warmup_s"] == summary.WARMUP_S == 5.0
    assert v["bitrate_steady_mbps"] == round(8 * 200_000 / 1.99 / 1e6, 3)
    tl = v["timeline_1s"]
    assert len(tl["rx_mbps"]) == 7  # the last arrival, 106.99, is in second 6
    assert tl["rx_mbps"][0] == 0.8 and tl["rx_mbps"][6] == 0.8
    assert tl["target_mbps"][:4] == [8.0, 8.0, 8.0, 9.0]
    assert tl["remb_mbps"] == [None, 8.5, 8.5, 9.5, 9.5, 9.5, 9.5]


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
    assert c.connection_lost_s is None
    # a lost connection is the scheme's outcome, not a failed measurement: still valid
    lost = {**ok, "connection_lost_s": 31.5}
    assert judge("cloud-gaming", lost) == ""
    assert columns("cloud-gaming", lost).connection_lost_s == 31.5
    assert (c.input_to_display_p95_ms, c.frame_delay_p50_ms, c.jitter_buffer_ms) == (
        150.0,
        70.0,
        35.0,
    )
    assert c.audio_delay_p50_ms is None


def test_each_ends_cpu_share_of_its_session() -> None:
    """3 s of CPU over a 60-s session is 5% of a core; 75 s over 60 s is 125% (threads
    on both cores); an end that recorded no session has no share."""
    s = summary.summarize(
        "cloud-gaming", {"cpu_s": 75.0, "wall_s": 60.0}, {"cpu_s": 3.0, "wall_s": 60.0}, 30, 60.0
    )
    assert s["cpu_pct"] == {"server": 5.0, "device": 125.0}
    assert summary.summarize("cloud-gaming", {}, {}, 30, 60.0)["cpu_pct"] == {
        "server": None,
        "device": None,
    }


def test_bitrate_options_fill_in_the_apps_defaults() -> None:
    from dchlab.workloads.realtime.device import bitrates_of

    m = 1_000_000
    assert bitrates_of("cloud-gaming", None, None, None) == stack.Bitrates(10 * m, 20 * m)
    assert bitrates_of("cloud-gaming", None, 5.0, None) == stack.Bitrates(5 * m, 5 * m)
    assert bitrates_of("video-call", 0.1, None, None) == stack.Bitrates(100_000, 20 * m, 100_000)
    assert bitrates_of("cloud-gaming", 10.0, None, 10.0) == stack.Bitrates(10 * m, 20 * m, 10 * m)
    with pytest.raises(ValueError, match="<= max"):
        bitrates_of("cloud-gaming", 12.0, 10.0, None)
