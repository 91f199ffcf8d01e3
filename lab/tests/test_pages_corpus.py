"""Page corpora: manifest validation, tp5n and WARC importers, the generator."""

from __future__ import annotations

import hashlib
import io
import json
import statistics
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_pages

from dchlab.pages import media, open_corpus
from dchlab.pages.corpus import CorpusError, CorpusWriter, load, summary, verify_bodies
from dchlab.pages.generator import BYTE_SHARE, generate, plan_page
from dchlab.pages.tp5n import import_tp5n
from dchlab.pages.warc import import_warc


def _tiny_corpus(root: Path) -> Path:
    w = CorpusWriter(root, "t", "test")
    w.add_page("p", "https://a.test/")
    w.add_object("https://a.test/", "p", b"<html></html>", [("content-type", "text/html")])
    w.finish()
    return root


# --- manifest ---------------------------------------------------------------------------


def test_roundtrip_and_dedup(tmp_path: Path) -> None:
    w = CorpusWriter(tmp_path / "c", "t", "test")
    w.add_page("p", "https://a.test/")
    w.add_object("https://a.test/", "p", b"hi", [("Content-Length", "2"), ("X-A", "1")])
    assert w.add_object("https://a.test/", "p", b"other") is None
    c = w.finish()
    assert w.duplicates == 1
    back = load(tmp_path / "c")
    assert back.objects[0].headers == [("x-a", "1")]  # content-length is recomputed
    assert back.read_body(back.objects[0]) == b"hi"
    assert back.objects[0].body == "bodies/" + hashlib.sha256(b"hi").hexdigest()
    assert verify_bodies(c) == []


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        (lambda d: d.update(format="x"), "$.format: expected 'dchannel-corpus/1'"),
        (lambda d: d["objects"][0].update(status=700), "$.objects[0].status"),
        (lambda d: d["objects"][0].update(url="/rel"), "$.objects[0].url: expected an absolute"),
        (lambda d: d["objects"][0].update(size=3), "$.objects[0].size: manifest says 3 bytes"),
        (lambda d: d["objects"][0].update(page="nope"), "$.objects[0].page: unknown page"),
        (lambda d: d["origins"][0].update(alpn=["h3"]), "$.origins[0].alpn"),
        (lambda d: d["objects"][0].pop("headers"), "$.objects[0].headers: missing required"),
        (lambda d: d["objects"][0].update(url="https://b.test/"), "not listed in $.origins"),
    ],
)
def test_validation_names_field(tmp_path: Path, mutate, expect: str) -> None:  # type: ignore[no-untyped-def]
    root = _tiny_corpus(tmp_path / "c")
    man = root / "manifest.json"
    data = json.loads(man.read_text())
    mutate(data)
    man.write_text(json.dumps(data))
    with pytest.raises(CorpusError) as e:
        load(root)
    assert str(man) in str(e.value) and expect in str(e.value)


def test_bad_json_names_line(tmp_path: Path) -> None:
    root = _tiny_corpus(tmp_path / "c")
    (root / "manifest.json").write_text('{\n "format": \n}')
    with pytest.raises(CorpusError, match=r"manifest.json: line 3"):
        load(root)


def test_open_corpus_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="synthetic"):
        open_corpus("synthetic:x")
    with pytest.raises(CorpusError, match="no such directory"):
        open_corpus(str(tmp_path / "none"))


# --- media ------------------------------------------------------------------------------


