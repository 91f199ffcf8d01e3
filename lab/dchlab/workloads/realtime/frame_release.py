"""When the video receiver's jitter buffer hands a frame to the decoder.

Rule (`FRAME_RELEASES`):
  * `next` (aiortc's own, the default): the frame at the buffer's origin is released
    when a packet of the *next* frame (a new RTP timestamp) follows its packets with no
    gap (aiortc/jitterbuffer.py, `JitterBuffer._remove_frame`). A frame waits for the
    next frame's first packet: under Algorithm 1, which sends each frame's first
    packets on the LLC, that wait is the channels' one-way difference shorter than
    under a scheme that keeps the frame on the HBC (docs/results.md "On the steady
    channels").
  * `marker`: as libwebrtc does (its packet buffer completes a frame on the packet
    with the RTP marker bit, RFC 3550 §5.1; aiortc's sender sets it on each frame's
    last packet, rtcrtpsender.py), the frame at the origin is released as soon as its
    packets from the origin on are contiguous and the last one carries the marker bit.
    A frame whose last packet lacks the bit (a sender that does not set it) still goes
    out on aiortc's rule. A lost packet is a gap under both rules: the frame waits for
    its retransmission (NACK), as in aiortc.

Either way at most one frame leaves per packet added (aiortc's receiver takes one
frame from each `JitterBuffer.add`); a frame completed behind an older one waits for
the next packet, as in aiortc.

`release_frame(buffer, rule)` works on an aiortc `JitterBuffer`'s ring (`_origin`,
`_packets`, `_capacity`, `remove`): it is what `stack.configure` installs as the video
buffer's `_remove_frame`, reading the rule `stack.set_frame_release` set for the
session. It takes no time and does no I/O, so the tests drive it with synthetic RTP
packets.
"""

from __future__ import annotations

from typing import Any

#: The rules, default first.
FRAME_RELEASES = ("next", "marker")


def check_rule(rule: str) -> str:
    """`rule`, or ValueError naming it and the rules there are (checked once per
    session, not per packet)."""
    if rule not in FRAME_RELEASES:
        raise ValueError(f"unknown frame release {rule!r}: expected {', '.join(FRAME_RELEASES)}")
    return rule


def release_frame(buffer: Any, rule: str) -> Any:
    """The frame the jitter buffer `buffer` releases now under `rule` (an
    aiortc.jitterbuffer.JitterFrame, its packets removed from the buffer), or None.
    Runs on every video packet: `rule` is one of FRAME_RELEASES (`check_rule`, when it
    was set). Buffers with a prefetch (aiortc's audio: 4 frames) are not handled here."""
    from aiortc.jitterbuffer import JitterFrame

    if buffer._origin is None:
        return None
    packets: list[Any] = []
    timestamp = None
    for count in range(buffer._capacity):
        packet = buffer._packets[(buffer._origin + count) % buffer._capacity]
        if packet is None:
            return None  # a gap: the frame at the origin is not complete yet
        if timestamp is None:
            timestamp = packet.timestamp
        elif packet.timestamp != timestamp:
            # the next frame has begun: the one at the origin is complete (aiortc's rule)
            return _take(buffer, packets, timestamp, count, JitterFrame)
        packets.append(packet)
        if rule == "marker" and packet.marker:
            return _take(buffer, packets, timestamp, count + 1, JitterFrame)
    return None


def _take(buffer: Any, packets: list[Any], timestamp: int, count: int, frame_cls: Any) -> Any:
    frame = frame_cls(data=b"".join(p._data for p in packets), timestamp=timestamp)
    buffer.remove(count)
    return frame
