"""code_revision(): which changes make a measurement's code "dirty"."""

from __future__ import annotations

import subprocess

import pytest

from dchlab.experiments import store


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _revision():
    store.code_revision.cache_clear()  # cached per process: one revision per run
    return store.code_revision()


@pytest.fixture(autouse=True)
def _uncached():
    yield
    store.code_revision.cache_clear()  # later tests see this repository's revision


def test_dirty_is_code_not_the_labs_own_results(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "repo_root", lambda: tmp_path)
    _git(tmp_path, "init", "-q")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "policy.py").write_text("ALPHA = 0.75\n")
    (tmp_path / "results" / "published").mkdir(parents=True)
    (tmp_path / "results" / "published" / "fig8.parquet").write_bytes(b"rows v1")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    assert _revision() == (head, False)
    # `dch run --publish` rewrote a published file: the code is what HEAD says
    (tmp_path / "results" / "published" / "fig8.parquet").write_bytes(b"rows v2")
    (tmp_path / "scratch.log").write_text("untracked\n")
    assert _revision() == (head, False)
    # a tracked source file changed: dirty
    (tmp_path / "lab" / "policy.py").write_text("ALPHA = 3\n")
    assert _revision() == (head, True)
