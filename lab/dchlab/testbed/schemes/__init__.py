"""The scheme registry: what runs on `ue` and `gw` for `--scheme S`.

A scheme is a small class (one file per family in this package) derived from
`Scheme`, registered under one or more names with `@register`. A spec is
`NAME` or `NAME:PARAMS` (the params stay in `spec`, e.g. `pkt-size:750`).
Every module in this package is imported on first lookup, so adding a scheme
family means adding a file here, nothing else.

The testbed calls, in order:
  1. `required_binaries()`  — checked before anything is built;
  2. `links(tb)`            — the emulated links to create between ue and gw:
                              {name: chanemu profile}; names must be in
                              `addressing.LINKS` (hbc, llc, ideal);
  3. `webreplay_args(tb)`   — extra arguments for the replay server in srv;
  4. `setup(tb)`            — start daemons (`tb.spawn`), add routes (`tb.ip`);
                              must leave ue with a default route;
  5. `wrap(tb, argv)` and `env(tb)` for every command run on ue;
  6. `collect(tb)`          — live measurements for the stats, before anything stops;
  7. `stop_first()`         — daemons to stop before the others (to flush stats);
  7b. `after_stop(tb, stats)` — once every daemon stopped and its stats file was
                              read, before the run directory is deleted (post-process logs);
  8. `summary(stats)`       — an optional line `dch shell` prints at the end.
The stats files a scheme's daemons write are declared with `tb.expect_stats(...)`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dchlab.testbed.errors import TestbedError

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed


class Scheme:
    """Base class: both channels as emulated links, nothing else."""

    #: family of the scheme (agent, plain, mptcp, ideal, proxy, ...), for stats.
    kind = "base"
    #: wrap() and env() do not depend on setup(): programs may start on ue before it
    #: (Testbed.on_ue), e.g. Chromium while the links and agents come up.
    apps_before_setup = True

    def __init__(self, spec: str) -> None:
        self.spec = spec
        name, _, params = spec.partition(":")
        self.name = name
        self.params = params

    def required_binaries(self) -> list[str]:
        return []

    def links(self, tb: Testbed) -> dict[str, str]:
        return {"hbc": tb.channels["hbc"], "llc": tb.channels["llc"]}

    def webreplay_args(self, tb: Testbed) -> list[str]:
        return []

    def setup(self, tb: Testbed) -> None:
        raise NotImplementedError

    def wrap(self, tb: Testbed, argv: list[str]) -> list[str]:
        return argv

    def env(self, tb: Testbed) -> dict[str, str]:
        return {}

    def collect(self, tb: Testbed) -> dict[str, Any]:
        return {}

    def stop_first(self) -> list[str]:
        return []

    def after_stop(self, tb: Testbed, stats: dict[str, Any]) -> None:
        """Add to `stats` from files the stopped daemons left in tb.run_dir."""

    def summary(self, stats: dict[str, Any]) -> str | None:
        """One line for the user at the end of `dch shell` (None: nothing to say)."""
        return None

    def invalid_reason(self, stats: dict[str, Any]) -> str | None:
        """Why a measurement under this scheme did not test the scheme (its stats
        show it never took effect), or None. Such a row is marked invalid."""
        return None

    def launch_signature(self, tb: Testbed) -> tuple[object, ...]:
        """What a program started on ue before setup() inherits from the scheme: its
        wrapper and environment. A browser started for one scheme (prepared ahead,
        dchlab.workloads.pool) may serve another only if the two are equal: a
        Chromium started without `mptcpize` or without the proxy would silently
        measure another scheme."""
        return (tuple(self.wrap(tb, [])), tuple(sorted(self.env(tb).items())))


@dataclass(frozen=True)
class Entry:
    factory: Callable[[str], Scheme]
    help: str
    params: str  # "" (none), "optional" or "required"


_REGISTRY: dict[str, Entry] = {}
_loaded = False


def register(*names: str, help: str, params: str = "") -> Callable[[type[Scheme]], type[Scheme]]:
    """Class decorator: register a Scheme subclass under `names`."""

    def deco(cls: type[Scheme]) -> type[Scheme]:
        for n in names:
            _REGISTRY[n] = Entry(cls, help, params)
        return cls

    return deco


def _load_all() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for info in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{info.name}")


def known_schemes() -> dict[str, str]:
    """{name: one-line help}; names with `:PARAMS` take parameters."""
    _load_all()
    out = {}
    for n, e in sorted(_REGISTRY.items()):
        suffix = {"": "", "optional": "[:PARAMS]", "required": ":PARAMS"}[e.params]
        out[n + suffix] = e.help
    return out


def get_scheme(spec: str) -> Scheme:
    """The Scheme for `spec`; TestbedError listing the known schemes if unknown."""
    _load_all()
    name, sep, params = spec.strip().partition(":")
    entry = _REGISTRY.get(name)
    if entry is None:
        raise TestbedError(f"unknown scheme {spec!r}; known schemes: {', '.join(known_schemes())}")
    if entry.params == "" and sep:
        raise TestbedError(f"scheme {name!r} takes no parameters (got {spec!r})")
    if entry.params == "required" and not params:
        raise TestbedError(f"scheme {name!r} needs a parameter, e.g. {name}:750")
    return entry.factory(spec.strip())
