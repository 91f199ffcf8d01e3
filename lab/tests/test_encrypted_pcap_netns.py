"""The agents encrypt by default: `dch shell --scheme dchannel --pcap DIR` while
ping carries a known payload pattern; the captures of all four emulated links
(chanemu --pcap) hold the agents' datagrams (type 0x20/0x21/0x22) and never the
pattern. The same run with `--agent-arg=--insecure` shows the pattern in clear
(the check can see plaintext when there is some)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_binaries, require_root
from test_pcap_netns import read_pcap

from dchlab.testbed import addressing as A

pytestmark = pytest.mark.netns

LAB = Path(__file__).resolve().parents[1]
PATTERN = b"\xdc\x4a" * 8  # what `ping -p dc4a` fills its payload with
LINKS = ("hbc-downlink.pcap", "hbc-uplink.pcap", "llc-downlink.pcap", "llc-uplink.pcap")


def agent_payloads(cap: Path) -> dict[str, list[bytes]]:
    """UDP payloads to/from the agents' ports, per link capture."""
    ports = {A.AGENT_PORT_HBC, A.AGENT_PORT_LLC}
    out: dict[str, list[bytes]] = {}
    for name in LINKS:
        rows = []
        for _, p in read_pcap(cap / name):
            if p[0] >> 4 != 4 or p[9] != 17:
                continue
            ihl = (p[0] & 0x0F) * 4
            sport, dport = int.from_bytes(p[ihl : ihl + 2]), int.from_bytes(p[ihl + 2 : ihl + 4])
            if sport in ports or dport in ports:
                rows.append(p[ihl + 8 :])
        out[name] = rows
    return out


def shell_ping(cap: Path, *extra: str) -> dict[str, list[bytes]]:
    # pkt-size:300 steers the small echo requests/replies onto the LLC and the
    # large ones onto the HBC, so the pattern crosses all four links
    r = subprocess.run(
        [sys.executable, "-m", "dchlab.cli", "shell", "--scheme", "pkt-size:300", "--pcap", str(cap),
         *extra, "--", "sh", "-c",
         "ping -n -c 3 -i 0.2 -p dc4a server.test && ping -n -c 3 -i 0.2 -s 1000 -p dc4a server.test"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(LAB)}, cwd=LAB,
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return agent_payloads(cap)


def test_no_plaintext_on_any_link_and_insecure_shows_it(tmp_path: Path) -> None:
    require_root()
    require_binaries("chanemu", "dchannel", "webreplay")
    enc = shell_ping(tmp_path / "enc")
    for name, rows in enc.items():
        assert rows, f"{name}: no agent datagrams captured"
        assert all(p[0] in (0x20, 0x21, 0x22) for p in rows), name
        assert not any(PATTERN in p for p in rows), f"{name}: plaintext pattern on the wire"
    # the 6 echo requests went through, encrypted: 45 bytes (prefix, header, tag) + 84 or more
    up = enc["hbc-uplink.pcap"] + enc["llc-uplink.pcap"]
    assert sum(1 for p in up if p[0] == 0x20 and len(p) >= 45 + 84) >= 6
    plain = shell_ping(tmp_path / "plain", "--agent-arg=--insecure")
    for name in LINKS:
        assert any(PATTERN in p for p in plain[name]), (
            f"{name}: --insecure should carry it in clear"
        )
