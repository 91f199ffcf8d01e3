"""Module boundaries: no package (apps, workloads, testbed, ...) imports another's
private names, and the shared workload frame (workloads/measure.py) depends on
neither of its users."""

from __future__ import annotations

import ast
from pathlib import Path

import dchlab

PKG = Path(dchlab.__file__).parent


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from dchlab... import name` in `path`, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dchlab"):
            out += [(node.module or "", a.name) for a in node.names]
    return out


def _package(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_no_package_imports_private_names_of_another() -> None:
    found = [
        f"{path.relative_to(PKG)}: from {mod} import {name}"
        for path in sorted(PKG.rglob("*.py"))
        for mod, name in _imports(path)
        if name.startswith("_") and _package(mod) != path.relative_to(PKG).parts[0]
    ]
    assert found == []


def test_measure_depends_on_neither_workloads_api_nor_apps() -> None:
    mods = {mod for mod, _ in _imports(PKG / "workloads" / "measure.py")}
    # the row's types (workloads/rows.py) are a leaf: they import no workload nor app
    leaf = {mod for mod, _ in _imports(PKG / "workloads" / "rows.py")}
    assert not {m for m in leaf if m.startswith(("dchlab.apps", "dchlab.workloads"))}, leaf
    mods.discard("dchlab.workloads.rows")
    assert not {m for m in mods if m.startswith(("dchlab.apps", "dchlab.workloads"))}, mods
    apps_run = {mod for mod, _ in _imports(PKG / "apps" / "run.py")}
    assert "dchlab.workloads.api" not in apps_run  # api imports apps.run: that was the cycle
