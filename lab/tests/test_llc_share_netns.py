"""The `llc_share` field live (docs/llc_sharing.md), on a 2-device testbed whose
devices both download at once under `all-llc` over a 2 Mbit/s shared LLC:

- token-bucket: both transfers are byte-exact, and the gateway diverted part of each
  device's LLC packets to the HBC (its per-device counters), admitting no more than
  each device's 1 Mbit/s share plus one packet over the run;
- priority: the LLC emulator runs with --control-first and the transfers are
  byte-exact (the stage's behaviour is chanemu's unit tests).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from conftest import require_binaries, require_root

from dchlab.testbed import Testbed, TestbedConfig

pytestmark = pytest.mark.netns

SIZE = 1_000_000
EXPECTED = hashlib.sha256(bytes(i % 251 for i in range(SIZE))).hexdigest()
C_BITS = 2_000_000


def _download_both(tb: Testbed) -> None:
    cmd = ["sh", "-c", f"curl -sS --fail --max-time 90 https://server.test/bytes/{SIZE} | sha256sum"]  # fmt: skip
    procs = [tb.popen_ue(cmd, device=d, stdout=-1, stderr=-1, text=True) for d in ("ue", "ue2")]
    for d, p in zip(("ue", "ue2"), procs, strict=True):
        out, err = p.communicate(timeout=120)
        assert out.split()[:1] == [EXPECTED], f"{d}: {out}{err}"


def _emulators(prefix: str) -> list[list[str]]:
    """The full argv of every chanemu of run `prefix`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (
                (proc / "cmdline").read_bytes().decode().split("\0") if proc.name.isdigit() else []
            )
        except OSError:
            continue
        if argv and argv[0].endswith("chanemu") and any(prefix in a for a in argv):
            found.append(argv)
    return found


def _cfg(rule: str) -> TestbedConfig:
    return TestbedConfig(
        scheme="all-llc", hbc="fixed:40ms/200mbit", llc="fixed:5ms/2mbit", devices=2,
        llc_share=rule,
    )  # fmt: skip


def test_token_bucket_diverts_the_excess_to_the_hbc() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    started = time.monotonic()
    with Testbed(_cfg("token-bucket")) as tb:
        _download_both(tb)
    elapsed = time.monotonic() - started
    gw = tb.stats()["agents"]["gateway"]
    share = C_BITS // 2
    for k, peer in enumerate(gw["peers"]):
        lim = peer["limits"]
        assert lim["llc_share_diverted_packets"] > 0, f"device {k + 1}: {lim}"
        assert lim["llc_share_packets"] > 0, f"device {k + 1}: {lim}"
        # over the whole run: at most its share plus one packet (--outer-mtu)
        assert lim["llc_share_bytes"] * 8 <= share * elapsed + 1500 * 8, (k, lim, elapsed)
    diverted = sum(p["limits"]["llc_share_diverted_packets"] for p in gw["peers"])
    assert gw["decisions"]["hbc:over_share"] == diverted


def test_priority_runs_the_llc_emulator_control_first() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    with Testbed(_cfg("priority")) as tb:
        emulators = _emulators(tb.prefix)
        llc = [a for a in emulators if "--control-first" in a]
        _download_both(tb)
    # the shared LLC's one emulator, not the devices' HBCs nor the server path
    assert len(emulators) >= 3 and len(llc) == 1, emulators
    assert llc[0][llc[0].index("--dev-b") + 1] == "llc", llc
