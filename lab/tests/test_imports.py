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


def _imported_modules(path: Path, text: str | None = None) -> set[str]:
    """Every module the module at `path` (or `text` as if it were there) imports:
    `import a.b`, `from a.b import c` (also `a.b.c`, which may be a module), relative
    imports resolved; at any depth (inside functions and `if TYPE_CHECKING:` too)."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    package = parts[:-1]  # a module's package; for __init__.py the package itself
    source = path.read_text() if text is None else text
    out: set[str] = set()
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            mod = ".".join([*base, *([node.module] if node.module else [])])
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def _commands(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "dchlab.commands" or m.startswith("dchlab.commands.")}


def test_no_lower_layer_imports_commands() -> None:
    """Commands sit on top: only commands/ and cli.py may import them (a function a
    lower layer needs lives in that layer, e.g. workloads/probe.py's probe_corpus)."""
    found = [
        f"{path.relative_to(PKG)}: {mod}"
        for path in sorted(PKG.rglob("*.py"))
        if path.relative_to(PKG).parts[0] not in ("commands", "cli.py")
        for mod in sorted(_commands(_imported_modules(path)))
    ]
    assert found == []


def test_the_commands_import_scan_sees_every_form() -> None:
    """The scan above finds each way of writing such an import (else it proves nothing)."""
    where = PKG / "pages" / "named.py"  # the package relative imports resolve against
    forms = {
        "import dchlab.commands.corpus": "dchlab.commands.corpus",
        "from dchlab.commands.corpus import probe_corpus": "dchlab.commands.corpus",
        "from dchlab import commands": "dchlab.commands",
        "from ..commands import corpus": "dchlab.commands",
        "from .. import commands": "dchlab.commands",
        "def f():\n    from dchlab.commands import shell": "dchlab.commands",
    }
    for src, expected in forms.items():
        assert expected in _commands(_imported_modules(where, src)), src
    clean = "from dchlab.pages import corpus\nimport dchlab.commandsx\nfrom . import tp5n\n"
    assert _commands(_imported_modules(where, clean)) == set()
    assert "dchlab.pages.tp5n" in _imported_modules(where, clean)
