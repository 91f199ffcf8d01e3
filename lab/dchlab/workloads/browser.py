"""Chromium page loads over the DevTools protocol (CDP): the load itself (`attach`,
`navigate`, `finish`), shared by two drivers.

- `dchlab.workloads.chromium_pipe` (what `api.load_one` uses): the lab process starts
  Chromium on ue with --remote-debugging-pipe and drives it over the pipe.
- this module as a program (`python -m dchlab.workloads.browser URL ...`, used by the
  corpus probe, the local replay and DCH_BROWSER_DRIVER=subprocess): runs *inside* the
  namespace whose network it measures, starts Chromium next to itself, talks CDP over
  a websocket on the namespace's loopback and prints one JSON result on stdout.

Per load: a fresh --user-data-dir (cold HTTP cache, cold DNS cache, no cookies or HSTS)
and a fresh Chromium process; the testbed CA is trusted through an NSS database under
$HOME/.pki/nssdb (never --ignore-certificate-errors, so a broken certificate fails as it
would for a user). Measured:

- plt_ms = loadEventEnd − navigationStart (Navigation Timing, as the paper);
- the main document's dns/connect/tls/ttfb from the PerformanceNavigationTiming entry:
  dns = domainLookupEnd − domainLookupStart, connect (TCP) = secureConnectionStart −
  connectStart, tls = connectEnd − secureConnectionStart, ttfb = responseStart −
  requestStart;
- the connections the load opened, one entry each (`connections`: Chromium's
  connectionId, the protocol of its first response and its handshake, connectEnd −
  connectStart of that response's ResourceTiming: TCP + TLS for h2, the QUIC handshake
  for h3; dchlab.workloads.handshakes);
- resources loaded/failed from Network.* events (failed: Network.loadingFailed or HTTP
  status ≥ 400; an error answer Chromium dropped is reported as `HTTP <status>`, see
  `answered_error`), counted until the network has been quiet for 500 ms after `load`
  (scripts may fetch after `load`).

Values are read from the page in an isolated world of our own
(dchlab.workloads.isolated): pages replace JSON.stringify, Array.prototype.map or
toJSON, and the read-out must not run on them.

valid = the main document loaded with 2xx/3xx, no certificate error, no failed
resource, no timeout; invalid_reason says why not. The driver knows no corpus: it
reports every failed request (`failed`) and the document-level verdict
(`document_error`), and dchlab.workloads.validity judges the failures against the
page's record of what it cannot answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dchlab.workloads import handshakes, isolated, pagemetrics
from dchlab.workloads.validity import one_line

CHROMIUM = os.environ.get("DCH_CHROMIUM", "/usr/lib/chromium/chromium")
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-features=OptimizationHints,MediaRouter,Translate,InterestFeedContentSuggestions,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater",
    "--no-proxy-server",
    "--mute-audio",
    "--window-size=1366,768",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]
QUIET_MS = 500.0  # network quiet time after `load` before resources are counted
MAX_TAIL_S = 5.0  # at most this long after `load`
METRICS_TIMEOUT_S = 5.0  # for each CDP step of the page metrics after the tail
_WS_RE = re.compile(r"DevTools listening on (ws://\S+)")


@dataclass
class LoadResult:
    url: str
    plt_ms: float | None = None
    valid: bool = False
    invalid_reason: str = ""
    resources_loaded: int = 0
    resources_failed: int = 0
    failed_urls: list[str] = field(default_factory=list)  # "URL (error)", first 50, for people
    # Every failed request as [URL, error] (net::ERR_* or "HTTP <status>"), in no particular
    # order: what dchlab.workloads.validity judges against the page's expected-missing set.
    failed: list[list[str]] = field(default_factory=list)
    # Why the load is invalid regardless of failed subresources ("" when the document
    # loaded): the driver's invalid_reason also counts failures, which a corpus may expect.
    document_error: str = ""
    dns_ms: float | None = None
    connect_ms: float | None = None
    tls_ms: float | None = None
    ttfb_ms: float | None = None
    # Page metrics (dchlab.workloads.pagemetrics), ms since the navigation start like
    # plt_ms; speed_index_ms/atf_ms only with the screencast ($DCH_SPEED_INDEX=1).
    fcp_ms: float | None = None
    lcp_ms: float | None = None
    speed_index_ms: float | None = None
    atf_ms: float | None = None
    screencast_frames: int = 0  # frames after the navigation start
    metrics_error: str = ""  # why a page metric is missing (the load stays valid)
    main_status: int | None = None
    protocol: str | None = None
    # Responses of the page's requests by the protocol they came over (CDP
    # Response.protocol: "h3", "h2", "http/1.1", ...), redirects included: the proof of
    # what a load under `protocol: h3` used (dchlab.protocol)
    protocols: dict[str, int] = field(default_factory=dict)
    # Connections the load opened (a response whose ResourceTiming has a connect phase),
    # in the order their first response arrived: {"id", "protocol", "handshake_ms"}
    connections: list[dict[str, Any]] = field(default_factory=list)
    bytes_received: int = 0
    console_errors: list[str] = field(default_factory=list)  # JS exceptions, decode errors
    fonts: dict[str, int] = field(default_factory=dict)  # document.fonts by status
    images_broken: int = 0  # <img> elements that finished without decodable pixels
    driver_ms: float = 0.0  # wall time of the whole load including browser start/stop
    # Wall time per phase (ms): python_start (driver process start, when the caller passed
    # --t0), launch (Chromium until DevTools), cdp (attach, enable domains), load
    # (navigate until the load event: ~ the PLT), tail (network-quiet tail), timing (read
    # Navigation Timing), metrics (paint timing, screencast frames -> Speed Index), stop
    # (browser shutdown), cleanup (profile removal).
    timing: dict[str, float] = field(default_factory=dict)


class CDP:
    """Minimal CDP client: flat sessions, futures per command id, an event queue."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        import websockets

        with contextlib.suppress(websockets.ConnectionClosed):
            await self._read_all()
        # The browser went away: fail what still waits for a reply instead of hanging.
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("browser connection closed"))
        self.pending.clear()

    async def _read_all(self) -> None:
        async for raw in self.ws:
            msg = json.loads(raw)
            if "id" in msg and msg["id"] in self.pending:
                fut = self.pending.pop(msg["id"])
                if not fut.done():
                    fut.set_result(msg)
            elif "method" in msg:
                await self.events.put(msg)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send(json.dumps(msg))
        reply = await fut
        if "error" in reply:
            raise RuntimeError(f"CDP {method}: {reply['error']}")
        return dict(reply.get("result", {}))


