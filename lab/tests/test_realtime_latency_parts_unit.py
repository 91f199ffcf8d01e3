"""Input-to-display latency taken apart (dchlab.workloads.realtime.latency_parts) on
hand-made records, and the datagram probes' parsing and kernel stamps
(dchlab.workloads.realtime.wire)."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from dchlab.workloads.realtime import latency_parts, wire

FPS = 30
TICK = 3000  # 90 kHz / 30 fps
ORIGIN = 1_000_000  # the receiver's first RTP timestamp
SSRC = 77
MS = 1e-3


def _records() -> tuple[dict, dict]:
    """One session, as JSON would carry it: inputs 1 and 2 sent at 0.100 and 0.110 s;
    the server receives 2 (at 0.1305) before 1 (at 0.1320): the frame captured at
    0.1505 (frame 4: slot 4 of 30 fps, due 0.1500) shows seq 2. Frame 4
    is displayed at 0.2600; frame 3 (seq 0) earlier. Every timestamp in s."""
    server = {
        "frames": {"3": 0.1170, "4": 0.1505},
        "rendered": {"3": 0.1180, "4": 0.1520},
        "slot_start": 0.1500 - 4 / FPS,
        "tick": TICK,
        # encode start, end, bytes, target, cpu, key (media timestamp: frame id * tick)
        "encode": {str(3 * TICK): [0.1185, 0.1250, 9000, 10_000_000, 0.004, 0],
                   str(4 * TICK): [0.1530, 0.1610, 9000, 10_000_000, 0.004, 0]},
        "inputs_received": {"2": 0.1305, "1": 0.1320},
        "inputs_wire": {"2": 0.1300, "1": 0.1318},
        "sent_rtp": {str(SSRC): {str(ORIGIN + TICK): [0.1640, 0.1660]}},
    }  # fmt: skip
    device = {
        "inputs_sent": {"1": 0.1000, "2": 0.1100},
        "dtls_sent": [0.0900, 0.1002, 0.1101],
        # display, pts (receiver media time), frame id, seq, patch capture time
        "shown": [[0.2000, 0, 3, 0, 0.1170], [0.2600, TICK, 4, 2, 0.1505],
                  [0.2610, TICK, 4, 2, 0.1505]],
        "rtp_origin": ORIGIN - 0,  # frame 3 was the first received: its RTP ts
        "video_ssrc": SSRC,
        "rx_kernel_rtp": {str(SSRC): {str(ORIGIN + TICK): [0.1850, 0.1870]}},
        "last_packet": {str(ORIGIN + TICK): 0.1900},
        "released": {str(ORIGIN + TICK): 0.2200},
        "decode": {str(TICK): [0.2250, 0.2300]},
    }  # fmt: skip
    return device, server


def test_parts_follow_the_input_and_its_frame_and_add_up() -> None:
    device, server = _records()
    whole, parts = latency_parts.per_input(device, server, FPS)
    assert whole == pytest.approx({1: 0.1600, 2: 0.1500})
    # input 2: sent 0.1100, left 0.1101, kernel 0.1300, handled 0.1305; next slot due
    # 0.0167 + 4/30 = 0.1500, captured 0.1505 (frame 4, the one displayed)
    expect2 = {
        "superseded": 0.0, "input_send_wait": 0.0001, "network_up": 0.0199,
        "input_rx_wait": 0.0005, "render_wait": 0.1500 - 0.1305, "render_late": 0.0005,
        "undisplayed": 0.0, "render": 0.0015, "encode_queue": 0.0010, "encode": 0.0080,
        "send_wait": 0.0030, "packetize": 0.0020, "network_down": 0.0210,
        "rx_wait": 0.0030, "jitter_buffer": 0.0300, "decode_queue": 0.0050,
        "decode": 0.0050, "output": 0.0300,
    }  # fmt: skip
    assert parts[2] == pytest.approx(expect2, abs=1e-9)
    # input 1 arrived after 2, which the frame already showed: it waited 10 ms for 2
    assert parts[1]["superseded"] == pytest.approx(0.0100)
    assert {k: v for k, v in parts[1].items() if k != "superseded"} == pytest.approx(
        {k: v for k, v in expect2.items() if k != "superseded"}, abs=1e-9
    )
    for s in (1, 2):
        assert sum(parts[s].values()) == pytest.approx(whole[s], abs=1e-12)


def test_decompose_reports_percentiles_waits_and_a_zero_residual() -> None:
    device, server = _records()
    d = latency_parts.decompose(device, server, FPS)
    assert (d["inputs_displayed"], d["inputs_accounted"]) == (2, 2)
    assert d["p50_ms"]["network_up"] == pytest.approx(19.9)
    assert d["p50_ms"]["superseded"] == pytest.approx(5.0)  # inputs 0 and 10 ms
    assert d["wire"]["p50"] == pytest.approx(19.9 + 21.0)
    waits = 0.1 + 0.5 + 0.5 + 1.0 + 3.0 + 3.0 + 5.0 + 30.0  # module's WAITS for input 2
    assert d["waits"]["max"] == pytest.approx(waits)
    assert d["without_waits"]["min"] == pytest.approx(150.0 - waits)
    assert d["rest"]["min"] == pytest.approx(150.0 - 40.9 - 19.5)
    assert (d["not_wire"]["min"], d["not_wire"]["max"]) == pytest.approx((109.1, 119.1))
    assert d["residual"]["max"] == pytest.approx(0.0, abs=1e-6)
    assert d["frame_interval_ms"] == pytest.approx(33.33)


def test_an_input_whose_frame_lacks_a_timestamp_is_left_out() -> None:
    device, server = _records()
    del device["released"][str(ORIGIN + TICK)]
    d = latency_parts.decompose(device, server, FPS)
    assert (d["inputs_displayed"], d["inputs_accounted"]) == (2, 0)
    assert d["p50_ms"]["encode"] is None


def test_a_frame_not_displayed_counts_as_undisplayed() -> None:
    """Frame 4 (captured 0.1505, seq 2) was lost; frame 5 (0.1840) shows seq 2."""
    device, server = _records()
    server["frames"]["5"] = 0.1840
    server["rendered"]["5"] = 0.1855
    server["encode"][str(5 * TICK)] = [0.1860, 0.1940, 9000, 10_000_000, 0.004, 0]
    server["sent_rtp"][str(SSRC)][str(ORIGIN + 2 * TICK)] = [0.1950, 0.1960]
    device["shown"] = [[0.2000, 0, 3, 0, 0.1170], [0.3000, 2 * TICK, 5, 2, 0.1840]]
    device["rx_kernel_rtp"][str(SSRC)][str(ORIGIN + 2 * TICK)] = [0.2160, 0.2170]
    device["last_packet"][str(ORIGIN + 2 * TICK)] = 0.2180
    device["released"][str(ORIGIN + 2 * TICK)] = 0.2500
    device["decode"][str(2 * TICK)] = [0.2600, 0.2700]
    _whole, parts = latency_parts.per_input(device, server, FPS)
    assert parts[2]["undisplayed"] == pytest.approx(0.1840 - 0.1505)
    assert parts[2]["render_late"] == pytest.approx(0.0005)
    assert sum(parts[2].values()) == pytest.approx(0.3000 - 0.1100)


def test_rtp_key_reads_the_clear_header_and_skips_rtcp_and_dtls() -> None:
    rtp = bytes([0x80, 96]) + struct.pack("!HII", 7, 123456, 0xDEADBEEF) + b"\x00" * 20
    assert wire.rtp_key(rtp) == (0xDEADBEEF, 123456)
    marker = bytes([0x80, 96 | 0x80]) + rtp[2:]  # marker bit set: PT byte 224
    assert wire.rtp_key(marker) == (0xDEADBEEF, 123456)
    rtcp = bytes([0x80, 200]) + rtp[2:]  # sender report (RFC 3550 §6.4.1)
    assert wire.rtp_key(rtcp) is None
    assert wire.rtp_key(bytes([23, 0xFE, 0xFD]) + b"\x00" * 20) is None  # DTLS app data
    assert wire.rtp_key(rtp[:11]) is None


def test_kernel_rx_time_is_when_the_datagram_arrived_not_when_it_was_read() -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        rx.bind(("127.0.0.1", 0))
        wire.kernel_rx_time(rx)  # turns the stamps on (no datagram yet)
        t_sent = time.monotonic()
        tx.sendto(b"x", rx.getsockname())
        time.sleep(0.05)
        rx.recvfrom(16)
        t_read = time.monotonic()
        t_kernel = wire.kernel_rx_time(rx)
    assert t_kernel is not None
    assert t_sent - 0.002 <= t_kernel <= t_sent + 0.02  # loopback: at once
    assert t_read - t_kernel >= 0.045  # the 50 ms the datagram waited to be read


def test_dch_realtime_prints_the_parts_in_path_order() -> None:
    from dchlab.commands.realtime import _parts

    assert _parts(None) == ""
    got = _parts({"network_up": 20.26, "render_wait": None, "encode": 9.88})
    assert got == ", parts p50: network_up 20.3 render_wait - encode 9.9"


def test_a_retransmission_that_completes_the_frame_is_its_last_packet_on_the_wire() -> None:
    """Under two channels a frame's packet can be lost or overtaken and come again as a
    retransmission (RTX: own SSRC, the original's RTP timestamp, RFC 4588 §4). The
    kernel's latest arrival before the release (`rx_kernel_last`, any SSRC) ends
    network_down, so the NACK round trip is the wire's, not the loop's (rx_wait)."""
    device, server = _records()
    # the RTX copy of the frame's last packet reached the kernel at 0.1885, the loop
    # handled it at 0.1900 (last_packet), the frame was released at 0.2200
    device["rx_kernel_last"] = {str(ORIGIN + TICK): 0.1885}
    _, parts = latency_parts.per_input(device, server, FPS)
    assert parts[2]["network_down"] == pytest.approx(0.1885 - 0.1660, abs=1e-9)
    assert parts[2]["rx_wait"] == pytest.approx(0.1900 - 0.1885, abs=1e-9)
    assert parts[2]["jitter_buffer"] == pytest.approx(0.2200 - 0.1900, abs=1e-9)
    # without it (older records): the original SSRC's last kernel arrival, as before
    del device["rx_kernel_last"]
    _, parts = latency_parts.per_input(device, server, FPS)
    assert parts[2]["network_down"] == pytest.approx(0.1870 - 0.1660, abs=1e-9)
