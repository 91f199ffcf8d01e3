"""Shared pytest fixtures and skips (keep small; others may append)."""

from __future__ import annotations

import os

import pytest

from dchlab.paths import target_dir


def require_root() -> None:
    """Skip the calling test unless running as root (namespaces, TUN)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")


def require_binaries(*names: str) -> None:
    """Skip the calling test unless every named release binary is built."""
    missing = [n for n in names if not (target_dir() / "release" / n).exists()]
    if missing:
        pytest.skip(
            "not built: " + ", ".join(missing) + " (cargo build --release -p " + missing[0] + ")"
        )
