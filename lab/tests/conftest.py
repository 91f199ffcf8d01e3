"""Shared pytest fixtures and skips (keep small; others may append)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dchlab.paths import shared_data, target_dir


def require_root() -> None:
    """Skip the calling test unless running as root (namespaces, TUN)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")


#: A valid 1×1 PNG, for test pages' images.
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def require_binaries(*names: str) -> None:
    """Skip the calling test unless every named release binary is built."""
    missing = [n for n in names if not (target_dir() / "release" / n).exists()]
    if missing:
        pytest.skip(
            "not built: " + ", ".join(missing) + " (cargo build --release -p " + missing[0] + ")"
        )


def shared_pages(kind: str) -> Path:
    """../shared/data/pages/<kind> (tp5n, warc); skip the calling test when it is absent."""
    data = shared_data()
    if data is None or not (data / "pages" / kind).is_dir():
        pytest.skip(f"../shared/data/pages/{kind} absent")
    return data / "pages" / kind


def processes_naming(texts: list[str]) -> list[str]:
    """`process PID: COMMAND LINE` (its first 120 bytes) of every process whose command
    line contains one of `texts`: what a run left running."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if any(t.encode() in cmd for t in texts):
                shown = cmd.replace(b"\0", b" ")[:120]
                found.append(f"process {proc.name}: {shown!r}")
    return found


CHROMIUM = Path("/usr/lib/chromium/chromium")


def why_no_testbed(*binaries: str, chromium: bool = True, dnsmasq: bool = True) -> str | None:
    """Why a live testbed cannot run here (None: it can): root, the release binaries
    (chanemu and webreplay always, plus `binaries`), Debian's Chromium, dnsmasq."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for b in dict.fromkeys(("chanemu", "webreplay", *binaries)):
        if not (target_dir() / "release" / b).exists():
            return f"{b} not built (cargo build --release -p {b})"
    if chromium and not CHROMIUM.exists():
        return "chromium not installed"
    if dnsmasq and shutil.which("dnsmasq") is None:
        return "dnsmasq not installed"
    return None


def needs_testbed(
    *binaries: str, chromium: bool = True, dnsmasq: bool = True
) -> pytest.MarkDecorator:
    """`skipif` mark for tests that need a live testbed (see `why_no_testbed`)."""
    why = why_no_testbed(*binaries, chromium=chromium, dnsmasq=dnsmasq)
    return pytest.mark.skipif(why is not None, reason=str(why))
