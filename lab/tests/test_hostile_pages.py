"""Measurement that pages cannot break, with a real Chromium (root for a private
network namespace, Debian's Chromium): a page that replaces the builtins the read-out
could use still measures VALID with the numbers of the same page without them; 404s
are gaps of the recording, a reset or truncated delivery is a failure.

Served by Python in `unshare -n` (as tests/test_workloads.py's driver test): 127.0.0.1
and localhost are two origins, so the 404s are both same-origin and cross-origin (the
latter blocked by ORB, reported by their status)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dchlab.workloads.validity import judge

LAB = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/lib/chromium/chromium")
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a private network namespace)"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium not installed"),
]

# What 2011-era libraries did to the page's world, and more: the read-out must use none
# of it. The page then proves the replacements took effect: it asks for ok.png only
# if every one is in place (else nope.png, which fails the load).
HIJACK = """<script>
JSON.stringify = function () { return "HIJACKED"; };
JSON.parse = function () { return "HIJACKED"; };
Array.prototype.map = function () { return "HIJACKED"; };
Array.prototype.filter = function () { return "HIJACKED"; };
performance.timing.toJSON = function () { return "HIJACKED"; };
Object.getPrototypeOf(performance.timing).toJSON = function () { return "HIJACKED"; };
var hijacked = JSON.stringify({a: 1}) === "HIJACKED" && [1].map(String) === "HIJACKED"
  && performance.timing.toJSON() === "HIJACKED";
window.Promise = function () { throw new Error("no Promise here"); };
window.PerformanceObserver = function () { throw new Error("no observer here"); };
document.write('<img src="' + (hijacked ? 'ok.png' : 'nope.png') + '">');
</script>"""
PLAIN = "<script>document.write('<img src=\"ok.png\">');</script>"
BODY = (
    '<img src="a.png"><script src="s.js"></script>'
    '<img src="gone.png"><img src="http://localhost:8000/gone-x.png">'  # 404s
    '<p style="font-size:40px">Hello, page</p>'
)
SERVER_8001 = r"""
import socket, struct, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8001)); s.listen(16)
def serve(c):
    path = c.recv(4096).split(b" ")[1]
    if path.startswith(b"/trunc.js"):  # 1000 bytes announced, 9 sent
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/javascript\r\n"
                  b"Content-Length: 1000\r\nAccess-Control-Allow-Origin: *\r\n\r\nvar x=1;\n")
    else:  # a reset connection
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""


def _site(root: Path) -> Path:
    from dchlab.pages.media import png

    site = root / "site"
    site.mkdir()
    rng = np.random.default_rng(3)
    for name in ("a.png", "ok.png"):
        (site / name).write_bytes(png(3000, rng))
    (site / "s.js").write_text("document.title = 'ran';")
    (site / "hostile.html").write_text(f"<html><head>{HIJACK}</head><body>{BODY}</body></html>")
    (site / "plain.html").write_text(f"<html><head>{PLAIN}</head><body>{BODY}</body></html>")
    (site / "broken.html").write_text(
        '<html><body><img src="a.png"><script src="http://127.0.0.1:8001/trunc.js"></script>'
        '<img src="http://127.0.0.1:8001/reset.png"></body></html>'
    )
    (root / "server8001.py").write_text(SERVER_8001)
    return site


def _load_all(tmp_path: Path, pages: list[str]) -> list[dict[str, Any]]:
    site = _site(tmp_path)
    py = sys.executable
    home = tmp_path / "home"  # the driver's Chromium log goes here: chromium.log
    loads = "".join(
        f"{py} -m dchlab.workloads.browser http://127.0.0.1:8000/{p} --timeout 20 --home {home}; "
        for p in pages
    )
    script = (
        "ip link set lo up; "
        f"{py} -m http.server 8000 --bind 127.0.0.1 --directory {site} >/dev/null 2>&1 & S=$!; "
        f"{py} {tmp_path / 'server8001.py'} & T=$!; sleep 0.7; {loads}kill $S $T"
    )
    out = subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(LAB)},
        timeout=180,
    )
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(pages), out.stderr[-2000:]
    return rows


def test_a_page_replacing_builtins_measures_valid_with_the_plain_pages_numbers(
    tmp_path: Path,
) -> None:
    hostile, plain, broken = _load_all(tmp_path, ["hostile.html", "plain.html", "broken.html"])
    gone = ["http://127.0.0.1:8000/gone.png", "http://localhost:8000/gone-x.png"]
    for r in (hostile, plain):
        # the driver knows no corpus: its own verdict counts the two 404s ...
        assert r["document_error"] == "", r["invalid_reason"]
        assert sorted(r["failed"]) == sorted([u, "HTTP 404"] for u in gone), r["failed"]
        # ... which the corpus-aware verdict counts as gaps of the recording: valid
        v = judge(r, [])
        assert v.valid and v.unexpected == [] and v.unrecorded == gone, v
        # document, a.png, s.js, ok.png (nope.png would have failed)
        assert r["resources_loaded"] == 4 and r["resources_failed"] == 2
        assert r["main_status"] == 200 and r["images_broken"] == 2, r
        assert r["metrics_error"] == "" and r["console_errors"] == [], r
        # Navigation Timing against the driver's own clock: the PLT lies within the
        # wall time from Page.navigate to the load event (plus the IPC before
        # navigationStart), and the phases within the PLT
        assert 0 < r["plt_ms"] <= r["timing"]["load"] + 50, (r["plt_ms"], r["timing"])
        assert r["plt_ms"] >= r["timing"]["load"] - 500, (r["plt_ms"], r["timing"])
        assert 0 <= r["ttfb_ms"] < r["plt_ms"] and r["dns_ms"] >= 0 and r["tls_ms"] == 0.0
        assert r["fcp_ms"] is not None and 0 < r["fcp_ms"] <= r["plt_ms"] + 1000, r
        assert r["lcp_ms"] is not None and r["lcp_ms"] >= r["fcp_ms"], r
    # the builtins the page replaced changed none of the numbers read
    assert hostile["resources_loaded"] == plain["resources_loaded"]
    assert hostile["fonts"] == plain["fonts"] == {}
    # what the corpus holds but did not arrive: a truncated body, a reset connection
    v = judge(broken, [])
    assert not v.valid and v.unrecorded == [], broken["failed"]
    assert v.unexpected == ["http://127.0.0.1:8001/reset.png", "http://127.0.0.1:8001/trunc.js"]
    errors = dict(map(tuple, broken["failed"]))
    assert errors["http://127.0.0.1:8001/trunc.js"] == "net::ERR_CONTENT_LENGTH_MISMATCH"
    assert errors["http://127.0.0.1:8001/reset.png"].startswith("net::ERR_"), errors
    assert "\n" not in broken["invalid_reason"]
    # Chromium's own output went to its log file, one start per load, not into a result
    log = (tmp_path / "home" / "chromium.log").read_text(errors="replace")
    assert log.count("DevTools listening on ws://") == 3, log[-2000:]
