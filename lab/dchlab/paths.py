"""Where the lab finds binaries, shared data and its caches."""

from __future__ import annotations

import os
from pathlib import Path

from dchlab import REPO_ROOT


def repo_root() -> Path:
    return Path(os.environ.get("DCH_ROOT", REPO_ROOT))


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", repo_root() / "target"))


#: Binaries whose crate has another name (the rest are built by `-p <binary>`).
_CRATE_OF = {"h3get": "webreplay"}


def binary(name: str) -> Path:
    """Path of a release binary of the workspace (chanemu, dchannel, webreplay, ...).

    Raises FileNotFoundError with the command that builds it.
    """
    path = target_dir() / "release" / name
    if not path.exists():
        raise FileNotFoundError(
            f"binary {name!r} not found at {path}; build it with "
            f"`cargo build --release -p {_CRATE_OF.get(name, name)}` (or run `./dch setup`)"
        )
    return path


def shared_data() -> Path | None:
    """../shared/data beside the repository, or $DCH_SHARED_DATA; None when absent."""
    env = os.environ.get("DCH_SHARED_DATA")
    path = Path(env) if env else repo_root().parent / "shared" / "data"
    return path if path.is_dir() else None


def cache_dir() -> Path:
    """Generated artefacts (scenario traces, corpora); safe to delete."""
    path = Path(os.environ.get("DCH_CACHE", repo_root() / ".cache"))
    path.mkdir(parents=True, exist_ok=True)
    return path
