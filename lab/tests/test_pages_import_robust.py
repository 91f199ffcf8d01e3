"""Importers survive real trees: litter skipped with warnings, unservable corpora refused,
one host-name rule shared with webreplay, `corpus: tp5n` resolved and imported once."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dchlab.pages import open_corpus
from dchlab.pages.corpus import CorpusError, CorpusWriter, load
from dchlab.pages.media import png
from dchlab.pages.servable import host_name_problem
from dchlab.pages.tp5n import import_tp5n
from dchlab.paths import target_dir


def litter_tree(root: Path) -> Path:
    """A saved page the way people's machines keep them: Finder and Explorer litter, a
    git checkout, an empty folder, a folder that is no host name, a non-UTF-8 file name,
    a file saved under its percent-encoded name, the same host in two letter cases."""
    rng = np.random.default_rng(3)
    site = root / "ex.com"
    www = site / "www.ex.com"
    (www / "empty").mkdir(parents=True)
    (www / "index.html").write_text(
        '<html><head><link rel="stylesheet" href="style.css"></head><body>'
        '<img src="a.png"><img src="a%20b.png"><img src="gone.png"></body></html>'
    )
    (www / "style.css").write_text("body{color:#333}")
    (www / ".well-known").mkdir()  # a dot-folder that is a URL path, not litter
    (www / ".well-known" / "security.txt").write_text("Contact: a@ex.com\n")
    (www / "a.png").write_bytes(png(3000, rng))
    (www / "a%20b.png").write_bytes(png(2000, rng))
    (www / "Thumbs.db").write_bytes(b"\0" * 64)
    (www / "._index.html").write_bytes(b"\0\5\26\7AppleDouble")
    with open(os.fsencode(www) + b"/caf\xe9.png", "wb") as f:  # Latin-1 name, not UTF-8
        f.write(png(900, rng))
    (site / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (site / "desktop.ini").write_text("[.ShellClassInfo]\n")
    (site / ".git" / "objects" / "ab").mkdir(parents=True)
    (site / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (site / ".git" / "objects" / "ab" / "cdef").write_bytes(b"x")
    (site / "not a host!").mkdir()
    (site / "not a host!" / "x.png").write_bytes(png(900, rng))
    (site / "WWW.EX.COM").mkdir()
    (site / "WWW.EX.COM" / "a.png").write_bytes(b"the other copy")
    (site / "empty-host.test").mkdir()
    (site / "index_files").mkdir()  # a browser's "Save Page As" folder: no host
    (site / "index_files" / "x.js").write_text("1")
    (root / "empty-site").mkdir()
    (root / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (root / "tp5n.manifest").write_text(
        "http://localhost/page_load_test/tp5n/ex.com/www.ex.com/index.html\n"
    )
    return root


def test_litter_is_skipped_with_counted_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    corpus, _ = import_tp5n(litter_tree(tmp_path / "src"), tmp_path / "out")
    assert sorted(o.url for o in corpus.objects) == [
        "https://www.ex.com/.well-known/security.txt",
        "https://www.ex.com/a%2520b.png",  # the saved name, percent-encoded once more
        "https://www.ex.com/a.png",
        "https://www.ex.com/index.html",
        "https://www.ex.com/style.css",
    ]
    assert [o.host for o in corpus.origins] == ["www.ex.com"]
    assert corpus.page("ex.com").missing_urls == ["https://www.ex.com/gone.png"]
    html = corpus.read_body(next(o for o in corpus.objects if o.url.endswith("index.html")))
    assert b'src="https://www.ex.com/a%2520b.png"' in html
    warned = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for name in (
        "ex.com/.DS_Store",
        "ex.com/desktop.ini",
        "ex.com/.git",
        "not a host!",
        "WWW.EX.COM",
        "empty-host.test",
        "index_files: folder name is not a domain name",
        "www.ex.com/empty",
        "www.ex.com/Thumbs.db",
        "www.ex.com/._index.html",
        "caf\\xe9.png",
        "src/empty-site",
        "src/.DS_Store",
    ):
        assert name in warned, name
    assert sum(corpus.skipped.values()) == 13
    assert corpus.skipped["empty folder"] == 3
    assert load(tmp_path / "out").page("ex.com").missing == 1


def test_unservable_corpus_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dchlab.cli import main

    w = CorpusWriter(tmp_path / "h", "t", "test")
    w.add_page("p", "https://a.test/")
    w.add_object("https://a.test/", "p", b"x", [("content-disposition", "inline; caf\u00e9")])
    with pytest.raises(CorpusError, match=r"\$\.objects\[0\]\.headers\[0\].*visible ASCII"):
        w.finish()
    w = CorpusWriter(tmp_path / "c", "t", "test")
    w.add_page("p", "https://a.test/")
    w.add_object("https://a.test/", "p", b"<html></html>", [("content-type", "text/html")])
    corpus = w.finish()
    man = json.loads((tmp_path / "c" / "manifest.json").read_text())
    man["origins"].append({"host": ".ds_store", "alpn": ["h2", "http/1.1"]})
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(man))
    assert main(["corpus", "info", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "manifest.json: $.origins[1].host: '.ds_store': empty or over-long label" in err
    # webreplay's own parsers, as --verify asks them (a 1xx final status: refused there)
    if not (target_dir() / "release" / "webreplay").exists():
        pytest.skip("webreplay not built")
    from dchlab.commands.corpus import replay_check

    assert replay_check(corpus) == []
    man["origins"].pop()
    man["objects"][0]["status"] = 101
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(man))
    problems = replay_check(corpus)
    assert len(problems) == 1 and "objects[0]" in problems[0] and "status" in problems[0]


# Names that probe each clause of hosts.rs validate_name (no whitespace: a hosts file
# splits on it, so such a name never reaches the check as one name).
NAMES = [
    "a.test", "www.Example.COM", "x-y.z", "under_score.test", "-", "1.2.3.4.5", "localhost",
    "a" * 63 + ".test", "b" * 63 + "." + "c" * 63 + "." + "d" * 63 + "." + "e" * 61,
    ".ds_store", "a..b", "a.", "a" * 64 + ".test", "f" * 63 + "." + "g" * 63 + "." + "h" * 63 + "." + "i" * 62,
    "1.2.3.4", "::1", "fe80::1", "bad/name", "host!", "caf\u00e9.test", "a:b", "x*.test", "%41.test",
]  # fmt: skip


def test_host_name_rule_is_webreplays(tmp_path: Path) -> None:
    """Contract: the Python rule and webreplay's hosts parser accept the same names."""
    exe = target_dir() / "release" / "webreplay"
    if not exe.exists():
        pytest.skip("webreplay not built (cargo build --release -p webreplay)")
    hosts = tmp_path / "hosts"
    disagree = []
    for name in NAMES:
        hosts.write_text(f"198.19.128.1 {name}\n")
        p = subprocess.run([exe, "--check", "--hosts", hosts], capture_output=True, text=True)
        assert p.returncode in (0, 1), p.stderr
        ours = host_name_problem(name)
        if (p.returncode == 0) != (ours is None):
            disagree.append((name, ours, p.stderr.strip()[-200:]))
    assert not disagree
    assert sum(host_name_problem(n) is None for n in NAMES) == 9  # both sides exercised
    assert host_name_problem("not a host!") is not None


