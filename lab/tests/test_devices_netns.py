"""The N-device testbed (TestbedConfig.devices, docs/testbed.md "N devices"), live:

- with 3 devices, every device reaches the server over each channel (ping -n, and a
  byte-exact HTTPS transfer hashed per device) and the bytes crossed that device's own
  HBC link or the one shared LLC link;
- the LLC is one queue: two devices saturating it at once each get about half of C
  and together no more than C (three separate links would give each C);
- nothing remains after a normal exit or when the shared LLC's emulator dies, and
  `dch cleanup` removes everything a SIGKILLed `dch shell --devices 8` left.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import processes_naming, require_binaries, require_root

from dchlab.testbed import Testbed, TestbedConfig
from dchlab.testbed.runrecord import RUN_DIR, list_netns

pytestmark = pytest.mark.netns

DEVICES = ("ue", "ue2", "ue3")  # the roles of a 3-device testbed (ue = ue1, measured)
SIZE = 1_000_000
EXPECTED = hashlib.sha256(bytes(i % 251 for i in range(SIZE))).hexdigest()
HBC = "fixed:40ms/200mbit"
FAST_LLC = "fixed:5ms/40mbit"
LAB = Path(__file__).resolve().parents[1]


def _needs() -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")


def _leftovers(prefix: str) -> list[str]:
    """Everything of run `prefix` still on the machine."""
    found = [f"netns {n}" for n in list_netns() if n.startswith(prefix)]
    if (RUN_DIR / f"{prefix}.json").exists():
        found.append("run record")
    etc = Path("/etc/netns")
    found += [f"/etc/netns/{d.name}" for d in etc.glob(f"{prefix}-*")] if etc.is_dir() else []
    return found + processes_naming([prefix])


def _wait_gone(prefix: str, timeout: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := _leftovers(prefix)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _ping_ok(tb: Testbed, device: str) -> None:
    r = tb.run_ue(["ping", "-n", "-c", "5", "-i", "0.2", "server.test"],
                  capture_output=True, text=True, timeout=30, device=device)  # fmt: skip
    replies = [x for x in r.stdout.splitlines() if "time=" in x]
    assert len(replies) >= 4, f"{device}: {r.stdout}{r.stderr}"


def _sha(tb: Testbed, device: str) -> str:
    r = tb.run_ue(
        ["sh", "-c", f"curl -sS --fail --max-time 60 https://server.test/bytes/{SIZE} | sha256sum"],
        capture_output=True, text=True, timeout=90, device=device,
    )  # fmt: skip
    return r.stdout.split()[0] if r.stdout else r.stderr


@pytest.mark.parametrize(
    ("scheme", "shared_hbc"),
    [("all-llc", False), ("all-hbc", False), ("all-hbc", True)],
)
def test_every_device_reaches_the_server_over_each_channel(scheme: str, shared_hbc: bool) -> None:
    _needs()
    cfg = TestbedConfig(scheme=scheme, hbc=HBC, llc=FAST_LLC, devices=3, shared_hbc=shared_hbc)
    with Testbed(cfg) as tb:
        assert sorted(tb.netns) == sorted([*DEVICES, "gw", "srv", "llc-cell",
                                           *(["hbc-cell"] if shared_hbc else [])])  # fmt: skip
        for device in DEVICES:
            _ping_ok(tb, device)
            assert _sha(tb, device) == EXPECTED, f"{device}: body differs or fetch failed"
    stats = tb.stats()
    assert _wait_gone(tb.prefix) == []
    links = stats["links"]
    for link, emu in links.items():
        assert "error" not in emu, (link, emu)
    hbc_links = ["hbc"] if shared_hbc else ["hbc1", "hbc2", "hbc3"]
    assert sorted(links) == sorted([*hbc_links, "llc"])
    down = {k: v["downlink"]["bytes_out"] for k, v in links.items()}
    if scheme == "all-llc":  # all three transfers in the one LLC link, none on an HBC
        assert down["llc"] >= 3 * SIZE, down
        assert all(down[h] < 100_000 for h in hbc_links), down
    elif shared_hbc:
        assert down["hbc"] >= 3 * SIZE and down["llc"] < 100_000, down
    else:  # each device's transfer on its own HBC link
        assert all(SIZE <= down[h] < 2 * SIZE for h in hbc_links), down
        assert down["llc"] < 100_000, down
    for i, device in enumerate(DEVICES, 1):
        channel = "llc" if scheme == "all-llc" else "hbc"
        assert stats["interfaces"][device][channel]["rx_bytes"] >= SIZE, (
            device,
            stats["interfaces"],
        )
        client = "client" if i == 1 else f"client{i}"
        assert "channels" in stats["agents"][client], stats["agents"][client]
    assert "channels" in stats["agents"]["gateway"]


#: The shared LLC's rate (C) and how long both devices saturate it.
C_MBIT = 8.0
SECONDS = 6


def test_the_llc_is_one_queue_shared_by_the_devices() -> None:
    """Two devices download as fast as they can over the LLC at once. One queue: their
    goodputs add up to at most C (goodput < link rate: headers, the agents' tunnel)
    and each gets about half. A link per device would give each ~C (sum ~2C)."""
    _needs()
    cfg = TestbedConfig(scheme="all-llc", hbc=HBC, llc=f"fixed:5ms/{C_MBIT:g}mbit", devices=3)
    url = "http://server.test/bytes/100000000"
    curl = ["curl", "-sS", "-o", "/dev/null", "--max-time", str(SECONDS),
            "-w", "%{size_download} %{time_total}", url]  # fmt: skip
    out = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    with Testbed(cfg) as tb:
        procs = [tb.popen_ue(curl, device=device, **out) for device in ("ue", "ue2")]
        outs = [p.communicate(timeout=SECONDS + 30) for p in procs]
    mbit = []
    for out, _ in outs:
        size, secs = out.split()
        mbit.append(int(size) * 8 / float(secs) / 1e6)
    total = sum(mbit)
    # Both overlap but for their start (≤ a few %); 10% leaves room for that.
    assert total <= 1.1 * C_MBIT, f"{mbit} Mbit/s: the devices got more than one LLC's {C_MBIT}"
    assert total >= 0.5 * C_MBIT, f"{mbit} Mbit/s: the LLC was not saturated ({outs})"
    print(f"goodput per device {mbit} Mbit/s, sum {total:.2f} of C = {C_MBIT}")
    for m in mbit:
        assert 0.3 * total <= m <= 0.7 * total, f"unfair split {mbit} of {C_MBIT} Mbit/s"
    # the third device sent nothing: the bytes crossed the one LLC emulator
    assert tb.stats()["links"]["llc"]["downlink"]["bytes_out"] >= total * 1e6 / 8 * SECONDS * 0.8


def _start_shell(devices: int) -> tuple[subprocess.Popen[str], str]:
    """`dch shell --devices N` running `sleep 60` on ue1; returns it and its prefix."""
    p = subprocess.Popen(
        [sys.executable, "-m", "dchlab.cli", "shell", "--devices", str(devices), "--scheme",
         "dchannel", "--", "sh", "-c", "echo $DCH_PREFIX; exec sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=LAB,
    )  # fmt: skip
    assert p.stdout is not None
    prefix = p.stdout.readline().strip()
    assert prefix.startswith("dtb"), (prefix, p.stderr.read() if p.poll() is not None else "")
    return p, prefix


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(LAB)}


def test_a_dead_shared_llc_emulator_aborts_and_removes_every_device() -> None:
    _needs()
    p, prefix = _start_shell(3)
    rec = json.loads((RUN_DIR / f"{prefix}.json").read_text())
    assert {f"{prefix}-ue{i}" for i in (1, 2, 3)} | {f"{prefix}-llc"} <= set(rec["netns"])
    emu = next(e["pid"] for e in rec["procs"] if e["name"] == "link-llc")
    os.kill(emu, signal.SIGKILL)
    assert p.wait(30) == 125
    assert "link-llc exited unexpectedly" in (p.stderr.read() if p.stderr else "")
    assert _wait_gone(prefix) == []


def test_cleanup_after_sigkill_of_dch_shell_with_8_devices() -> None:
    _needs()
    p, prefix = _start_shell(8)
    built = set(list_netns())
    expected = {f"{prefix}-ue{i}" for i in range(1, 9)} | {f"{prefix}-{r}" for r in ("gw", "srv", "llc")}  # fmt: skip
    assert expected <= built, sorted(expected - built)
    assert len(processes_naming([prefix])) >= 9, "emulators: 8 HBC links and the LLC"
    p.send_signal(signal.SIGKILL)  # the owner dies without tearing down
    p.wait(10)
    assert any(x.startswith("netns") for x in _leftovers(prefix))
    r = subprocess.run([sys.executable, "-m", "dchlab.cli", "cleanup"],
                       capture_output=True, text=True, env=_env(), cwd=LAB, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"netns {prefix}-ue8" in r.stdout and f"netns {prefix}-llc" in r.stdout, r.stdout
    assert _wait_gone(prefix) == []
