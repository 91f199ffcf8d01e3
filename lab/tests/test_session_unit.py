"""Browsing sessions without a testbed: the generator's internal pages, the session's
pages from a corpus, request sizes and connections from CDP events, the campaign kind."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dchlab.experiments.campaign import cell_key, parse_campaign
from dchlab.experiments.runner import plan
from dchlab.pages import CorpusError
from dchlab.pages import generator as G
from dchlab.workloads.session import (
    PageTally,
    corpus_session,
    landing_pages,
    p99,
    request_size,
    session_urls,
)


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return G.generate(tmp_path_factory.mktemp("c") / "c", seed=1, pages=2, internal_pages=4)


def test_no_internal_pages_is_the_corpus_as_before(tmp_path: Path) -> None:
    a = G.generate(tmp_path / "a", seed=1, pages=2)
    b = G.generate(tmp_path / "b", seed=1, pages=2, internal_pages=0)
    assert _tree_hashes(a.root) == _tree_hashes(b.root)
    assert [p.name for p in a.pages] == ["site0", "site1"]


def test_internal_pages_share_the_landing_pages_objects(corpus) -> None:  # type: ignore[no-untyped-def]
    names = [p.name for p in corpus.pages]
    assert names == [f"site{i}{s}" for i in range(2) for s in ["", "-p1", "-p2", "-p3", "-p4"]]
    landing = G.plan_page(1, 1)
    for k in range(1, 5):
        ip = G.plan_internal(1, 1, k, landing)
        html = ip.resources[len(landing.resources)]
        assert html.url == f"https://www.site1.test/p{k}/" == corpus.page(f"site1-p{k}").entry_url
        shared = [ip.resources[i] for i in html.children if i < len(landing.resources)]
        own = [ip.resources[i] for i in html.children if i >= len(landing.resources)]
        top = landing.resources[0]
        # every stylesheet and top-level script of the landing page, half its <img>s
        kinds = {"css", "js"}
        assert [r.url for r in shared if r.kind in kinds] == [
            landing.resources[i].url for i in top.children if landing.resources[i].kind in kinds
        ]
        imgs = [i for i in top.children if landing.resources[i].kind == "image"]
        assert [r.idx for r in shared if r.kind == "image"] == imgs[::2]
        assert own and all(r.kind == "image" and f"/p{k}/" in r.url for r in own)
        # Each page view sets a first-party cookie for the site's domain, first thing.
        doc = next(o for o in corpus.objects if o.url == html.url)
        head = corpus.read_body(doc).decode().split("<link", 1)[0]
        assert '"_dchpv"+n+"=' in head and ";domain=site1.test;path=/;" in head
        # The corpus holds exactly the page's own objects under its name.
        assert sorted(o.url for o in corpus.objects_of(ip.name)) == sorted(
            [html.url, *(r.url for r in own)]
        )


def test_a_session_follows_the_landing_pages_menu(corpus) -> None:  # type: ignore[no-untyped-def]
    assert landing_pages(corpus) == ["site0", "site1"]
    urls, names = corpus_session(corpus, "site1", 4)
    assert names == ["site1", "site1-p1", "site1-p2", "site1-p3", "site1-p4"]
    assert urls[0] == "https://www.site1.test/" and urls[3] == "https://www.site1.test/p3/"
    assert session_urls(corpus, "site0", "2")[1] == ["site0", "site0-p1", "site0-p2"]
    listed = session_urls(corpus, "site0", "https://www.site0.test/p4/, https://www.site1.test/")
    assert listed[1] == ["site0", "site0-p4", "site1"]
    with pytest.raises(CorpusError, match="links 4 other corpus pages"):
        corpus_session(corpus, "site0", 5)
    with pytest.raises(CorpusError, match="absolute URL"):
        session_urls(corpus, "site0", "/p1/")


def test_request_size_counts_an_http1_header_block() -> None:
    h = {"Host": "a.test", "Cookie": "x=1"}
    # "GET /p?q=1 HTTP/1.1\r\n" 21 + "Host: a.test\r\n" 14 + "Cookie: x=1\r\n" 13 + 2
    assert request_size("GET", "https://a.test/p?q=1", h) == 21 + 14 + 13 + 2
    # HTTP/2 pseudo-headers replace the request line; a body counts as sent.
    h2 = {":method": "POST", ":path": "/"}
    assert request_size("POST", "https://a.test/", h2, body=10) == 15 + 10 + 2 + 10
    assert p99([]) is None and p99([5]) == 5
    assert p99(list(range(1, 101))) == 99 and p99(list(range(1, 201))) == 198


def _sent(rid: str, url: str, typ: str = "Script") -> tuple[str, dict]:  # type: ignore[type-arg]
    req = {"url": url, "method": "GET", "headers": {"Referer": "https://www.s.test/"}}
    return "Network.requestWillBeSent", {"requestId": rid, "request": req, "type": typ}


def test_page_tally_counts_network_requests_and_new_connections() -> None:
    t = PageTally(earlier={7})
    for ev in [
        _sent("1", "https://www.s.test/p1/", "Document"),
        ("Network.requestWillBeSentExtraInfo", {"requestId": "1", "headers": {":path": "/p1/"}}),
        ("Network.responseReceived", {"requestId": "1", "response": {"connectionId": 7}}),
        _sent("2", "https://img.s.test/a.png", "Image"),
        ("Network.responseReceived", {"requestId": "2", "response": {"connectionId": 9}}),
        _sent("3", "https://cdn.test/c.css", "Stylesheet"),  # from the memory cache
        ("Network.requestServedFromCache", {"requestId": "3"}),
        ("Network.responseReceived", {"requestId": "3", "response": {"connectionId": 5}}),
        _sent("4", "https://cdn.test/d.js"),  # from the disk cache
        ("Network.responseReceived", {"requestId": "4", "response": {"fromDiskCache": True}}),
        _sent("5", "data:image/png;base64,AAAA", "Image"),
    ]:
        t.on_event(*ev)
    t.on_event(
        "Network.requestWillBeSent",
        {
            "requestId": "6",
            "request": {"url": "https://www.s.test/favicon.ico", "method": "GET", "headers": {}},
            "type": "Other",
            "initiator": {"type": "other"},
        },
    )
    s = t.summary()
    # 1: the headers as sent, ":path: /p1/\r\n" (13) + 2; 2: the request line
    # "GET /a.png HTTP/1.1\r\n" (21) + "Referer: https://www.s.test/\r\n" (30) + 2.
    assert s["request_bytes"] == (13 + 2) + (21 + 30 + 2)
    assert s["requests"] == 2  # not the cached, data: or Chromium's own (favicon) ones
    assert s["requests_cached"] == 2
    assert s["connections_used"] == 2 and s["connections_opened"] == 1  # 9 is new, 7 kept


CAMPAIGN = {
    "name": "sess",
    "schemes": ["all-hbc", "asap"],
    "conditions": [{"name": "c", "hbc": "fixed:30ms/1500mbit", "llc": "urllc"}],
    "workload": {"kind": "session", "corpus": "synthetic:1:2", "session_pages": 2},
    "analysis": {"kind": "gain", "baseline": "all-hbc"},
}


def test_a_session_campaign_makes_one_group_per_session() -> None:
    c = parse_campaign(CAMPAIGN, Path("sess.yaml"), check_channels=False)
    assert c.workload.session_pages == 2
    groups, total = plan(c, set())
    assert total == 2 * 2 * 3  # sites x schemes x pages
    assert [(g.scheme.label, g.items) for g in groups][:2] == [
        ("all-hbc", ["site0#0", "site0#1", "site0#2"]),
        ("asap", ["site0#0", "site0#1", "site0#2"]),
    ]
    # Resumed: only the pages still missing, in one session.
    done = {cell_key("c", "site0#0", 0, "asap"), cell_key("c", "site0#2", 0, "asap")}
    groups, _ = plan(c, done)
    assert next(g.items for g in groups if g.scheme.label == "asap") == ["site0#1"]
    bad = {**CAMPAIGN, "workload": {"kind": "session", "session_pages": 0}}
    with pytest.raises(Exception, match="session_pages"):
        parse_campaign(bad, Path("sess.yaml"), check_channels=False)


def test_dch_session_reads_its_pages_from_a_file(tmp_path: Path) -> None:
    import argparse

    from dchlab.commands.session import pages_arg, register

    ap = argparse.ArgumentParser()
    register(ap.add_subparsers())
    f = tmp_path / "pages.txt"
    f.write_text("# internal pages\nhttps://www.site0.test/p2/\n\n  https://www.site0.test/p1/\n")
    args = ap.parse_args(["session", "--pages-file", str(f)])
    assert pages_arg(args) == "https://www.site0.test/p2/,https://www.site0.test/p1/"
    assert pages_arg(ap.parse_args(["session"])) == "4"
    with pytest.raises(SystemExit):  # one source of pages only
        ap.parse_args(["session", "--pages", "2", "--pages-file", str(f)])
