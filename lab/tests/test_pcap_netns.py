"""`dch shell --pcap DIR`: every emulated link leaves one readable pcap per
direction (chanemu --pcap, docs/chanemu.md) with the packets that crossed it."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_binaries, require_root

pytestmark = pytest.mark.netns

LAB = Path(__file__).resolve().parents[1]


def read_pcap(path: Path) -> list[tuple[int, bytes]]:
    """(unix ns, packet) per record of a LINKTYPE_RAW nanosecond pcap."""
    b = path.read_bytes()
    magic, major, minor, _zone, _sigfigs, _snap, linktype = struct.unpack_from("<IHHiIII", b)
    assert (magic, major, minor, linktype) == (0xA1B23C4D, 2, 4, 101), path
    out, at = [], 24
    while at < len(b):
        sec, ns, incl, orig = struct.unpack_from("<IIII", b, at)
        assert incl == orig and at + 16 + incl <= len(b), (path, at)
        out.append((sec * 1_000_000_000 + ns, b[at + 16 : at + 16 + incl]))
        at += 16 + incl
    return out


def test_shell_pcap_leaves_one_capture_per_link_and_direction(tmp_path: Path) -> None:
    require_root()
    require_binaries("chanemu", "webreplay")
    cap = tmp_path / "cap"  # created by the testbed
    r = subprocess.run(
        [sys.executable, "-m", "dchlab.cli", "shell", "--scheme", "hbc-only", "--pcap", str(cap),
         "--", "ping", "-n", "-c", "3", "-i", "0.2", "-p", "dc4a", "server.test"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(LAB)}, cwd=LAB,
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in cap.iterdir())
    assert names == [
        "hbc-downlink.pcap",
        "hbc-uplink.pcap",
        "llc-downlink.pcap",
        "llc-uplink.pcap",
    ]
    caps = {n: read_pcap(cap / n) for n in names}

    def echoes(name: str, icmp_type: int) -> list[bytes]:
        return [
            p
            for _, p in caps[name]
            if p[0] >> 4 == 4 and p[9] == 1 and p[20] == icmp_type and b"\xdc\x4a" * 8 in p
        ]

    # hbc-only: the three requests go up the HBC, the replies come down it
    up, down = echoes("hbc-uplink.pcap", 8), echoes("hbc-downlink.pcap", 0)
    assert len(up) == 3 and len(down) == 3, (len(up), len(down))
    # the replies answer the requests: addresses swapped
    assert all(u[12:16] == d[16:20] and u[16:20] == d[12:16] for u, d in zip(up, down, strict=True))
    # nothing of the ping crossed the LLC
    assert not echoes("llc-uplink.pcap", 8) and not echoes("llc-downlink.pcap", 0)
    for n in names:
        times = [t for t, _ in caps[n]]
        assert times == sorted(times), n
