"""Workloads on the testbed: Chromium page loads, curl phase breakdown, bulk downloads.

Used by the `dch pageload|curl-phases|bulk` commands and the campaign runner. Each
measurement builds its own testbed (fresh namespaces, daemons and TCP state), runs the
workload on `ue` and returns one flat row (keys: ROW_KEYS; the results store adds
provenance).

Paired runs: the testbed seed — which picks the trace start offset and seeds random
loss — is derived from (seed, page or URL, trial) and never from the scheme, so every
scheme of a comparison sees the same trace sub-sequence for a given page and trial.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dchlab import REPO_ROOT
from dchlab import protocol as P

# ROW_KEYS, RunSpec, channel_counters, paired_seed: re-exported (callers of this API).
from dchlab.run_config import RunConfig, paired_seed, testbed_config  # noqa: F401
from dchlab.workloads.bgusers import clients
from dchlab.workloads.measure import (  # noqa: F401
    ROW_KEYS,
    RunSpec,
    channel_counters,
    in_testbed,
    measure,
    new_row,
)
from dchlab.workloads.pool import Lease, TestbedPool
from dchlab.workloads.rows import Outcome, make_row

log = logging.getLogger(__name__)

# ~200 KB: the transfer times of the paper's Table 2 (809 ms at 2 Mbit/s) imply a page this size.
DEFAULT_CURL_URL = "https://server.test/bytes/200000"


# --- Chromium page loads ---------------------------------------------------------------


def pageload(
    spec: RunConfig,
    corpus: str,
    pages: list[str] | None = None,
    timeout_s: float = 60,
    pool: TestbedPool | None = None,
) -> list[dict[str, Any]]:
    """Load each page of `corpus` (a directory or `synthetic[:SEED]`) once in Chromium.
    `pool`: the caller's (it says what follows the last page); None: a pool of these."""
    c = open_corpus_cached(corpus)
    names = pages if pages else [p.name for p in c.pages]
    with contextlib.ExitStack() as own:
        if pool is None:
            pool = own.enter_context(TestbedPool())
        after = pool.next_run  # what the caller runs after these pages
        rows = []
        for k, n in enumerate(names):
            pool.expect(spec if k + 1 < len(names) else after)
            rows.append(load_one(spec, c, c.page(n).name, timeout_s, pool))
    return rows


_CORPORA: dict[tuple[str, int, int], Any] = {}


def open_corpus_cached(spec: str) -> Any:
    """dchlab.pages.open_corpus, validated once per process and manifest version (the
    campaign runner calls pageload() per group; validating tp5n's manifest and body
    sizes takes ~0.9 s here). A changed manifest.json (mtime or size) is read again."""
    from dchlab.pages import open_corpus

    path = Path(spec)
    try:
        st = (path / "manifest.json").stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:  # synthetic:SEED (generated once into the cache) or an error to report
        key = (spec, 0, 0)
    if key not in _CORPORA:
        _CORPORA[key] = open_corpus(spec)
    return _CORPORA[key]


def load_one(
    spec: RunConfig,
    corpus: Any,
    page: str,
    timeout_s: float = 60,
    pool: TestbedPool | None = None,
) -> dict[str, Any]:
    """One cold Chromium load of `page` in a fresh testbed: its row. The testbed comes
    from `pool` (prepared during the previous load's tail, when the pool expected this
    run; dchlab.workloads.pool), which prepares the one of the run it expects next while
    this load's tail runs. None: a pool of this load alone (nothing prepared)."""
    from dchlab.workloads.validity import page_outcome

    with contextlib.ExitStack() as own:
        if pool is None:
            pool = own.enter_context(TestbedPool())
        t_start = time.monotonic()
        entry = corpus.page(page)
        lease = pool.take(testbed_config(spec, page, corpus.root))
        timing: dict[str, float] = {}
        browser: dict[str, Any] = {}  # the driver's result (browser.LoadResult as a dict)
        users: dict[str, Any] = {}  # background users' summary (devices > 1)

        def body(tb: Any) -> None:
            with background_users(tb, corpus, spec.bg_think, users, spec.bg_client):
                browser.update(load(tb, lease, entry.entry_url, timeout_s, spec.speed_index, pool, timing))  # fmt: skip

        try:
            frame = in_testbed(lease.testbed, body)
        finally:
            lease.close()
    # Requests the corpus itself cannot answer (importer/probe): failing exactly those is
    # the page as recorded (valid); any other fails it (dchlab.workloads.validity).
    measured = Outcome(missing_expected=entry.missing)  # no browser result: invalid
    if browser:
        measured = page_outcome(
            browser, entry.missing_urls, corpus.all_hosts(), entry.missing, spec.protocol
        )
    row = make_row(spec, "pageload", page, frame.judged(measured))
    timing.update(lease.timing)
    row["stats"] = {**row["stats"], "browser": browser}
    if users:
        row["stats"]["background"] = users
    timing["total"] = _ms(time.monotonic() - t_start)
    timing["outside_plt"] = round(timing["total"] - (row.get("plt_ms") or 0.0), 1)
    # Where the load's wall time went (ms): testbed setup/teardown phases, the browser
    # driver's phases, and this function's own (docs/benchmarks.md, "Page-load overhead").
    row["stats"]["timing"] = {
        **(row["stats"].get("timing") or {}),
        "browser": browser.get("timing") or {},
        "load": timing,
    }
    return row