def test_media_valid_and_sized() -> None:
    from fontTools.ttLib import TTFont
    from PIL import Image

    rng = np.random.default_rng(1)
    for size in (2000, 50_000, 300_000):
        p = media.png(size, rng)
        assert len(p) == size
        assert Image.open(io.BytesIO(p)).size == (16, 16)
        # Every chunk's CRC is right (Chromium rejects bad ones).
        pos = 8
        while pos < len(p):
            (n,) = struct.unpack(">I", p[pos : pos + 4])
            kind, data = p[pos + 4 : pos + 8], p[pos + 8 : pos + 8 + n]
            assert struct.unpack(">I", p[pos + 8 + n : pos + 12 + n])[0] == zlib.crc32(kind + data)
            pos += 12 + n
        j = media.jpeg(size, rng)
        assert abs(len(j) - size) <= 4
        Image.open(io.BytesIO(j)).load()
    for flavor, magic in (("woff2", b"wOF2"), ("woff", b"wOFF")):
        f = media.woff(30_000, "Fam", rng, flavor)
        assert abs(len(f) - 30_000) < 600 and f[:4] == magic
        assert TTFont(io.BytesIO(f))["name"].getDebugName(1) == "Fam"


# --- generator --------------------------------------------------------------------------


def test_generator_statistics_match_web_almanac() -> None:
    """Web Almanac: median ≈70 requests / ≈2 MB, p90 ≈180 / ≈6 MB, 5–20 origins,
    byte shares images 45 %, JS 27 %, fonts 6 %, CSS 3 %, HTML 1 % (docs/pages.md)."""
    for seed in (1, 7):
        plans = [plan_page(seed, i) for i in range(50)]
        reqs = [len(p.resources) for p in plans]
        mbytes = [p.total_bytes / 1e6 for p in plans]
        assert 60 <= statistics.median(reqs) <= 80
        assert 150 <= np.percentile(reqs, 90) <= 210
        assert 1.7 <= statistics.median(mbytes) <= 2.3
        assert 4.8 <= np.percentile(mbytes, 90) <= 7.2
        for p in plans:
            assert 5 <= len(p.origins) <= 20
            assert max(p.depth(r.idx) for r in p.resources) >= 4
            assert any(r.kind == "font" and p.depth(r.idx) == 3 for r in p.resources)
        by_kind: dict[str, int] = {}
        for p in plans:
            for r in p.resources:
                by_kind[r.kind] = by_kind.get(r.kind, 0) + r.size
        total = sum(by_kind.values())
        for kind, share in BYTE_SHARE.items():
            assert abs(by_kind[kind] / total - share) < 0.02 + share * 0.1, kind


