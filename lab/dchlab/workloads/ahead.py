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

The Chromium prepared ahead inherits its scheme's wrapper and environment (mptcp:
`mptcpize run`; objproxy: the proxy). It is prepared for the scheme the caller says
comes next (`expect_next`, the campaign runner's next cell), else for the current one,
and it is used only by a load whose scheme has the same `Scheme.launch_signature`:
otherwise the mptcp cell after an all-hbc cell would run a Chromium without mptcpize
(measured: fig3's first mptcp rows had 0 MPTCP connections). A load that gets no
prepared browser launches its own and lets it settle before navigating
(chromium_pipe.SETTLE_S), so it does not pay Chromium's start-up inside its PLT.

A prepared testbed that is not taken (the campaign ends, the next load's scheme has
another launch signature) is closed like any testbed: when its campaign ends
(experiments.runner.local_dispatch calls discard()), at interpreter exit at the latest
(atexit), also after SIGTERM; `dch cleanup` removes it after a SIGKILL.
$DCH_PREPARE_AHEAD=0 turns this off.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

log = logging.getLogger(__name__)

#: thread ident -> (prepared Testbed, [its PipeChromium], launch timing, launch signature)
_NEXT: dict[int, tuple[Any, list[Any], dict[str, float], tuple[object, ...]]] = {}
#: thread ident -> the scheme of the load that comes next (expect_next)
_EXPECTED: dict[int, str] = {}


def enabled() -> bool:
    return os.environ.get("DCH_PREPARE_AHEAD", "1") != "0"


def expect_next(scheme: str | None) -> None:
    """Tell this thread's next prepare_next() which scheme the load after the current
    one uses (None: the current load's). The campaign runner calls it per cell."""
    if scheme is None:
        _EXPECTED.pop(threading.get_ident(), None)
    else:
        _EXPECTED[threading.get_ident()] = scheme


def prepare_next(
    cfg: Any, launch: Callable[[Any, dict[str, float]], Any], scheme: str | None = None
) -> None:
    """Prepare a testbed (keep_logs of `cfg`; the scheme `scheme`, else the one given to
    expect_next(), else `cfg`'s; the rest is set when taken) with `launch(tb, timing)`
    run in its ue (returns the browser). Replaces any testbed this thread prepared
    before."""
    from dchlab.testbed import Testbed, TestbedError, TestbedInterrupted

    discard()
    expected = scheme or _EXPECTED.get(threading.get_ident())
    if expected is not None and expected != cfg.scheme:
        cfg = replace(cfg, scheme=expected, agent_args=[], client_args=(), gateway_args=())
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
    _NEXT[threading.get_ident()] = (tb, browsers, timing, tb.scheme.launch_signature(tb))


def take(cfg: Any) -> tuple[Any, list[Any], dict[str, float]] | None:
    """The testbed this thread prepared, configured with `cfg`, or None (none, or its
    browser died, or cfg's scheme cannot start programs before its setup or would
    start them otherwise than the prepared browser was)."""
    from dchlab.testbed import get_scheme

    item = _NEXT.pop(threading.get_ident(), None)
    if item is None:
        return None
    tb, browsers, timing, signature = item
    alive = all(b.proc is not None and b.proc.poll() is None for b in browsers)
    scheme = get_scheme(cfg.scheme)
    if not alive or not scheme.apps_before_setup or scheme.launch_signature(tb) != signature:
        log.debug("prepared testbed %s not used for scheme %s", tb.prefix, cfg.scheme)
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
