"""Validity against the record, measured: real Chromium over the testbed (root, Chromium,
webreplay, chanemu, dnsmasq; the tp5n test also ../shared/data)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import needs_testbed, shared_pages
from test_pages_import_robust import litter_tree

from dchlab.pages.corpus import load, save
from dchlab.paths import target_dir
from dchlab.workloads.api import RunSpec, load_one

pytestmark = [pytest.mark.chromium, pytest.mark.netns]
LINK = ("fixed:20ms/100mbit", "urllc")


@needs_testbed()
def test_litter_tree_imports_and_replays(tmp_path: Path) -> None:
    """The tree with .DS_Store, Thumbs.db, .git/, empty folders... replays in Chromium
    through the testbed: every kept object loads, only the recorded missing one fails."""
    from dchlab.pages.tp5n import import_tp5n

    corpus, _ = import_tp5n(litter_tree(tmp_path / "src"), tmp_path / "out")
    scheme = "all-hbc" if (target_dir() / "release" / "dchannel").exists() else "hbc-only"
    row = load_one(RunSpec(scheme, *LINK), corpus, "ex.com", 60)
    browser = row["stats"]["browser"]
    assert row["valid"], (row["invalid_reason"], browser)
    assert row["resources_loaded"] == 4  # html, css, a.png, a%20b.png
    assert row["resources_failed"] == row["missing_expected"] == 1
    assert row["resources_failed_unexpected"] == 0 and row["missing_unrecorded"] == 0
    assert browser["failed"] == [["https://www.ex.com/gone.png", "HTTP 404"]]
    assert browser["images_broken"] == 1  # gone.png, and only it


@needs_testbed()
def test_requests_the_recording_never_saw_are_counted_not_held_against_the_load(
    tmp_path: Path,
) -> None:
    """Issue 36, through the testbed: a page whose record lists nothing asks for an
    object its origin's recording lacks (webreplay: 404) and for one on a host outside
    the corpus (the testbed's DNS: no such name). Both are gaps of the recording, the
    same under every scheme: valid, counted as missing_unrecorded."""
    import numpy as np

    from dchlab.pages.media import png
    from dchlab.pages.tp5n import import_tp5n

    www = tmp_path / "src" / "ex.com" / "www.ex.com"
    www.mkdir(parents=True)
    (www / "index.html").write_text(
        '<html><body><img src="a.png"><img src="gone.png">'
        '<img src="https://elsewhere.test/beacon.gif"></body></html>'
    )
    (www / "a.png").write_bytes(png(3000, np.random.default_rng(5)))
    corpus, _ = import_tp5n(tmp_path / "src", tmp_path / "out")
    man = json.loads((corpus.root / "manifest.json").read_text())
    man["pages"][0].update(missing=0, missing_urls=[])  # a probe that saw none of them
    (corpus.root / "manifest.json").write_text(json.dumps(man))
    corpus = load(corpus.root)
    assert "elsewhere.test" not in corpus.all_hosts()
    row = load_one(RunSpec("hbc-only", *LINK), corpus, "ex.com", 60)
    failed = sorted(row["stats"]["browser"]["failed"])
    assert failed == [
        ["https://elsewhere.test/beacon.gif", "net::ERR_NAME_NOT_RESOLVED"],
        ["https://www.ex.com/gone.png", "HTTP 404"],
    ], failed
    assert row["valid"], row["invalid_reason"]
    assert row["missing_unrecorded"] == 2 and row["resources_failed_unexpected"] == 0
    assert row["resources_failed"] == 2 and row["missing_expected"] == 0
    assert row["resources_loaded"] == 2  # index.html, a.png


def _drop_object(corpus, url: str, dest: Path):  # type: ignore[no-untyped-def]
    """A copy of `corpus` without the object at `url` (bodies shared by symlink): webreplay
    answers it 404, as if the saved page had lost one more file."""
    dest.mkdir()
    (dest / "bodies").symlink_to(corpus.root / "bodies")
    man = json.loads((corpus.root / "manifest.json").read_text())
    man["objects"] = [o for o in man["objects"] if o["url"] != url]
    (dest / "manifest.json").write_text(json.dumps(man))
    return load(dest)


@pytest.mark.shared_data
@needs_testbed("dchannel")
def test_tp5n_page_with_missing_resources_is_valid_under_every_scheme(tmp_path: Path) -> None:
    """amazon.com misses two script-inserted images (`httpdisabled://`): after the probe
    those are its record, and loads failing exactly them are valid for all-hbc and
    dchannel alike. One more object gone (404 from webreplay) is a gap of the recording
    the record does not list: the load stays valid and counts it (missing_unrecorded
    = 1; issue 36: pages that ask for such URLs on some loads only)."""
    from dchlab.commands.corpus import probe_corpus
    from dchlab.pages.tp5n import import_tp5n

    corpus, _ = import_tp5n(shared_pages("tp5n"), tmp_path / "tp5n", ["amazon.com"])
    probe_corpus(corpus)
    corpus = load(corpus.root)
    record = corpus.page("amazon.com").missing_urls or []
    assert len(record) == 2, record
    for scheme in ("all-hbc", "dchannel"):
        row = load_one(RunSpec(scheme, *LINK), corpus, "amazon.com", 60)
        assert row["valid"], (scheme, row["invalid_reason"], row["stats"]["browser"]["failed"])
        assert row["resources_failed"] == row["missing_expected"] == 2
        assert row["resources_failed_unexpected"] == 0 and row["missing_unrecorded"] == 0
        assert row["resources_loaded"] > 150
    # One more object lost: an image the entry document itself references.
    entry = next(o for o in corpus.objects if o.url == corpus.page("amazon.com").entry_url)
    html = corpus.read_body(entry).decode("latin-1")
    images = [o.url for o in corpus.objects if re.search(r"\.(gif|png|jpe?g)$", o.url)]
    victim = next(u for u in images if f'src="{u}"' in html)
    broken = _drop_object(corpus, victim, tmp_path / "broken")
    row = load_one(RunSpec("all-hbc", *LINK), broken, "amazon.com", 60)
    assert row["valid"], (row["invalid_reason"], row["stats"]["browser"]["failed"])
    assert row["missing_unrecorded"] == 1, row["stats"]["browser"]["failed"]
    assert row["resources_failed_unexpected"] == 0
    assert row["resources_failed"] == 3 and row["missing_expected"] == 2
    assert [victim, "HTTP 404"] in row["stats"]["browser"]["failed"]
    # the record is the page's, not the load's: saving does not change it
    save(corpus)
    assert load(corpus.root).page("amazon.com").missing_urls == record