@contextlib.contextmanager
def background_users(
    tb: Any, corpus: Any, think_time: str, summary: dict[str, Any], client: str = clients.DEFAULT
) -> Iterator[None]:
    """With several devices: background users on ue2..ueN (drawing from every page of
    `corpus`, thinking `think_time` between pages, seeded with the testbed's paired
    seed, running `client`) for the duration of the block; their summary lands in `summary`
    (dchlab.workloads.bgusers.background.stop). `idle`: none (summary says so)."""
    if tb.cfg.devices == 1:
        yield
        return
    if think_time == "idle":
        summary.update(users=0, think="idle")
        yield
        return
    from dchlab.workloads.bgusers import background

    pages = tuple(p.name for p in corpus.pages)
    users = background.Users(corpus, pages, think_time, seed=tb.cfg.seed, client=client)
    running = background.start(tb, users)
    try:
        yield
    finally:
        summary.update(background.stop(running), think=users.think, client=client)


def load(
    tb: Any,
    lease: Lease,
    url: str,
    timeout_s: float,
    speed_index: bool | None,
    pool: TestbedPool,
    timing: dict[str, float],
) -> dict[str, Any]:
    """Load `url` in the lease's browser on the started testbed `tb`: the driver's
    result. Once the load event fired (the PLT is measured), `pool` prepares the next
    load's testbed during this one's quiet tail. `timing` gets this function's phases."""
    from dchlab.testbed.runrecord import wait_removals

    t0 = time.monotonic()
    wait_removals()  # the previous load's run directory: never during this PLT
    timing["wait_removals"] = _ms(time.monotonic() - t0)
    t1 = time.monotonic()
    if not pool.start.pipe:
        res = run_browser_on_ue(tb, url, timeout_s, timing)
    else:
        browser = lease.browser()
        browser.speed_index = speed_index
        browser.navigate(url, timeout_s)
        if browser.wait_loaded():  # only the quiet tail is left: prepare the next load's
            spent = pool.prepare_next()
            if spent is not None:
                timing["prepare_next"] = spent
        res = asdict(browser.finish())
    timing["driver"] = _ms(time.monotonic() - t1)
    return res


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def run_browser_on_ue(
    tb: Any, url: str, timeout_s: float, timing: dict[str, float]
) -> dict[str, Any]:
    """The older per-load driver: a Python CDP driver process on ue (NSS db first)."""
    from dchlab.testbed import copy_nss_db

    home = tb.run_dir / "chromium-home"
    t0 = time.monotonic()
    copy_nss_db(home / ".pki" / "nssdb", tb.ca_cert)
    timing["nss_db"] = _ms(time.monotonic() - t0)
    return run_browser(tb, url, timeout_s, home)


def run_browser(tb: Any, url: str, timeout_s: float, home: Path) -> dict[str, Any]:
    """Run the CDP driver (dchlab.workloads.browser) on ue; returns its JSON result."""
    from dchlab.workloads.chromium_pipe import browser_flags

    argv = [
        sys.executable,
        "-m",
        "dchlab.workloads.browser",
        url,
        "--timeout",
        str(timeout_s),
        "--home",
        str(home),
        "--t0",
        repr(time.monotonic()),
        *(f"--flag={f}" for f in browser_flags(tb.cfg)),
    ]
    env = {"PYTHONPATH": str(Path(REPO_ROOT) / "lab")}
    proc = tb.run_ue(argv, capture_output=True, timeout=timeout_s + 60, env=env)
    out = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not out:
        err = proc.stderr.decode(errors="replace")[-500:]
        return {"valid": False, "invalid_reason": f"driver exited {proc.returncode}: {err}"}
    return dict(json.loads(out[-1]))


# --- curl --------------------------------------------------------------------------------

CURL_W = "%{json}"


def fetch_argv(protocol: str, url: str, timeout_s: float) -> list[str]:
    """The command that fetches `url` on ue under `protocol` and prints curl's
    `-w %{json}` fields: curl over TLS/TCP, or under h3 the `h3get` client over QUIC
    (Debian's curl has no HTTP/3; webreplay::h3fetch gives the same fields, with
    time_connect = time_appconnect = the QUIC handshake done)."""
    if protocol == "h3":
        from dchlab.paths import binary

        return [str(binary("h3get")), "--max-time", str(timeout_s), url]
    return ["curl", "-sS", "-o", "/dev/null", "--max-time", str(timeout_s), "-w", CURL_W, url]


