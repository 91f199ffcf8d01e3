"""Atomic file and directory creation, so concurrent runs never see half a file."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temp file in the same directory, then rename over `path`.

    mkstemp creates 0600 files; they get the usual 0666 & ~umask so that other
    users (e.g. an emulator that dropped privileges) can read traces.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_dir_once(final: Path, build: Callable[[Path], None], marker: str) -> Path:
    """Create directory `final` by running `build(tmpdir)` and renaming it into place.

    If `final/marker` already exists the directory is reused. When two processes
    race, both build, one rename wins and the loser discards its copy: readers
    only ever see complete directories.
    """
    if (final / marker).exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    try:
        build(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
        try:
            os.rename(tmp, final)
        except OSError:
            # Someone else finished first (or a stale incomplete dir exists).
            if not (final / marker).exists():
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
