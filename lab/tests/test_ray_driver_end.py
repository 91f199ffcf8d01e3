"""How a `dch run --ray` driver ends (ray_backend.end_driver_process, RayDispatch's
keep_connection): Ray's teardown can crash with SIGSEGV after a campaign is stored, so
the CLI's driver skips it when nothing is in flight, and keeps it when tasks were
cancelled (the cancellations must go out). No cluster needed: Ray is faked."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dchlab.experiments.ray_backend import RayDispatch


class FakeRay:
    def __init__(self) -> None:
        self.shutdowns = 0
        self.cancelled: list[object] = []

    def cancel(self, ref: object) -> None:
        self.cancelled.append(ref)

    def shutdown(self) -> None:
        self.shutdowns += 1


def _dispatch(
    keep: bool, inflight: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[RayDispatch, FakeRay]:
    fake = FakeRay()
    d = RayDispatch("127.0.0.1:1", needs_testbed=False, keep_connection=keep)

    def connect() -> FakeRay:
        d._ray, d._owns_connection = fake, True
        return fake

    def run(*_a: object):
        for i in range(inflight):
            d._inflight[f"ref{i}"] = (None, "node")  # type: ignore[assignment]
        yield from ()

    monkeypatch.setattr(d, "connect", connect)
    monkeypatch.setattr(d, "_run", run)
    return d, fake


@pytest.mark.parametrize(
    ("keep", "inflight", "shutdowns"),
    [(False, 0, 1), (True, 0, 0), (True, 2, 1), (False, 2, 1)],
)
def test_shutdown_is_skipped_only_for_a_clean_end_with_keep_connection(
    keep: bool, inflight: int, shutdowns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, fake = _dispatch(keep, inflight, monkeypatch)
    assert list(d(None, [], None, print)) == []  # type: ignore[arg-type]
    assert fake.shutdowns == shutdowns
    assert fake.cancelled == [f"ref{i}" for i in range(inflight)]
    assert d._inflight == {}


def _child(code: str) -> subprocess.CompletedProcess[str]:
    env_path = str(Path(__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def test_a_connected_driver_ends_at_once_with_its_status_and_output_flushed() -> None:
    p = _child(
        """
        import atexit, sys, types
        ray = types.ModuleType("ray")
        ray.is_initialized = lambda: True
        sys.modules["ray"] = ray
        atexit.register(lambda: print("ATEXIT RAN"))  # Ray's teardown hook stands here
        from dchlab.experiments.ray_backend import end_driver_process
        print("summary", end="")  # buffered: must still come out
        sys.stderr.write("on stderr")
        end_driver_process(7)
        print("NOT REACHED")
        """
    )
    assert p.returncode == 7, p.stderr
    assert p.stdout == "summary" and p.stderr == "on stderr"


def test_without_a_connection_it_returns_and_the_process_ends_normally() -> None:
    p = _child(
        """
        import atexit, sys, types
        ray = types.ModuleType("ray")
        ray.is_initialized = lambda: False
        sys.modules["ray"] = ray
        atexit.register(lambda: print("atexit ran"))
        from dchlab.experiments.ray_backend import end_driver_process
        end_driver_process(7)
        print("returned")
        """
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == "returned\natexit ran\n"
