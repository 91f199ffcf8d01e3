"""Drive one app session in Chromium over CDP and print its interaction results (JSON).

Runs *inside* the namespace whose network it measures (like dchlab.workloads.browser,
whose launch/stop helpers and CDP client it reuses): `dchlab.apps.run` starts
`python -m dchlab.apps.driver SHELL_URL --session launch,search ...` on `ue`.

A session is one cold app: a fresh Chromium profile (no HTTP cache, no DNS cache, no
connections) opens the app shell — the "installed" app code, not timed — and then
performs the listed interactions one after another in the same tab, so connections
opened by one interaction are reused by the next, as a real app keeps them. Each
interaction starts with a real input event dispatched through CDP (a mouse click on
the interaction's button, or Enter typed into the search box); the page measures
IRT from that event's timestamp to the frame that shows the end screen (client/app.js).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dchlab.workloads.browser import CDP, launch_chromium, stop_chromium

PAUSE_S = 0.5  # a user looks at the screen before the next interaction


async def _eval(cdp: CDP, sid: str, expr: str, timeout_s: float = 30) -> Any:
    r = await asyncio.wait_for(
        cdp.send(
            "Runtime.evaluate",
            {"expression": expr, "awaitPromise": True, "returnByValue": True},
            sid,
        ),
        timeout_s,
    )
    if r.get("exceptionDetails"):
        det = r["exceptionDetails"]
        text = (det.get("exception") or {}).get("description") or det.get("text", "")
        raise RuntimeError(f"page script failed: {text[:300]}")
    return (r.get("result") or {}).get("value")


async def _click(cdp: CDP, sid: str, selector: str) -> None:
    box = await _eval(
        cdp,
        sid,
        f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
        ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()",
    )
    x, y = float(box[0]), float(box[1])
    base = {"x": x, "y": y, "button": "left", "clickCount": 1}
    await cdp.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, sid)
    await cdp.send("Input.dispatchMouseEvent", {"type": "mousePressed", **base}, sid)
    await cdp.send("Input.dispatchMouseEvent", {"type": "mouseReleased", **base}, sid)


async def _enter(cdp: CDP, sid: str, selector: str) -> None:
    await _eval(cdp, sid, f"document.querySelector({json.dumps(selector)}).focus()")
    key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}
    await cdp.send("Input.dispatchKeyEvent", {"type": "keyDown", **key}, sid)
    await cdp.send(
        "Input.dispatchKeyEvent", {"type": "keyUp", "key": "Enter", "code": "Enter"}, sid
    )


TRIGGERS = {
    "launch": ("click", "#btn-launch"),
    "search": ("key", "#q"),
    "item": ("click", "#btn-item"),
}


async def _session(ws_url: str, url: str, session: list[str], timeout_s: float) -> dict[str, Any]:
    import websockets

    out: dict[str, Any] = {"shell_ok": False, "interactions": [], "error": ""}
    async with websockets.connect(ws_url, max_size=None, ping_interval=None) as ws:
        cdp = CDP(ws)
        try:
            targets = await cdp.send("Target.getTargets")
            page = next(t for t in targets["targetInfos"] if t["type"] == "page")
            sid = (
                await cdp.send(
                    "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
                )
            )["sessionId"]
            await cdp.send("Page.enable", {}, sid)
            await cdp.send("Runtime.enable", {}, sid)
            nav = await cdp.send("Page.navigate", {"url": url}, sid)
            if nav.get("errorText"):
                out["error"] = f"app shell failed to load: {nav['errorText']}"
                return out
            # The shell is up when its script has fetched the request graph.
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    ok = await _eval(cdp, sid, "window.__dch ? window.__dch.ready : false", 10)
                except RuntimeError as e:
                    out["error"] = f"app shell failed: {e}"
                    return out
                if ok is True:
                    break
                if time.monotonic() > deadline:
                    href = await _eval(cdp, sid, "location.href")
                    out["error"] = f"app shell not ready after {timeout_s:.0f} s ({href})"
                    return out
                await asyncio.sleep(0.05)
            out["shell_ok"] = True
            for i, name in enumerate(session):
                if i:
                    await asyncio.sleep(PAUSE_S)
                how, sel = TRIGGERS[name]
                # Register the waiter first, then send the input: the page resolves it.
                await (_click(cdp, sid, sel) if how == "click" else _enter(cdp, sid, sel))
                try:
                    res = await _eval(cdp, sid, f"window.__dch.wait({json.dumps(name)})", timeout_s)
                except TimeoutError:
                    out["error"] = f"{name}: no end screen within {timeout_s:.0f} s"
                    break
                out["interactions"].append(res)
                if res.get("error"):
                    break
        finally:
            cdp.reader.cancel()
    return out


def run_session(
    url: str, session: list[str], timeout_s: float = 60.0, home: Path | None = None,
    host_rules: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One cold app session in a fresh Chromium; returns the page's per-interaction
    results (irt_ms, per-request send/parse/done times, Resource Timing entries)."""
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="dch-app-"))
    proc = None
    res: dict[str, Any] = {"url": url, "session": session, "interactions": [], "error": ""}
    try:
        extra = [f"--host-resolver-rules={host_rules}"] if host_rules else []
        proc, ws_url = launch_chromium(work / "profile", home or work, extra)
        budget = timeout_s * (len(session) + 1) + 15
        res.update(asyncio.run(asyncio.wait_for(_session(ws_url, url, session, timeout_s), budget)))
    except TimeoutError:
        res["error"] = res["error"] or f"session timed out after {timeout_s:.0f} s per step"
    except Exception as e:  # a crashed browser is a failed trial, never a fast one
        res["error"] = res["error"] or f"driver error: {type(e).__name__}: {e}"
    finally:
        if proc is not None:
            stop_chromium(proc)
        shutil.rmtree(work, ignore_errors=True)
    res["driver_ms"] = (time.monotonic() - start) * 1000
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Run one cold app session (shell load, then interactions) in a fresh "
        "headless Chromium over CDP; print JSON (runs in the namespace it measures)."
    )
    ap.add_argument("url", help="the app shell URL (https://app.<profile>.test/)")
    ap.add_argument("--session", default="launch", help="comma-separated interactions, in order")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-interaction timeout, s")
    ap.add_argument("--home", help="HOME with .pki/nssdb trusting the testbed CA")
    ap.add_argument("--host-rules", help="Chromium --host-resolver-rules (no DNS server)")
    args = ap.parse_args(argv)
    session = [s.strip() for s in args.session.split(",") if s.strip()]
    bad = [s for s in session if s not in TRIGGERS]
    if bad:
        ap.error(f"unknown interaction(s) {', '.join(bad)}: expected {', '.join(TRIGGERS)}")
    res = run_session(
        args.url, session, args.timeout, Path(args.home) if args.home else None, args.host_rules
    )
    sys.stdout.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