def test_generator_deterministic_and_wellformed(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", seed=3, pages=2)
    b = generate(tmp_path / "b", seed=3, pages=2)
    generate(tmp_path / "c", seed=4, pages=2)
    ja = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert ja == json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert ja != json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert verify_bodies(a) == [] and len(b.objects) == len(a.objects)
    loaded = load(tmp_path / "a")
    urls = {o.url for o in loaded.objects}
    for page in loaded.pages:
        entry = next(o for o in loaded.objects if o.url == page.entry_url)
        html = loaded.read_body(entry).decode()
        assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
        # Every https URL written into HTML/CSS/JS/JSON bodies is an object of the corpus.
        import re

        for o in loaded.objects_of(page.name):
            ctype = dict(o.headers)["content-type"]
            if ctype.startswith(("text/", "application/j")):
                for ref in re.findall(
                    r"https://[a-z0-9.\-]+/[^\"')\s]*", loaded.read_body(o).decode()
                ):
                    assert ref in urls, (o.url, ref)


# --- tp5n importer ----------------------------------------------------------------------


def _fixture_tree(root: Path) -> Path:
    site = root / "ex.com"
    (site / "www.ex.com" / "a").mkdir(parents=True)
    (site / "cdn.ex.net" / "css").mkdir(parents=True)
    (site / "cdn.ex.net" / "img").mkdir(parents=True)
    (site / "www.ex.com" / "a" / "index.html").write_text(
        '<html><head><link rel="stylesheet" href="../../cdn.ex.net/css/s.css">'
        '<script src="app.js@v=2"></script></head><body>'
        '<img src="../../cdn.ex.net/img/x.png"><img src="gone.png">'
        '<img src="http://www.ex.com/a/logo.gif"><a href="http://elsewhere.org/">x</a>'
        "</body></html>"
    )
    (site / "www.ex.com" / "a" / "app.js@v=2").write_text("var u='http://cdn.ex.net/img/x.png';")
    (site / "www.ex.com" / "a" / "logo.gif").write_bytes(b"GIF89a")
    (site / "cdn.ex.net" / "css" / "s.css").write_text(
        "body{background:url(../img/bg.png)} .n{background:url('../img/none.png')}"
    )
    (site / "cdn.ex.net" / "img" / "x.png").write_bytes(b"\x89PNG-x")
    (site / "cdn.ex.net" / "img" / "bg.png").write_bytes(b"\x89PNG-bg")
    (root / "tp5n.manifest").write_text(
        "http://localhost/page_load_test/tp5n/ex.com/www.ex.com/a/index.html\n"
    )
    return root


def test_tp5n_fixture(tmp_path: Path) -> None:
    corpus, reports = import_tp5n(_fixture_tree(tmp_path / "src"), tmp_path / "out")
    assert [p.entry_url for p in corpus.pages] == ["https://www.ex.com/a/index.html"]
    assert sorted(o.url for o in corpus.objects) == [
        "https://cdn.ex.net/css/s.css",
        "https://cdn.ex.net/img/bg.png",
        "https://cdn.ex.net/img/x.png",
        "https://www.ex.com/a/app.js?v=2",
        "https://www.ex.com/a/index.html",
        "https://www.ex.com/a/logo.gif",
    ]
    # gone.png (HTML) and none.png (CSS) are missing; the <a> link is not a subresource.
    assert corpus.pages[0].missing == 2
    assert reports[0].missing == {
        "https://www.ex.com/a/gone.png",
        "https://cdn.ex.net/img/none.png",
    }
    html = corpus.read_body(next(o for o in corpus.objects if o.url.endswith("index.html")))
    assert b'href="https://cdn.ex.net/css/s.css"' in html
    assert b'src="https://www.ex.com/a/app.js?v=2"' in html
    assert b'src="https://www.ex.com/a/logo.gif"' in html
    css = corpus.read_body(next(o for o in corpus.objects if o.url.endswith("s.css")))
    assert b'url("https://cdn.ex.net/img/bg.png")' in css
    js = corpus.read_body(next(o for o in corpus.objects if "app.js" in o.url))
    assert js == b"var u='https://cdn.ex.net/img/x.png';"
    assert {o.host for o in corpus.origins} == {"www.ex.com", "cdn.ex.net"}
    load(tmp_path / "out")


@pytest.mark.shared_data
def test_tp5n_real_data(tmp_path: Path) -> None:
    corpus, reports = import_tp5n(shared_pages("tp5n"), tmp_path / "tp5n")
    assert len(corpus.pages) == 40
    files = sum(r.files for r in reports)
    assert len(corpus.objects) + 0 <= files and len(corpus.objects) >= 0.95 * files
    missing = sum(p.missing for p in corpus.pages)
    assert 0 < missing < 0.08 * files  # the data README: ~1.5 % of requests are missing
    rows = {r["page"]: r for r in summary(load(tmp_path / "tp5n"))}
    assert rows["google.com"]["requests"] == 12 and rows["google.com"]["missing"] == 0
    assert rows["amazon.com"]["entry_url"].startswith("https://www.amazon.com/Kindle-")
    assert all(o.url.startswith("https://") for o in corpus.objects)


# --- WARC importer ----------------------------------------------------------------------


def _write_warc(path: Path) -> None:
    import gzip

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as fh:
        w = WARCWriter(fh, gzip=True)

        def rec(url: str, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
            hh = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            w.write_record(
                w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=hh)
            )

        rec(
            "http://www.w.test/",
            "200 OK",
            [("Content-Type", "text/html"), ("Content-Length", "90")],
            b'<html><link rel="stylesheet" href="/s.css"><img src="http://img.w.test/a.png"><img src="b.png"></html>',
        )
        gz = gzip.compress(b"body{color:red}")
        rec(
            "http://www.w.test/s.css",
            "200 OK",
            [
                ("Content-Type", "text/css"),
                ("Content-Encoding", "gzip"),
                ("Content-Length", str(len(gz))),
            ],
            gz,
        )
        chunked = b"4\r\nPNG!\r\n0\r\n\r\n"
        rec(
            "http://img.w.test/a.png",
            "200 OK",
            [("Content-Type", "image/png"), ("Transfer-Encoding", "chunked")],
            chunked,
        )
        rec("http://www.w.test/old", "301 Moved", [("Location", "http://www.w.test/")], b"")


def test_warc_fixture(tmp_path: Path) -> None:
    _write_warc(tmp_path / "W.warc.gz")
    corpus, missing = import_warc([tmp_path / "W.warc.gz"], tmp_path / "out")
    assert missing == {"w": 1}  # b.png
    by_url = {o.url: o for o in corpus.objects}
    assert corpus.pages[0].entry_url == "https://www.w.test/"
    assert corpus.read_body(by_url["https://www.w.test/s.css"]) == b"body{color:red}"
    assert corpus.read_body(by_url["https://img.w.test/a.png"]) == b"PNG!"
    assert ("content-encoding", "gzip") not in by_url["https://www.w.test/s.css"].headers
    assert by_url["https://www.w.test/old"].status == 301
    assert ("location", "https://www.w.test/") in by_url["https://www.w.test/old"].headers
    html = corpus.read_body(by_url["https://www.w.test/"])
    assert b'src="https://img.w.test/a.png"' in html and b'href="https://www.w.test/s.css"' in html
    load(tmp_path / "out")


@pytest.mark.shared_data
def test_warc_real_data(tmp_path: Path) -> None:
    files = sorted(shared_pages("warc").glob("*.warc.gz"))
    corpus, _ = import_warc(files, tmp_path / "w")
    assert len(corpus.pages) == 6
    rows = {r["page"]: r for r in summary(load(tmp_path / "w"))}
    assert rows["wikipedia"]["requests"] == 6 and rows["reddit"]["requests"] == 68
    assert len(corpus.objects) == 359


# --- HAR importer -----------------------------------------------------------------------


def test_har_fixture(tmp_path: Path) -> None:
    import base64

    from dchlab.pages.har import import_har

    def entry(url: str, status: int, ctype: str, text: str | None, wait: float, b64: bool = False):  # type: ignore[no-untyped-def]
        content: dict = {"mimeType": ctype, "size": len(text or "")}
        if text is not None:
            content["text"] = base64.b64encode(text.encode()).decode() if b64 else text
            if b64:
                content["encoding"] = "base64"
        return {
            "pageref": "page_1",
            "request": {"method": "GET", "url": url},
            "response": {
                "status": status,
                "headers": [
                    {"name": "Content-Type", "value": ctype},
                    {"name": "Content-Encoding", "value": "gzip"},
                ],
                "content": content,
            },
            "timings": {"wait": wait},
        }

    har = {
        "log": {
            "pages": [{"id": "page_1", "title": "x"}],
            "entries": [
                entry(
                    "http://h.test/",
                    200,
                    "text/html",
                    '<img src="/a.png"><img src="/b.png"><script src="http://c.test/s.js"></script>',
                    50.0,
                ),
                entry("http://h.test/a.png", 200, "image/png", "PNGDATA", 12.0, b64=True),
                entry("http://h.test/b.png", 200, "image/png", None, 10.0),
                entry("http://c.test/s.js", 200, "application/javascript", "x=1", 10.0),
            ],
        }
    }
    (tmp_path / "p.har").write_text(json.dumps(har))
    corpus, missing = import_har([tmp_path / "p.har"], tmp_path / "out")
    assert missing == {"p": 1}  # b.png has no content: skipped, and counted once
    by_url = {o.url: o for o in load(tmp_path / "out").objects}
    assert set(by_url) == {"https://h.test/", "https://h.test/a.png", "https://c.test/s.js"}
    assert corpus.read_body(by_url["https://h.test/a.png"]) == b"PNGDATA"
    assert ("content-encoding", "gzip") not in by_url["https://h.test/a.png"].headers
    assert (
        by_url["https://h.test/"].think_ms == 40.0 and by_url["https://c.test/s.js"].think_ms == 0.0
    )
    html = corpus.read_body(by_url["https://h.test/"])
    assert b'src="https://c.test/s.js"' in html and b'src="https://h.test/a.png"' in html
    with pytest.raises(CorpusError, match="not a HAR file"):
        (tmp_path / "bad.har").write_text("{}")
        import_har([tmp_path / "bad.har"], tmp_path / "out2")


def test_corpus_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dchlab.cli import main

    assert (
        main(
            [
                "corpus",
                "generate",
                "-o",
                str(tmp_path / "g"),
                "--seed",
                "2",
                "--pages",
                "2",
                "--json",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["page"] for r in rows] == ["site0", "site1"] and all(r["requests"] > 10 for r in rows)
    assert main(["corpus", "info", str(tmp_path / "g"), "--verify", "--json"]) == 0
    (tmp_path / "g" / "manifest.json").write_text("{}")
    assert main(["corpus", "info", str(tmp_path / "g")]) == 2
    assert "$.format: missing required field" in capsys.readouterr().err


def test_synthetic_specs_parse_in_one_place() -> None:
    import pytest

    from dchlab.pages import DEFAULT_SYNTHETIC_PAGES, CorpusError, parse_synthetic

    assert parse_synthetic("synthetic") == (1, DEFAULT_SYNTHETIC_PAGES)
    assert parse_synthetic("synthetic:7") == (7, DEFAULT_SYNTHETIC_PAGES)
    assert parse_synthetic("synthetic:7:3") == (7, 3)
    assert parse_synthetic("synthetic::3") == (1, 3)
    assert parse_synthetic("tp5n") is None
    assert parse_synthetic("/data/synthetic") is None
    for bad, why in [
        ("synthetic:x", "with integers"),
        ("synthetic:1:0", "PAGES >= 1"),
        ("synthetic:1:2:3", "PAGES >= 1"),
    ]:
        with pytest.raises(CorpusError, match=why):
            parse_synthetic(bad)
    with pytest.raises(CorpusError, match=r"synthetic\[:SEED\[:SITES\]\]"):
        parse_synthetic("synthetic:1:x", unit="SITES")


def test_named_warc_corpus_comes_from_its_folder(tmp_path, monkeypatch) -> None:
    import pytest

    from dchlab.pages import CorpusError, open_corpus
    from dchlab.pages.named import NAMES, source

    assert "warc" in NAMES
    monkeypatch.setenv("DCH_CORPUS_WARC", str(tmp_path / "nowhere"))
    assert source("warc") == tmp_path / "nowhere"
    with pytest.raises(CorpusError, match="DCH_CORPUS_WARC"):
        open_corpus("warc")
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("DCH_CORPUS_WARC", str(tmp_path / "empty"))
    monkeypatch.setenv("DCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(CorpusError, match=r"no \*\.warc"):
        open_corpus("warc")


def test_named_fingerprint_follows_content_not_mtime(tmp_path):
    """A tree copied afresh (same bytes, new mtimes) keeps its import; an edit does not."""
    import os

    from dchlab.pages.named import fingerprint

    page = tmp_path / "site.com" / "www.site.com"
    page.mkdir(parents=True)
    (page / "index.html").write_text("<html>a</html>")
    before = fingerprint(tmp_path)
    os.utime(page / "index.html", (1_000_000, 1_000_000))
    assert fingerprint(tmp_path) == before
    (page / "index.html").write_text("<html>b</html>")  # same size, other bytes
    assert fingerprint(tmp_path) != before
    (page / "index.html").write_text("<html>a</html>")
    (page / "extra.css").write_text("")
    assert fingerprint(tmp_path) != before