def run_curl(tb: Any, url: str, timeout_s: float = 600) -> dict[str, Any]:
    """Fetch `url` once on ue with the client of the testbed's protocol (fetch_argv);
    its JSON fields, or exitcode + errormsg when it printed none."""
    proc = tb.run_ue(
        fetch_argv(tb.cfg.protocol, url, timeout_s), capture_output=True, timeout=timeout_s + 30
    )
    try:
        return dict(json.loads(proc.stdout.decode()))
    except ValueError:
        return {"exitcode": proc.returncode, "errormsg": proc.stderr.decode()[-300:]}


def curl_outcome(w: dict[str, Any], expect_size: int | None = None) -> Outcome:
    """Phases as in the paper's Table 2 (ms) from curl's `-w %{json}` `w`: DNS =
    time_namelookup; TCP connect = time_connect − time_namelookup; TLS =
    time_appconnect − time_connect; transfer = time_total − time_appconnect (request,
    server, response); total = time_total. `expect_size`: the bytes a valid fetch got
    (a mismatch is noted in w["errormsg"], which the row's stats keep)."""
    ok = w.get("exitcode", 1) == 0 and 200 <= int(w.get("http_code", 0)) < 400
    if expect_size is not None and ok and int(w.get("size_download", -1)) != expect_size:
        ok = False
        w["errormsg"] = f"downloaded {w.get('size_download')} bytes, expected {expect_size}"
    if not ok:
        why = w.get("errormsg") or f"curl exit {w.get('exitcode')} http {w.get('http_code')}"
        return Outcome(valid=False, invalid_reason=why)
    dns = w["time_namelookup"] * 1000
    conn = w["time_connect"] * 1000
    app = (w.get("time_appconnect") or 0) * 1000 or conn
    total = w["time_total"] * 1000
    return Outcome(
        valid=True,
        dns_ms=dns,
        connect_ms=conn - dns,
        tls_ms=app - conn,
        ttfb_ms=w["time_starttransfer"] * 1000 - app,
        transfer_ms=total - app,
        total_ms=total,
        size_bytes=int(w.get("size_download", 0)),
    )


#: The columns a curl fetch measures (the rest of its Outcome is the testbed frame's).
CURL_COLUMNS = ("valid", "invalid_reason", "dns_ms", "connect_ms", "tls_ms", "ttfb_ms",
                "transfer_ms", "total_ms", "size_bytes")  # fmt: skip


def curl_row(row: dict[str, Any], w: dict[str, Any], expect_size: int | None = None) -> None:
    """Fill `row` with the columns the curl fetch `w` measured (curl_outcome)."""
    out = curl_outcome(w, expect_size)
    row.update({k: getattr(out, k) for k in CURL_COLUMNS})
    if out.valid and w.get("http_version"):
        # the proof of protocol a page load's rows carry (dchlab.protocol), for one response
        name = {"3": "h3", "2": "h2"}.get(str(w["http_version"]), "other")
        counts = P.protocol_counts({name: 1})
        row.update({f"responses_{k}": n for k, n in counts.items()})


def curl_phases(spec: RunSpec, url: str = DEFAULT_CURL_URL) -> dict[str, Any]:
    """One curl fetch of `url` on ue with its phase breakdown (the paper's Table 2)."""
    row = new_row(spec, "curl-phases", url)

    def body(tb: Any) -> None:
        w = run_curl(tb, url)
        curl_row(row, w)
        row["_curl"] = w

    measure(row, testbed_config(spec, url), body)
    row["stats"] = {**row["stats"], "curl": row.pop("_curl", {})}
    return row


def bulk(spec: RunSpec, sizes: list[int]) -> list[dict[str, Any]]:
    """Download `/bytes/N` from server.test for each size (the paper's Fig. 6)."""
    rows = []
    for n in sizes:
        url = f"https://server.test/bytes/{n}"
        row = new_row(spec, "bulk", url)

        def body(tb: Any, url: str = url, n: int = n, row: dict[str, Any] = row) -> None:
            w = run_curl(tb, url)
            curl_row(row, w, expect_size=n)
            row["_curl"] = w

        measure(row, testbed_config(spec, f"bulk:{n}"), body)
        row["stats"] = {**row["stats"], "curl": row.pop("_curl", {})}
        rows.append(row)
    return rows


# --- app interactions (issue 10: dchlab.apps) ---------------------------------------------


def app(spec: RunSpec, profile: str, interaction: str, timeout_s: float = 60) -> dict[str, Any]:
    """One trial of an app interaction (profile social|shopping|news or a profile file;
    interaction launch|search|item); row with `irt_ms` (docs/apps.md)."""
    from dchlab.apps.run import app as run_app

    return run_app(spec, profile, interaction, timeout_s)
