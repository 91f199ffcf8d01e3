"""The video jitter buffer's frame release rules (dchlab.workloads.realtime.frame_release)
on synthetic RTP packets: no network, no time.

`next` must be aiortc's own rule exactly (aiortc/jitterbuffer.py `_remove_frame`,
checked against it on random arrival orders); `marker` releases a frame on the packet
that carries the RTP marker bit (RFC 3550 §5.1: "for video, the end of a frame"), as
libwebrtc's packet buffer does.
"""

from __future__ import annotations

import pytest

pytest.importorskip("aiortc")

from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket
from hypothesis import given, settings
from hypothesis import strategies as st

from dchlab.workloads.realtime import stack
from dchlab.workloads.realtime.frame_release import FRAME_RELEASES, check_rule, release_frame

#: VP8's RTP clock ticks per frame at 30 fps (90 kHz / 30).
TICKS = 3000


def packet(seq: int, ts: int, marker: bool = False) -> RtpPacket:
    p = RtpPacket(payload_type=96, marker=int(marker), sequence_number=seq, timestamp=ts)
    p._data = f"{seq}:".encode()  # type: ignore[attr-defined]  # the depayloaded bytes
    return p


def frames(first_seq: int, sizes: list[int], markers: bool = True) -> list[RtpPacket]:
    """Frames of `sizes` packets in sequence order, the marker bit on each frame's last
    packet (as aiortc's sender, rtcrtpsender.py) when `markers`."""
    out, seq = [], first_seq
    for n, size in enumerate(sizes):
        for i in range(size):
            out.append(packet(seq & 0xFFFF, (n + 1) * TICKS, markers and i == size - 1))
            seq += 1
    return out


class RuleBuffer(JitterBuffer):
    """aiortc's video buffer with the release rule under test."""

    def __init__(self, rule: str) -> None:
        super().__init__(capacity=512, is_video=True)
        self.rule = rule

    def _remove_frame(self, sequence_number: int):  # type: ignore[no-untyped-def]
        return release_frame(self, self.rule)


def released(buf: JitterBuffer, packets: list[RtpPacket]) -> list[tuple[int, int, bytes]]:
    """(index of the packet whose add released it, RTP timestamp, data) per frame."""
    out = []
    for i, p in enumerate(packets):
        _pli, frame = buf.add(p)
        if frame is not None:
            out.append((i, frame.timestamp, frame.data))
    return out


@pytest.fixture(autouse=True)
def _default_rule():
    # stack's rule is process-wide; every test leaves it at the default
    yield
    stack.set_frame_release("next")


def test_marker_releases_on_the_frames_last_packet() -> None:
    # frame 1: seq 100..102 (marker on 102); frame 2: 103..104
    pkts = frames(100, [3, 2])
    assert released(RuleBuffer("marker"), pkts) == [
        (2, TICKS, b"100:101:102:"),  # on its own last packet
        (4, 2 * TICKS, b"103:104:"),
    ]


def test_next_waits_for_the_next_frames_first_packet() -> None:
    # the same packets under aiortc's rule: frame 1 leaves on 103, frame 2 never (no
    # frame 3 follows): the wait the marker rule removes
    pkts = frames(100, [3, 2])
    assert released(RuleBuffer("next"), pkts) == [(3, TICKS, b"100:101:102:")]
    assert released(JitterBuffer(capacity=512, is_video=True), frames(100, [3, 2])) == [
        (3, TICKS, b"100:101:102:")
    ]


def test_marker_waits_for_a_missing_packet() -> None:
    # 101 arrives after the marker packet (reordered, or retransmitted after a NACK):
    # the frame is complete, and released, only then
    p = frames(100, [3])
    assert released(RuleBuffer("marker"), [p[0], p[2], p[1]]) == [(2, TICKS, b"100:101:102:")]


def test_a_lost_packet_holds_the_frame_under_both_rules() -> None:
    # 101 never comes: neither rule releases frame 1 (a gap), nor frame 2 behind it
    p = frames(100, [3, 2])
    for rule in FRAME_RELEASES:
        assert released(RuleBuffer(rule), [p[0], p[2], p[3], p[4]]) == [], rule


def test_marker_without_the_bit_falls_back_to_the_next_frame() -> None:
    pkts = frames(100, [2, 2, 1], markers=False)
    assert released(RuleBuffer("marker"), pkts) == [
        (2, TICKS, b"100:101:"),
        (4, 2 * TICKS, b"102:103:"),
    ]


def test_marker_across_the_sequence_number_wrap() -> None:
    pkts = frames(65534, [3, 1])  # 65534, 65535, 0 | 1
    assert released(RuleBuffer("marker"), pkts) == [
        (2, TICKS, b"65534:65535:0:"),
        (3, 2 * TICKS, b"1:"),
    ]


def test_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown frame release 'first'"):
        check_rule("first")
    with pytest.raises(ValueError, match="expected next, marker"):
        stack.set_frame_release("first")


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=12),
    first=st.integers(0, 0xFFFF),
    swaps=st.lists(st.tuples(st.integers(0, 71), st.integers(0, 71)), max_size=8),
    drop=st.sets(st.integers(0, 71), max_size=3),
)
def test_next_is_aiortcs_own_rule(sizes, first, swaps, drop) -> None:  # type: ignore[no-untyped-def]
    # any arrival order (swaps: reordering; drop: losses) gives the same frames at the
    # same packets as aiortc's JitterBuffer
    pkts = frames(first, sizes)
    for a, b in swaps:
        if a < len(pkts) and b < len(pkts):
            pkts[a], pkts[b] = pkts[b], pkts[a]
    pkts = [p for i, p in enumerate(pkts) if i not in drop]
    ours = released(RuleBuffer("next"), pkts)
    theirs = released(JitterBuffer(capacity=512, is_video=True), pkts)
    assert ours == theirs


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=12), first=st.integers(0, 0xFFFF))
def test_marker_releases_every_frame_on_its_last_packet_in_order(sizes, first) -> None:  # type: ignore[no-untyped-def]
    # in order and without loss, frame k leaves on the add of its own last packet, its
    # data whole: no frame waits for its successor
    pkts = frames(first, sizes)
    last = [sum(sizes[: k + 1]) - 1 for k in range(len(sizes))]
    got = released(RuleBuffer("marker"), pkts)
    assert [i for i, _, _ in got] == last
    assert [ts for _, ts, _ in got] == [(k + 1) * TICKS for k in range(len(sizes))]
    assert b"".join(d for _, _, d in got) == b"".join(p._data for p in pkts)  # type: ignore[attr-defined]


def test_stack_applies_the_rule_to_video_only() -> None:
    # stack's patch on a class of its own (configure patches aiortc's JitterBuffer):
    # the video buffer follows the session's rule; audio (prefetch 4) keeps aiortc's
    class Patched(JitterBuffer):
        pass

    stack._release_rule(Patched)
    stack.set_frame_release("marker")
    assert released(Patched(capacity=512, is_video=True), frames(100, [3, 2]))[0][0] == 2
    audio = [packet(200 + i, (i + 1) * 960, marker=True) for i in range(8)]
    theirs = released(JitterBuffer(capacity=16, prefetch=4), audio)
    assert theirs and released(Patched(capacity=16, prefetch=4), audio) == theirs
    stack.set_frame_release("next")
    assert released(Patched(capacity=512, is_video=True), frames(100, [3, 2]))[0][0] == 3
