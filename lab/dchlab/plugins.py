"""Plug-in registries: named implementations of one interface, one module each, in one
package (the analysis kinds of dchlab.experiments.analyses; the testbed's schemes and
the campaign workload kinds follow the same pattern).

The package makes one `Registry`; each of its modules adds what it defines when it is
imported, and the registry imports every module of the package on its first lookup,
so a new plug-in is a file in the package and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, from the modules of package `package` (a dotted name)."""

    def __init__(self, package: str) -> None:
        self.package = package
        self._entries: dict[str, T] = {}
        self._imported = False

    def add(self, name: str, entry: T) -> None:
        """Register `entry` as `name` (a module of the package calls this on import)."""
        self._entries[name] = entry

    def entries(self) -> dict[str, T]:
        """Every entry by name, sorted by name, once the package's modules are imported."""
        if not self._imported:
            self._imported = True
            path = importlib.import_module(self.package).__path__
            for info in pkgutil.iter_modules(path):
                importlib.import_module(f"{self.package}.{info.name}")
        return dict(sorted(self._entries.items()))

    def get(self, name: str) -> T | None:
        """The entry registered as `name`, or None."""
        return self.entries().get(name)