# --- `corpus: tp5n` ---------------------------------------------------------------------


def test_tp5n_name_resolves_imports_once_and_reimports_on_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dchlab.pages import named

    src = litter_tree(tmp_path / "tree")
    monkeypatch.setenv("DCH_CORPUS_TP5N", str(src))
    monkeypatch.setenv("DCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(named, "_probe_possible", lambda: "probing is another test's job")
    first = open_corpus("tp5n")
    assert first.root.parent == tmp_path / "cache" / "corpora"
    assert [p.name for p in first.pages] == ["ex.com"]
    stamp = (first.root / "manifest.json").stat().st_mtime_ns
    again = open_corpus("tp5n")
    assert again.root == first.root
    assert (again.root / "manifest.json").stat().st_mtime_ns == stamp  # not re-imported
    (src / "ex.com" / "www.ex.com" / "style.css").write_text("body{color:#000}")
    changed = open_corpus("tp5n")
    assert changed.root != first.root and not first.root.exists()
    # an imported corpus directory is used as it is
    monkeypatch.setenv("DCH_CORPUS_TP5N", str(changed.root))
    assert open_corpus("tp5n").root == changed.root


def test_tp5n_absent_says_how_to_point_at_a_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dchlab.experiments.runner import WorkloadUnavailable, corpus_page_names

    monkeypatch.setenv("DCH_CORPUS_TP5N", str(tmp_path / "nowhere"))
    with pytest.raises(CorpusError, match="DCH_CORPUS_TP5N") as e:
        open_corpus("tp5n")
    assert str(tmp_path / "nowhere") in str(e.value)
    with pytest.raises(WorkloadUnavailable, match="DCH_CORPUS_TP5N"):
        corpus_page_names("tp5n", 10)


def test_captures_skip_what_the_replay_cannot_serve(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A WARC with an IP-literal host, a URL recorded twice and a non-ASCII header value:
    the page imports, the unservable parts are skipped with warnings naming them."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from dchlab.pages.warc import import_warc

    path = tmp_path / "p.warc.gz"
    with path.open("wb") as fh:
        w = WARCWriter(fh, gzip=True)
        for url, headers, body in [
            ("http://www.w.test/", [("Content-Type", "text/html")],
             b'<img src="http://10.1.2.3/ad.gif"><img src="/a.png">'),
            ("http://10.1.2.3/ad.gif", [("Content-Type", "image/gif")], b"GIF89a"),
            ("http://www.w.test/a.png", [("Content-Type", "image/png"),
                                         ("Content-Disposition", "inline; filename=caf\u00e9.png")], b"PNG1"),
            ("http://www.w.test/a.png", [("Content-Type", "image/png")], b"PNG2"),
        ]:  # fmt: skip
            hh = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
            w.write_record(
                w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=hh)
            )
    caplog.set_level(logging.WARNING)
    corpus, missing = import_warc([path], tmp_path / "out")
    assert missing == {"p": 1}
    assert sorted(o.url for o in corpus.objects) == [
        "https://www.w.test/",
        "https://www.w.test/a.png",
    ]
    png_obj = next(o for o in corpus.objects if o.url.endswith("a.png"))
    assert corpus.read_body(png_obj) == b"PNG1"
    # warcio itself writes a non-ASCII value as RFC 8187 `filename*=UTF-8''...`: servable
    assert dict(png_obj.headers)["content-disposition"] == "inline; filename*=UTF-8''caf%C3%A9.png"
    assert corpus.page("p").missing_urls == ["https://10.1.2.3/ad.gif"]
    warned = "\n".join(r.getMessage() for r in caplog.records)
    assert "http://10.1.2.3/ad.gif: expected a host name, got an address" in warned
    assert "URL recorded twice" in warned
    load(tmp_path / "out")
    # HAR keeps header values as any JSON string: a non-ASCII one is dropped, named
    from dchlab.pages.har import import_har

    entry = {
        "request": {"method": "GET", "url": "http://h.test/"},
        "response": {
            "status": 200,
            "headers": [{"name": "Content-Type", "value": "text/html"},
                        {"name": "X-Note", "value": "caf\u00e9"}],
            "content": {"mimeType": "text/html", "text": "<p>x</p>"},
        },
    }  # fmt: skip
    (tmp_path / "h.har").write_text(json.dumps({"log": {"entries": [entry, entry]}}))
    caplog.clear()
    har = import_har([tmp_path / "h.har"], tmp_path / "har")[0]
    assert [k for k, _ in har.objects[0].headers] == ["content-type"]
    warned = "\n".join(r.getMessage() for r in caplog.records)
    assert "https://h.test/: dropped header: invalid value of header 'X-Note'" in warned
    assert "log.entries[1]: skipped http://h.test/: URL recorded twice" in warned
