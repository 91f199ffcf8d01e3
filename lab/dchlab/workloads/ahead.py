"""The next page load's testbed, prepared while the current load's quiet tail runs.

Chromium needs 0.4-1.5 s on this machine before it can navigate (process start,
profile, renderer, CDP attach) — longer than building the whole testbed. So once a
load's `load` event has fired (its PLT is measured; only the network-quiet tail and the
teardown remain), `load_one` prepares the testbed of the next load of this thread:
namespaces (`Testbed.prepare`) and a fresh Chromium with a fresh profile starting in
its ue. The next `load_one` takes it, gives it its configuration (`Testbed.use`: trace
offset, scheme, channels, corpus) and builds the rest — emulators, agents, servers —
while that Chromium finishes starting. Nothing runs during another load's PLT window
(navigation until the load event), every load still gets its own namespaces, emulators,
agents, servers, Chromium process and profile.

A prepared testbed that is not taken (the process ends, the next load is of a scheme
that starts programs only after its setup, such as objproxy) is closed like any
testbed: at interpreter exit at the latest (atexit), also after SIGTERM; `dch cleanup`
removes it after a SIGKILL. $DCH_PREPARE_AHEAD=0 turns this off.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: thread ident -> (prepared Testbed, [its PipeChromium], launch timing)
_NEXT: dict[int, tuple[Any, list[Any], dict[str, float]]] = {}


def enabled() -> bool:
    return os.environ.get("DCH_PREPARE_AHEAD", "1") != "0"


def prepare_next(cfg: Any, launch: Callable[[Any, dict[str, float]], Any]) -> None:
    """Prepare a testbed (scheme and keep_logs of `cfg`; the rest is set when taken)
    with `launch(tb, timing)` run in its ue (returns the browser). Replaces any
    testbed this thread prepared before."""
    from dchlab.testbed import Testbed, TestbedError, TestbedInterrupted

    discard()
    tb = Testbed(cfg)
    browsers: list[Any] = []
    timing: dict[str, float] = {}
    tb.on_ue(lambda t: browsers.append(launch(t, timing)))
    try:
        tb.prepare()
    except TestbedInterrupted:
        for b in browsers:
            b.close()
        raise
    except (TestbedError, OSError) as e:
        log.warning(
            "could not prepare the next testbed ahead (the next load builds its own): %s", e
        )
        for b in browsers:
            b.close()
        return
    if not browsers:  # the scheme starts programs only after its setup
        tb.close()
        return
    _NEXT[threading.get_ident()] = (tb, browsers, timing)


def take(cfg: Any) -> tuple[Any, list[Any], dict[str, float]] | None:
    """The testbed this thread prepared, configured with `cfg`, or None (none, or its
    browser died, or cfg's scheme cannot start programs before its setup)."""
    from dchlab.testbed import get_scheme

    item = _NEXT.pop(threading.get_ident(), None)
    if item is None:
        return None
    tb, browsers, timing = item
    alive = all(b.proc is not None and b.proc.poll() is None for b in browsers)
    if not alive or not get_scheme(cfg.scheme).apps_before_setup:
        _close(tb, browsers)
        return None
    return tb.use(cfg), browsers, timing


def discard() -> None:
    """Close the testbed this thread prepared, if any."""
    item = _NEXT.pop(threading.get_ident(), None)
    if item is not None:
        _close(item[0], item[1])


def _close(tb: Any, browsers: list[Any]) -> None:
    for b in browsers:
        b.close()
    tb.close()
