"""A browsing session in one browser and one testbed (issue 17): a landing page of the
synthetic corpus then its four internal pages. Five valid PLTs; connections are kept
(page 2 opens fewer than page 1); each page's request bytes are recorded and grow with
the site's cookies, and only a page's own objects go to the network (the shared CSS,
scripts and images are cached)."""

from __future__ import annotations

import math

import pytest
from conftest import require_binaries, require_root

from dchlab.pages.generator import VISIT_COOKIE_BYTES
from dchlab.workloads.measure import RunSpec
from dchlab.workloads.rows import ROW_KEYS, SESSION_KEYS
from dchlab.workloads.session import corpus_session, open_session_corpus, session_rows

pytestmark = pytest.mark.netns


@pytest.mark.parametrize("scheme", ["all-hbc", "dchannel"])
def test_a_five_page_session_keeps_its_connections(scheme: str) -> None:
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    corpus = open_session_corpus("synthetic:1:1", 4)
    urls, names = corpus_session(corpus, "site0", 4)
    spec = RunSpec(scheme=scheme, hbc="fixed:30ms/100mbit", llc="fixed:5ms/2mbit")
    rows = session_rows(spec, corpus, urls, names, timeout_s=60)

    assert [r["page_index"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["page"] for r in rows] == ["site0", "site0-p1", "site0-p2", "site0-p3", "site0-p4"]
    assert len({r["session_id"] for r in rows}) == 1
    assert all(list(r) == ROW_KEYS + SESSION_KEYS for r in rows)  # every page was reached
    for r in rows:
        assert r["valid"], (r["page"], r["invalid_reason"])
        assert r["workload"] == "session" and r["scheme"] == scheme
        assert r["plt_ms"] is not None and 0 < r["plt_ms"] < 60_000 and math.isfinite(r["plt_ms"])
        # Every object of the page the network had to answer: the page's own ones.
        assert r["requests"] == len(corpus.objects_of(r["page"])), r["page"]
        assert r["request_bytes"] > 0 and r["request_size_p99"] > 0
        # at least a request line or :path, a Host or :authority and a blank line each
        assert r["request_bytes"] >= 30 * r["requests"]
    first, second = rows[0], rows[1]
    assert first["connections_opened"] >= 1
    assert first["connections_opened"] == first["connections_used"]
    assert second["connections_opened"] < first["connections_opened"]
    assert second["requests_cached"] > 0  # the landing page's CSS, scripts and images
    assert "testbed" in first["stats"] and first["trace_offset_ms"] is not None
    # Requests grow page after page (each page view adds a first-party cookie of
    # VISIT_COOKIE_BYTES): page 4's document request alone carries three cookies more
    # than page 1's, each "_dchpvN=" + value + "; " >= VISIT_COOKIE_BYTES + 10 bytes.
    assert rows[4]["requests"] == rows[1]["requests"]
    grown = rows[4]["request_bytes"] - rows[1]["request_bytes"]
    assert grown >= 3 * (VISIT_COOKIE_BYTES + 10), grown
