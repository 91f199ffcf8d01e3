"""The real-time workload's records at a session's end: the probes are copied while
aiortc's codec threads may still write them (closing the peer connection does not
wait for an encode in flight), and a session whose device failed says why, the
server's side included (its log's end)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dchlab.testbed.procs import Daemon
from dchlab.workloads.realtime import run, stack


class _FakeEncoder:
    """The surface of aiortc's Vp8Encoder the encode probe reads."""

    target_bitrate = 2_000_000

    def encode(self, frame: int, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        return [b"x" * 10, b"y" * 5], frame * 3000


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> stack.Probes:
    """A fresh PROBES for the wrapped fake encoder to write into."""
    fresh = stack.Probes()
    monkeypatch.setattr(stack, "PROBES", fresh)

    class Encoder(_FakeEncoder):
        pass

    stack._wrap_encoder(Encoder)
    fresh.encoder = Encoder  # type: ignore[attr-defined]
    return fresh


def test_the_encode_probe_writes_under_the_probes_lock(probes: stack.Probes) -> None:
    enc = probes.encoder()  # type: ignore[attr-defined]
    with probes.lock:
        t = threading.Thread(target=enc.encode, args=(7,))
        t.start()
        t.join(timeout=0.3)
        assert t.is_alive(), "the encoder thread wrote its probe without the lock"
        assert probes.encode == {}
    t.join(timeout=5)
    assert not t.is_alive()
    assert list(probes.encode) == [7 * 3000]  # the fake's timestamp: frame * 3000
    start, end, size, target, cpu, key = probes.encode[7 * 3000]
    assert start <= end and (size, target) == (15, 2_000_000)
    # the fake's payload is no VP8 (descriptor byte 0x78: partition 8), so no key flag
    assert cpu >= 0 and key == -1


def test_snapshot_while_an_encoder_thread_writes(probes: stack.Probes) -> None:
    """The server's records are copied while an encode still in flight writes its probe
    (before the lock, the server's copy raised 'dictionary changed size during
    iteration' in 1 of 6 cloud-gaming sessions and the device lost the records).
    Switching threads every microsecond makes the writer land inside the copies."""
    enc = probes.encoder()  # type: ignore[attr-defined]
    n = 20_000
    stop = threading.Event()

    def writer() -> None:
        for i in range(n):
            enc.encode(i)
        stop.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        t = threading.Thread(target=writer)
        t.start()
        sizes = []
        while not stop.is_set():
            snap = probes.snapshot()
            sizes.append(len(snap["encode"]))
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert sizes == sorted(sizes) and len(sizes) > 1
    final = probes.snapshot()
    assert sorted(final["encode"]) == [i * 3000 for i in range(n)]
    assert final["decode"] == {} and final["rx_bytes"] == {} and final["rtp_origin"] is None


class _FakeTestbed:
    """run_session's view of a testbed whose device fails like the reported sessions."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def spawn(self, name: str, argv: list[str], *, ns: str | None = None) -> Daemon:
        proc: Any = None
        return Daemon(name, argv, proc, self.log)

    def wait_ready(self, names: list[str], timeout: float) -> None:
        pass

    def run_ue(self, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        err = b"SignallingError: connection closed while waiting for 'records'\n"
        return subprocess.CompletedProcess(argv, 1, b"", err)


def test_a_failed_session_quotes_the_server_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of a real failure's server log (Python 3.11 traceback, its marker lines
    left out of the quote)."""
    monkeypatch.setattr(run, "SERVER_LOG_SETTLE_S", 0.0)
    log = tmp_path / "realtime-server.log"
    said = [
        "Traceback (most recent call last):",
        '  File "server.py", line 69, in session',
        "    await signalling.send(writer, {**asdict(stack.PROBES)})",
        "                                     ^^^^^^^^^^^^^^^^^^^^^",
        '  File "dataclasses.py", line 1321, in _asdict_inner',
        "    return type(obj)((_asdict_inner(k, dict_factory),",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "RuntimeError: dictionary changed size during iteration",
    ]
    log.write_text("\n".join(["READY", *(f"noise {i}" for i in range(40)), *said]) + "\n")
    got = run.run_session(_FakeTestbed(log), "cloud-gaming", 1.0, 30, 60.0)
    quoted = [
        "noise 38",
        "noise 39",
        "Traceback (most recent call last):",
        'File "server.py", line 69, in session',
        "await signalling.send(writer, {**asdict(stack.PROBES)})",
        'File "dataclasses.py", line 1321, in _asdict_inner',
        "return type(obj)((_asdict_inner(k, dict_factory),",
        "RuntimeError: dictionary changed size during iteration",
    ]
    assert len(quoted) == run.SERVER_LOG_LINES
    device = "SignallingError: connection closed while waiting for 'records'\n"
    assert got == {"error": f"device exited 1: {device}\nserver log (end):\n" + "\n".join(quoted)}
