"""The testbeds of consecutive page loads, one prepared while the other ends.

Chromium needs 0.4-1.5 s on this machine before it can navigate (process start,
profile, renderer, CDP attach) — longer than building the whole testbed. So whoever
runs loads one after another (the campaign's dispatcher, `dch pageload`) owns a
`TestbedPool` and tells it which run comes next (`expect`). Once a load's `load` event
has fired (its PLT is measured; only the network-quiet tail and the teardown remain),
the load asks the pool to `prepare_next()`: namespaces (`Testbed.prepare`) and a fresh
Chromium with a fresh profile starting in its ue, for the run expected next. The next
`take(cfg)` gives that testbed its configuration (`Testbed.use`: trace offset, scheme,
channels, corpus) and the load builds the rest — emulators, agents, servers — while that
Chromium finishes starting. Nothing runs during another load's PLT window (navigation
until the load event); every load still gets its own namespaces, emulators, agents,
servers, Chromium process and profile.

The Chromium prepared ahead inherits its scheme's wrapper and environment (mptcp:
`mptcpize run`; objproxy: the proxy), so it is prepared for the scheme expected next and
used only by a load whose scheme has the same `Scheme.launch_signature`: otherwise the
mptcp cell after an all-hbc cell would run a Chromium without mptcpize (measured: fig3's
first mptcp rows had 0 MPTCP connections), and with the same Chromium flags of its own
(`chromium_pipe.browser_flags`: an h3 load's forced QUIC). A load that gets no prepared browser launches
its own and lets it settle before navigating (chromium_pipe.SETTLE_S), so it does not
pay Chromium's start-up inside its PLT.

A prepared testbed that is not taken (nothing follows, the next scheme starts its
browser otherwise) is closed when its pool closes, at interpreter exit at the latest
(the testbed's atexit), also after SIGTERM; `dch cleanup` removes it after a SIGKILL.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dchlab.run_config import RunConfig, testbed_config

if TYPE_CHECKING:
    from dchlab.testbed import Testbed, TestbedConfig
    from dchlab.workloads.chromium_pipe import PipeChromium

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BrowserStart:
    """How a load's browser starts (the switches docs/benchmarks.md compares).

    pipe: Chromium driven from this process over a CDP pipe (False: the older per-load
        Python driver on ue, dchlab.workloads.browser); early: launched while the
        testbed builds (False: once it is up); ahead: the next load's testbed and
        browser prepared during this load's quiet tail (needs pipe and early).
    """

    pipe: bool = True
    early: bool = True
    ahead: bool = True

    @classmethod
    def from_env(cls) -> BrowserStart:
        """$DCH_BROWSER_DRIVER=subprocess, $DCH_BROWSER_EARLY=0, $DCH_PREPARE_AHEAD=0:
        read once, where a pool is made (bench_overhead's old mode sets them)."""
        pipe = os.environ.get("DCH_BROWSER_DRIVER", "pipe") != "subprocess"
        early = pipe and os.environ.get("DCH_BROWSER_EARLY", "1") != "0"
        return cls(pipe, early, early and os.environ.get("DCH_PREPARE_AHEAD", "1") != "0")


@dataclass
class Lease:
    """A testbed (not started yet) for one load, and the browser starting in its ue.

    browsers: empty until the browser is launched (during the testbed's start when it
    starts early; at once when prepared ahead); timing: the launch's phases (ms)."""

    testbed: Testbed
    browsers: list[PipeChromium] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    prepared: bool = False

    def launch(self, tb: Testbed) -> None:
        """Start a fresh Chromium in tb's ue (an on_ue hook)."""
        from dchlab.workloads.chromium_pipe import PipeChromium, launch_browser

        self.browsers.append(launch_browser(tb, self.timing, PipeChromium))

    def browser(self) -> PipeChromium:
        """The browser of this load, launched now if it was not yet (a late start)."""
        if not self.browsers:
            self.launch(self.testbed)
        return self.browsers[0]

    def close(self) -> None:
        """Kill its browsers (the testbed is closed by whoever started it)."""
        for b in self.browsers:
            b.close()


class TestbedPool:
    """The testbed prepared for the next load, owned by whoever runs loads in order.

    `expect(run)` says which run comes next (None: none), `take(cfg)` hands out the
    testbed of the current load, `prepare_next()` (called in a load's quiet tail)
    prepares the next one, `close()` discards what was prepared and not taken."""

    __test__ = False

    def __init__(self, start: BrowserStart | None = None) -> None:
        self.start = start or BrowserStart.from_env()
        self._next_run: RunConfig | None = None
        self._current: TestbedConfig | None = None
        self._prepared: tuple[Lease, tuple[object, ...]] | None = None

    def __enter__(self) -> TestbedPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def next_run(self) -> RunConfig | None:
        """The run expected after the current load (None: nothing follows)."""
        return self._next_run

    def expect(self, run: RunConfig | None) -> None:
        """Say which run follows the current load (None: none, nothing is prepared)."""
        self._next_run = run

    def take(self, cfg: TestbedConfig) -> Lease:
        """The testbed of a load with configuration `cfg`: the prepared one if its browser
        is alive and starts the way cfg's scheme starts it, else a new one (whose browser
        launches while it builds, when the browser starts early)."""
        from dchlab.testbed import Testbed

        self._current = cfg
        lease = self._take_prepared(cfg)
        if lease is not None:
            return lease
        lease = Lease(Testbed(cfg))
        if self.start.early:
            lease.testbed.on_ue(lease.launch)
        return lease

    def _take_prepared(self, cfg: TestbedConfig) -> Lease | None:
        from dchlab.testbed import get_scheme

        item, self._prepared = self._prepared, None
        if item is None:
            return None
        lease, signature = item
        tb = lease.testbed
        alive = all(b.proc is not None and b.proc.poll() is None for b in lease.browsers)
        scheme = get_scheme(cfg.scheme)
        # its namespaces were made for a number of devices (TestbedConfig.devices)
        same_devices = (tb.cfg.devices, tb.cfg.shared_hbc) == (cfg.devices, cfg.shared_hbc)
        if (not alive or not same_devices or not scheme.apps_before_setup
                or _signature(tb, scheme, cfg) != signature):  # fmt: skip
            log.debug("prepared testbed %s not used for scheme %s", tb.prefix, cfg.scheme)
            _discard(lease)
            return None
        tb.use(cfg)
        lease.timing["prepared_ahead"] = 1.0
        return lease

    def prepare_next(self) -> float | None:
        """Prepare the testbed of the run expected next (namespaces, its browser
        launching), replacing any prepared before; the ms it took (None: nothing is
        expected, or this pool does not prepare ahead). A failure is logged: the next
        load then builds its own."""
        from dchlab.testbed import Testbed, TestbedError, TestbedInterrupted

        run, current = self._next_run, self._current
        if not self.start.ahead or run is None or current is None:
            return None
        t0 = time.monotonic()
        self.close()
        # what the prepared testbed's servers start with: the current load's corpus (the
        # next load's, usually); use() gives it the next load's configuration
        cfg = testbed_config(run, None, current.corpus, keep_logs=current.keep_logs)
        lease = Lease(Testbed(cfg), prepared=True)
        lease.testbed.on_ue(lease.launch)
        try:
            lease.testbed.prepare()
        except TestbedInterrupted:
            lease.close()
            raise
        except (TestbedError, OSError) as e:
            log.warning("could not prepare the next testbed ahead (the next load builds its own): %s", e)  # fmt: skip
            lease.close()
            return _ms(time.monotonic() - t0)
        if not lease.browsers:  # the scheme starts programs only after its setup
            lease.testbed.close()
        else:
            tb = lease.testbed
            self._prepared = (lease, _signature(tb, tb.scheme, tb.cfg))
        return _ms(time.monotonic() - t0)

    def prepared_testbed(self) -> Testbed | None:
        """The testbed prepared and not taken yet, if any (for reports and tests)."""
        return self._prepared[0].testbed if self._prepared else None

    def close(self) -> None:
        """Close the testbed prepared and not taken, if any."""
        item, self._prepared = self._prepared, None
        if item is not None:
            _discard(item[0])


def _discard(lease: Lease) -> None:
    lease.close()
    lease.testbed.close()


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _signature(tb: Testbed, scheme: Any, cfg: TestbedConfig) -> tuple[object, ...]:
    """How a browser on tb's ue starts for a load of `cfg` under `scheme`: the scheme's
    wrapper and environment, and the load's own Chromium flags (its protocol's). A
    prepared browser serves a load only if the two are equal."""
    from dchlab.workloads.chromium_pipe import browser_flags

    return (scheme.launch_signature(tb), tuple(browser_flags(cfg)))
