"""HTTP/3 page loads through the real testbed (root; issue 39): under `protocol: h3`
every response of a two-origin page comes over QUIC, also when the dchannel agents steer
its packets (UDP through the TUN devices, the emulated links and the gateway); when one
origin does not answer QUIC the load is invalid and says why; under h2 nothing is QUIC.

The page is written here (always available, known structure): a document and its
stylesheet on www.h3a.test, two images on img.h3b.test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import PNG_1X1, require_binaries, require_root

from dchlab.pages.corpus import CorpusWriter

DOC_HOST = "www.h3a.test"
IMG_HOST = "img.h3b.test"
RESPONSES = 4  # document, stylesheet, two images


def _corpus(root: Path) -> Path:
    w = CorpusWriter(root, "h3-page", "test_h3_testbed")
    base = f"https://{DOC_HOST}/"
    w.add_page("p", base)
    html = (
        "<!doctype html><html><head><link rel=stylesheet href=/s.css></head><body>"
        f"<img src=https://{IMG_HOST}/1.png><img src=https://{IMG_HOST}/2.png></body></html>"
    )
    w.add_object(base, "p", html.encode(), [("content-type", "text/html; charset=utf-8")])
    w.add_object(base + "s.css", "p", b"body { margin: 0 }", [("content-type", "text/css")])
    for name in ("1.png", "2.png"):
        w.add_object(f"https://{IMG_HOST}/{name}", "p", PNG_1X1, [("content-type", "image/png")])
    w.finish()
    return root


def _load(corpus: Path, scheme: str, protocol: str, *webreplay: str) -> dict[str, Any]:
    from dchlab.workloads import api

    spec = api.RunSpec(
        scheme=scheme,
        hbc="fixed:20ms/100mbit",
        llc="urllc",
        protocol=protocol,
        webreplay_args=tuple(webreplay),
    )
    (row,) = api.pageload(spec, str(corpus), pages=["p"], timeout_s=60)
    return row


@pytest.mark.timeout(600)
def test_h3_loads_every_response_over_quic_and_a_refusing_origin_invalidates(
    tmp_path: Path,
) -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    corpus = _corpus(tmp_path / "c")

    row = _load(corpus, "dchannel", "h3")
    assert row["valid"], row["invalid_reason"]
    assert row["protocol"] == "h3"
    counts = (row["responses_h3"], row["responses_h2"], row["responses_other"])
    assert counts == (RESPONSES, 0, 0), row["stats"]["browser"].get("protocols")
    assert row["bytes_llc"] and row["bytes_hbc"]  # the agents carried the QUIC packets
    # the servers' QUIC loss recovery (webreplay --quic-stats-json): two connections
    # (one per origin), every packet they sent counted; a fixed link with no loss
    quic = row["stats"]["servers"]["webreplay_quic"]
    assert quic["totals"]["connections"] == 2, quic
    assert {c["sni"] for c in quic["connections"]} == {DOC_HOST, IMG_HOST}
    assert row["quic_sent_packets"] == quic["totals"]["sent_packets"] >= 2 * RESPONSES
    assert row["quic_lost_packets"] == quic["totals"]["lost_packets"]
    assert row["quic_congestion_events"] == quic["totals"]["congestion_events"]

    row = _load(corpus, "hbc-only", "h3", "--h3-refuse", IMG_HOST)
    assert not row["valid"]
    # Chromium, forced onto QUIC, never falls back to TCP: the images fail
    assert row["invalid_reason"].startswith("2 requests failed over QUIC (first: "), row
    assert "net::ERR_QUIC" in row["invalid_reason"]
    assert row["responses_h3"] == 2 and row["responses_h2"] == 0

    row = _load(corpus, "hbc-only", "h2")
    assert row["valid"], row["invalid_reason"]
    assert (row["protocol"], row["responses_h3"], row["responses_h2"]) == ("h2", 0, RESPONSES)
    assert row["quic_sent_packets"] is None  # no QUIC endpoint ran
    assert "webreplay_quic" not in (row["stats"].get("servers") or {})