def chromium_env(home: Path, profile: Path) -> dict[str, str]:
    """HOME and TMPDIR of a Chromium process whose --user-data-dir is `profile`; the
    TMPDIR is `profile`'s sibling `<name>-tmp` (created here).

    Why TMPDIR: Chromium makes /tmp/org.chromium.Chromium.XXXXXX (its singleton
    socket) at start and removes it only on a clean exit; the lab kills every browser
    after its load, so with the default TMPDIR each load left one directory behind
    (10,473 on this machine after the campaigns). Beside the throwaway profile it goes
    away with the profile's directory (a testbed's run directory, or load_page's)."""
    tmp = profile.with_name(profile.name + "-tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "TMPDIR": str(tmp)}


def launch_chromium(
    profile: Path, home: Path, extra: list[str] | None = None, log_path: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start Chromium with a new profile; returns it and its DevTools websocket URL.
    Its stdout and stderr (D-Bus and GPU chatter, crash messages) go to `log_path`
    (default: `<profile>.log` beside the profile), never into a load's result: the
    DevTools line is read from there."""
    env = {**os.environ, **chromium_env(home, profile)}
    prepare_profile(profile)
    log_path = log_path or profile.with_name(profile.name + ".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        start = log.tell()
        proc = subprocess.Popen(
            # DCH_CHROMIUM_EXTRA_FLAGS: for debugging the driver outside the testbed only.
            [
                CHROMIUM,
                *FLAGS,
                *shlex.split(os.environ.get("DCH_CHROMIUM_EXTRA_FLAGS", "")),
                *(extra or []),
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: we stop all of it by pgid
        )
    deadline = time.monotonic() + 20
    text = ""
    while time.monotonic() < deadline:
        with open(log_path, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        m = _WS_RE.search(text)
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}: {_last_line(text)}")
        time.sleep(0.02)
    stop_chromium(proc)
    raise RuntimeError(f"chromium did not open DevTools within 20 s: {_last_line(text)}")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "(no output)"


def prepare_profile(profile: Path) -> None:
    """A new --user-data-dir: no network prediction (preconnect/preresolve/prefetch), so
    every connection the page needs is made when the page asks for it and the measured
    phases are the page's."""
    (profile / "Default").mkdir(parents=True, exist_ok=True)
    (profile / "Default" / "Preferences").write_text(
        json.dumps({"net": {"network_prediction_options": 2}})
    )


def stop_chromium(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # helpers left behind in the group


def _browser_initiated(p: dict[str, Any]) -> bool:
    """Requests Chromium makes for its own UI, not for the page: the favicon (from
    /favicon.ico or <link rel=icon>) and the web-app manifest. They never delay `load`."""
    if p.get("type") == "Manifest":
        return True
    return p.get("type") == "Other" and (p.get("initiator") or {}).get("type") == "other"


# Errors with which Chromium drops a response that did arrive: cross-origin bodies
# blocked by ORB (a 404's text/plain "not found" as an <img> or <script>) or by a
# response header.
BLOCKED_RESPONSE = frozenset({"net::ERR_BLOCKED_BY_ORB", "net::ERR_BLOCKED_BY_RESPONSE"})
NOT_FOUND = 404


def answered_error(error: str, http_status: int) -> str:
    """How a failed request is reported: `HTTP <status>` when the server answered with
    an error status and Chromium then dropped the answer (blocked it, or, for a 404, let
    the loader abort it: a 404 script), else the network error itself. The server's
    answer is what the validity rules judge (a 404 is the replay saying the corpus
    lacks the URL); a failure after the answer began (reset, truncated body) keeps its
    net:: error."""
    if http_status >= 400 and (
        error in BLOCKED_RESPONSE or (http_status == NOT_FOUND and error == "net::ERR_ABORTED")
    ):
        return f"HTTP {http_status}"
    return error


async def _load(ws_url: str, url: str, res: LoadResult, timeout_s: float) -> None:
    import websockets

    async with websockets.connect(ws_url, max_size=None, ping_interval=None) as ws:
        await _drive(CDP(ws), url, res, timeout_s)


async def _drive(cdp: CDP, url: str, res: LoadResult, timeout_s: float) -> None:
    """Load `url` in the browser's first page target over `cdp` and fill `res`."""
    t_attach = time.monotonic()
    sid = await attach(cdp)
    res.timing["cdp"] = round((time.monotonic() - t_attach) * 1000, 1)
    await navigate(cdp, sid, url, res, timeout_s)


async def attach(cdp: CDP) -> str:
    """Attach to the browser's first page target and enable the domains the load
    watches; returns the session id."""
    targets = await cdp.send("Target.getTargets")
    page = next(t for t in targets["targetInfos"] if t["type"] == "page")
    sid = (
        await cdp.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})
    )["sessionId"]
    await cdp.send("Network.enable", {}, sid)
    await cdp.send("Network.setCacheDisabled", {"cacheDisabled": True}, sid)
    await cdp.send("Page.enable", {}, sid)
    await cdp.send("Log.enable", {}, sid)
    await cdp.send("Runtime.enable", {}, sid)
    return str(sid)


async def navigate(
    cdp: CDP,
    sid: str,
    url: str,
    res: LoadResult,
    timeout_s: float,
    on_load: Callable[[], None] | None = None,
    observe: Callable[[str, dict[str, Any]], None] | None = None,
    last: bool = True,
    speed_index: bool | None = None,
) -> None:
    """Navigate the attached page (session `sid`) to `url`, follow the load until the
    network is quiet, and fill `res`. `on_load()` is called when the load event fired
    (the PLT is measured; the quiet tail follows). `observe(method, params)` sees every
    CDP event of the load (browsing sessions count request sizes and connections);
    `last=False`: more navigations follow on this `cdp` (its reader keeps running).
    `speed_index`: record the screencast (pagemetrics.screencast_enabled)."""
    requests: dict[str, str] = {}  # requestId -> url
    status: dict[str, int] = {}
    # HTTP status as the network service saw it: also for responses the renderer never
    # got (a cross-origin 404 blocked by ORB has no responseReceived, only this)
    wire_status: dict[str, int] = {}
    done: set[str] = set()
    failed: dict[str, str] = {}
    main_id: str | None = None
    loaded = False
    last_activity = time.monotonic()
    screencast = None
    if pagemetrics.screencast_enabled(speed_index):
        screencast = pagemetrics.Screencast(cdp, sid)
        await screencast.start()
    # transitionType "link": a typed navigation would let Chromium's loading predictor
    # preconnect to the origin in parallel, hiding DNS/TCP/TLS from the main document.
    t_nav = time.monotonic()
    nav = await cdp.send("Page.navigate", {"url": url, "transitionType": "link"}, sid)
    if nav.get("errorText"):
        res.invalid_reason = f"navigation failed: {nav['errorText']}"
    loader = nav.get("loaderId")
    deadline = time.monotonic() + timeout_s
    load_at = 0.0
    while True:
        now = time.monotonic()
        inflight = len(set(requests) - done - set(failed))
        if loaded and (
            (inflight == 0 and (now - last_activity) * 1000 >= QUIET_MS)
            or now - load_at > MAX_TAIL_S
        ):
            break
        if now > deadline:
            if not loaded:
                res.invalid_reason = res.invalid_reason or f"timeout after {timeout_s:.0f} s"
            break
        if loaded and screencast is not None and cdp.events.empty() and screencast.digest_one():
            continue  # a few ms of frame decoding while the quiet tail waits anyway
        try:
            # Wake exactly when the quiet period would end (not up to 100 ms late).
            wait = 0.1
            if loaded and inflight == 0:
                wait = min(wait, max(0.001, QUIET_MS / 1000 - (now - last_activity)))
            ev = await asyncio.wait_for(cdp.events.get(), timeout=wait)
        except TimeoutError:
            continue
        method, p = ev["method"], ev.get("params", {})
        if observe is not None:
            observe(method, p)
        if screencast is not None and screencast.on_event(method, p):
            continue
        if method == "Network.requestWillBeSent":
            rid = p["requestId"]
            req_url = p["request"]["url"]
            if req_url.startswith("data:") or _browser_initiated(p):
                continue
            if rid in requests and p.get("redirectResponse"):  # a redirect's answer
                _count_protocol(res, p["redirectResponse"])
                handshakes.note_connection(res.connections, p["redirectResponse"])
            requests[rid] = p["request"]["url"]
            if main_id is None and p.get("type") == "Document" and p.get("loaderId") == loader:
                main_id = rid
            last_activity = time.monotonic()
        # Only the page's own requests count as activity for the quiet tail (not the
        # favicon or manifest Chromium fetches for itself, skipped above).
        elif method == "Network.responseReceived":
            r = p["response"]
            status[p["requestId"]] = int(r.get("status", 0))
            if p["requestId"] == main_id:
                res.main_status = int(r.get("status", 0))
                res.protocol = r.get("protocol")
            if p["requestId"] in requests:
                _count_protocol(res, r)
                handshakes.note_connection(res.connections, r)
                last_activity = time.monotonic()
        elif method == "Network.responseReceivedExtraInfo":
            wire_status[p["requestId"]] = int(p.get("statusCode") or 0)
        elif method == "Network.loadingFinished":
            if p["requestId"] in requests:
                done.add(p["requestId"])
                res.bytes_received += int(p.get("encodedDataLength", 0))
                last_activity = time.monotonic()
        elif method == "Network.loadingFailed":
            if p["requestId"] in requests:
                failed[p["requestId"]] = p.get("errorText", "failed")
                if p["requestId"] == main_id and not res.invalid_reason:
                    res.invalid_reason = f"main document failed: {p.get('errorText')}"
                last_activity = time.monotonic()
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            if p["entry"].get("source") != "network":  # failed requests are counted apart
                res.console_errors.append(p["entry"].get("text", "")[:300])
        elif method == "Runtime.exceptionThrown":
            det = p.get("exceptionDetails", {})
            text = (det.get("exception") or {}).get("description") or det.get("text", "")
            res.console_errors.append(f"exception: {text[:300]}")
        elif method == "Page.loadEventFired" and not loaded:
            loaded = True
            load_at = time.monotonic()
            last_activity = load_at
            if on_load is not None:
                on_load()
    t_tail_end = time.monotonic()
    if loaded:
        res.timing["load"] = round((load_at - t_nav) * 1000, 1)
        res.timing["tail"] = round((t_tail_end - load_at) * 1000, 1)
    else:
        res.timing["load"] = round((t_tail_end - t_nav) * 1000, 1)
    # Timing of the main document (PerformanceNavigationTiming, ms since navigationStart),
    # read in a world of our own: the page's builtins may be replaced (dchlab.workloads.isolated).
    if loaded:
        try:
            await _read_timing(cdp, sid, nav.get("frameId"), res)
        except (RuntimeError, KeyError, TypeError, ValueError) as e:
            res.invalid_reason = res.invalid_reason or f"timing not read: {one_line(str(e))}"
    bad = {
        rid: answered_error(err, status.get(rid) or wire_status.get(rid, 0))
        for rid, err in failed.items()
    }
    for rid, st in status.items():
        if st >= 400 and rid not in bad and rid in requests:
            bad[rid] = f"HTTP {st}"
    res.resources_failed = len(bad)
    if any("ERR_NETWORK_CHANGED" in e for e in bad.values()) and not res.invalid_reason:
        # Not the page's fault: an interface or address changed under the browser.
        res.invalid_reason = "network changed during the load (ERR_NETWORK_CHANGED)"

    res.timing["timing"] = round((time.monotonic() - t_tail_end) * 1000, 1)
    if loaded:
        t0 = time.monotonic()
        await _page_metrics(cdp, sid, res, screencast, t_nav, nav.get("frameId"))
        res.timing["metrics"] = round((time.monotonic() - t0) * 1000, 1)
    res.failed_urls = sorted(f"{requests[r]} ({e})" for r, e in bad.items())[:50]
    res.failed = [[requests[r], e] for r, e in bad.items()]
    res.resources_loaded = len([r for r in done if r not in bad])
    if last:
        cdp.reader.cancel()


def _count_protocol(res: LoadResult, response: dict[str, Any]) -> None:
    """Count one response of the page by the protocol it came over ("?" if unsaid)."""
    proto = str(response.get("protocol") or "?")
    res.protocols[proto] = res.protocols.get(proto, 0) + 1


# Navigation Timing read field by field (no toJSON, no Array.prototype.map: in the
# isolated world they are pristine anyway, but the read-out needs none of them).
TIMING_FIELDS = ("navigationStart", "loadEventEnd")
NAV_FIELDS = (
    "domainLookupStart",
    "domainLookupEnd",
    "connectStart",
    "connectEnd",
    "secureConnectionStart",
    "requestStart",
    "responseStart",
)
READOUT_JS = f"""(() => {{
  const out = {{t: {{}}, n: null, u: String(location.href), f: {{}}, b: 0}};
  const t = performance.timing, tk = {list(TIMING_FIELDS)!r};
  for (let i = 0; i < tk.length; i++) out.t[tk[i]] = Number(t[tk[i]]);
  const nav = performance.getEntriesByType('navigation');
  if (nav.length) {{
    const n = nav[0], nk = {list(NAV_FIELDS)!r};
    out.n = {{}};
    for (let i = 0; i < nk.length; i++) out.n[nk[i]] = Number(n[nk[i]]);
  }}
  for (const face of document.fonts) out.f[face.status] = (out.f[face.status] || 0) + 1;
  const im = document.images;
  for (let i = 0; i < im.length; i++) if (im[i].complete && !im[i].naturalWidth) out.b++;
  return out;
}})()"""


async def _read_timing(cdp: CDP, sid: str, frame_id: str | None, res: LoadResult) -> None:
    """Fill plt_ms, the document's phases, fonts and broken images from the page
    (polled briefly: loadEventEnd is set just after the load event is reported)."""
    timing: dict[str, Any] = {}
    for _ in range(50):
        timing = await isolated.evaluate(cdp, sid, READOUT_JS, frame_id)
        if timing["t"].get("loadEventEnd", 0) > 0:
            break
        await asyncio.sleep(0.05)
    t, n = timing["t"], timing["n"]
    for fstate, count in timing["f"].items():
        res.fonts[str(fstate)] = res.fonts.get(str(fstate), 0) + int(count)
    res.images_broken = int(timing["b"])
    if t.get("loadEventEnd", 0) > 0:
        res.plt_ms = float(t["loadEventEnd"] - t["navigationStart"])
    if n:
        res.dns_ms = n["domainLookupEnd"] - n["domainLookupStart"]
        sec = n.get("secureConnectionStart") or 0
        if sec > 0:
            res.connect_ms = sec - n["connectStart"]
            res.tls_ms = n["connectEnd"] - sec
        else:
            res.connect_ms = n["connectEnd"] - n["connectStart"]
            res.tls_ms = 0.0
        res.ttfb_ms = n["responseStart"] - n["requestStart"]
    if str(timing["u"]).startswith("chrome-error://"):
        res.invalid_reason = res.invalid_reason or "error page shown (certificate or network error)"


async def _page_metrics(
    cdp: CDP,
    sid: str,
    res: LoadResult,
    screencast: pagemetrics.Screencast | None,
    t_nav: float,
    frame_id: str | None = None,
) -> None:
    """FCP and LCP from the page; Speed Index and atf_ms from the screencast frames
    (also those still queued: the final frame may arrive just as the tail ends). A
    metric that cannot be had stays None: the load's validity is the PLT's business."""
    paint: dict[str, float | None] = {"o": None, "fcp": None, "lcp": None}
    try:  # a page whose main thread never yields must not hold the load
        paint = await asyncio.wait_for(
            pagemetrics.paint_timing(cdp, sid, frame_id), METRICS_TIMEOUT_S
        )
    except (TimeoutError, RuntimeError, ValueError) as e:
        res.metrics_error = f"paint timing not read: {e!r}"[:300]
    res.fcp_ms, res.lcp_ms = paint["fcp"], paint["lcp"]
    if screencast is None:
        return
    try:
        await asyncio.wait_for(screencast.stop(), METRICS_TIMEOUT_S)
        while not cdp.events.empty():
            ev = cdp.events.get_nowait()
            screencast.on_event(ev["method"], ev.get("params", {}))
        vis = screencast.metrics(paint["o"], t_nav)
    except (TimeoutError, RuntimeError, OSError, ValueError) as e:  # PIL: OSError on a bad frame
        res.metrics_error = f"screencast not evaluated: {e!r}"[:300]
        return
    res.speed_index_ms, res.atf_ms = vis["speed_index_ms"], vis["atf_ms"]
    res.screencast_frames = int(vis["frames"] or 0)


def load_page(
    url: str,
    timeout_s: float = 60.0,
    home: Path | None = None,
    host_rules: str | None = None,
    flags: list[str] | None = None,
) -> LoadResult:
    """Load `url` once in a fresh Chromium; `home` holds .pki/nssdb trusting the CA;
    `host_rules` (Chromium --host-resolver-rules) replaces DNS where there is no server;
    `flags`: the load's own Chromium flags (chromium_pipe.browser_flags)."""
    start = time.monotonic()
    res = LoadResult(url)
    work = Path(tempfile.mkdtemp(prefix="dch-chromium-"))
    home = home or work
    proc = None
    try:
        extra = [f"--host-resolver-rules={host_rules}"] if host_rules else []
        extra += flags or []
        t0 = time.monotonic()
        # beside the NSS db of a given home (in a testbed's run directory), else thrown away
        proc, ws_url = launch_chromium(work / "profile", home, extra, home / "chromium.log")
        res.timing["launch"] = round((time.monotonic() - t0) * 1000, 1)
        try:
            asyncio.run(asyncio.wait_for(_load(ws_url, url, res, timeout_s), timeout_s + 15))
        except TimeoutError:
            res.invalid_reason = res.invalid_reason or f"timeout after {timeout_s:.0f} s"
    except Exception as e:  # a crashed browser is an invalid load, never a fast one
        res.invalid_reason = res.invalid_reason or f"driver error: {e}"
    finally:
        t0 = time.monotonic()
        if proc is not None:
            stop_chromium(proc)
        t1 = time.monotonic()
        shutil.rmtree(work, ignore_errors=True)
        res.timing["stop"] = round((t1 - t0) * 1000, 1)
        res.timing["cleanup"] = round((time.monotonic() - t1) * 1000, 1)
    finish(res)
    res.driver_ms = (time.monotonic() - start) * 1000
    return res


def finish(res: LoadResult) -> None:
    """The driver's verdict on a finished load (document_error, invalid_reason, valid).
    The reason is one line: a browser's log belongs in its log file."""
    res.invalid_reason = one_line(res.invalid_reason)
    if not res.invalid_reason:
        if res.plt_ms is None:
            res.invalid_reason = "no load event"
        elif res.main_status is None or res.main_status >= 400:
            res.invalid_reason = f"main document status {res.main_status}"
        elif res.resources_loaded == 0:
            res.invalid_reason = "no resources loaded"
    res.document_error = res.invalid_reason
    if not res.invalid_reason and res.resources_failed:
        res.invalid_reason = f"{res.resources_failed} failed resources"
    res.valid = not res.invalid_reason


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Load one URL in a fresh headless Chromium over CDP; print JSON (runs in "
        "the namespace whose network it measures)."
    )
    ap.add_argument("url")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-load timeout, s")
    ap.add_argument("--home", help="HOME with .pki/nssdb trusting the testbed CA")
    ap.add_argument(
        "--host-rules",
        help="Chromium --host-resolver-rules (local replay without a DNS server)",
    )
    ap.add_argument(
        "--flag",
        action="append",
        default=[],
        help="an extra Chromium flag of this load (repeatable), e.g. --flag=--enable-quic",
    )
    ap.add_argument(
        "--t0",
        type=float,
        help="time.monotonic() of the caller when it started this process (timing.python_start)",
    )
    args = ap.parse_args(argv)
    started = time.monotonic()
    home = Path(args.home) if args.home else None
    res = load_page(args.url, args.timeout, home, args.host_rules, args.flag)
    if args.t0 is not None:
        res.timing["python_start"] = round((started - args.t0) * 1000, 1)
    sys.stdout.write(json.dumps(asdict(res)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
