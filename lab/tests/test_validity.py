"""Validity against the corpus' record: the judgment, the manifest field, the store
column and the report's exclusion counts (no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from dchlab.experiments import store
from dchlab.experiments.summary import exclusions, reason_kind
from dchlab.pages.corpus import CorpusError, CorpusWriter, load
from dchlab.workloads.validity import judge, url_match_key

GONE = "https://www.ex.com/a/gone.png"


def _res(failed: list[tuple[str, str]], doc_error: str = "") -> dict:  # type: ignore[type-arg]
    return {
        "valid": not failed and not doc_error,
        "invalid_reason": doc_error or (f"{len(failed)} failed resources" if failed else ""),
        "document_error": doc_error,
        "resources_failed": len(failed),
        "failed": [list(f) for f in failed],
    }


def test_expected_failures_are_valid_others_are_not() -> None:
    record = [GONE, "httpdisabled://ads.ex.com/x.gif"]
    v = judge(_res([(GONE, "HTTP 404")]), record)
    assert v.valid and v.invalid_reason == "" and v.failed == 1 and v.unexpected == []
    # http vs https, host case, fragment and percent-escapes do not make a new request
    v = judge(_res([("http://WWW.EX.COM/a/%67one.png#x", "HTTP 404")]), record)
    assert v.valid
    v = judge(_res([(GONE, "HTTP 404"), ("https://cdn.ex.net/s.css", "net::ERR_FAILED")]), record)
    assert not v.valid and v.failed == 2 and v.unexpected == ["https://cdn.ex.net/s.css"]
    assert v.invalid_reason.startswith("1 unexpected failed resources")
    v = judge(_res([("httpdisabled://ads.ex.com/x.gif", "net::ERR_UNKNOWN_URL_SCHEME")]), record)
    assert v.valid
    # a saver's disabled scheme is not the https request of the same path: a failure
    # there is outside the record (invalid when the replay failed to deliver it; a 404
    # is a gap of the recording, counted as unrecorded)
    v = judge(_res([("https://ads.ex.com/x.gif", "net::ERR_CONNECTION_RESET")]), record)
    assert not v.valid and v.unexpected == ["https://ads.ex.com/x.gif"]
    v = judge(_res([("https://ads.ex.com/x.gif", "HTTP 404")]), record)
    assert v.valid and v.unrecorded == ["https://ads.ex.com/x.gif"] and v.unexpected == []
    # a recorded URL answered 404 is neither unexpected nor unrecorded
    assert judge(_res([(GONE, "HTTP 404")]), record).unrecorded == []


def test_query_variants_of_a_recorded_url_are_excused() -> None:
    """Beacons carry a random cache-buster (ameblo.jp, cnet.com: `__utm.gif?utmn=<random>`)
    on every load; webreplay's host+path fallback could answer no variant, so the
    record's one excuses them all — and nothing on another path."""
    record = ["https://www.ex.com/__utm.gif?utmwv=1.4&utmn=1399644"]
    again = "https://www.ex.com/__utm.gif?utmwv=1.4&utmn=4410224"
    assert judge(_res([(again, "HTTP 404")]), record).valid
    other = "https://www.ex.com/ga.js?utmn=1"
    v = judge(_res([(other, "net::ERR_CONNECTION_RESET")]), record)
    assert not v.valid and v.unexpected == [other]
    v = judge(_res([(other, "HTTP 404")]), record)
    assert v.valid and v.unrecorded == [other]
    assert judge(_res([(again, "HTTP 404")]), record).unrecorded == []


def test_requests_the_page_cancels_are_not_failures_of_the_replay() -> None:
    """homeway.com.cn, measured: a script swaps image URLs; over a slower path the https
    loads are still in flight and Chromium aborts them. Not the replay's failure."""
    swapped = "https://data.futures.hexun.com/FDImage/A1201.gif"
    v = judge(_res([(swapped, "net::ERR_ABORTED")]), [GONE])
    assert v.valid and v.failed == 1
    v = judge(_res([(swapped, "net::ERR_CONNECTION_RESET")]), [GONE])
    assert not v.valid and v.unexpected == [swapped]
    # telegraph.co.uk, measured: a script builds `httpdisabled://` URLs with a random
    # path; Chromium refuses the scheme before anything leaves the browser.
    beacon = "httpdisabled://pix04.revsci.net/E06560/b3/0/3/0902121/139148218.js?D=x"
    assert judge(_res([(beacon, "net::ERR_UNKNOWN_URL_SCHEME")]), [GONE]).valid


def test_document_errors_and_count_only_records() -> None:
    v = judge(_res([], "main document status 404"), [GONE])
    assert not v.valid and v.invalid_reason == "main document status 404"
    # a manifest that only knows a count excuses nothing, and says how to fix it
    v = judge(_res([(GONE, "net::ERR_CONNECTION_RESET")]), None)
    assert not v.valid and "dch corpus probe" in v.invalid_reason and v.unexpected == [GONE]
    v = judge(_res([(GONE, "HTTP 404")]), None)  # but a 404 is the recording's gap
    assert v.valid and v.unrecorded == [GONE]
    # a driver that crashed reports no document_error field: invalid with its reason
    v = judge({"valid": False, "invalid_reason": "driver exited 1: boom"}, [GONE])
    assert not v.valid and v.invalid_reason == "driver exited 1: boom"
    assert url_match_key("https://a.test") == url_match_key("http://A.test/")
    assert url_match_key("https://a.test/x?q=1", with_query=False) == "http://a.test/x"


def test_manifest_missing_urls_roundtrip_and_old_integer(tmp_path: Path) -> None:
    w = CorpusWriter(tmp_path / "c", "t", "test")
    w.add_page("p", "https://a.test/", [GONE, GONE, "https://b.test/x.js"])
    w.add_object("https://a.test/", "p", b"<html></html>", [("content-type", "text/html")])
    w.finish()
    c = load(tmp_path / "c")
    assert c.page("p").missing == 2
    assert c.page("p").missing_urls == ["https://b.test/x.js", GONE]
    man = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert man["pages"][0]["missing_urls"] == ["https://b.test/x.js", GONE]
    # a manifest from before the URL set: the integer still loads, the set is unknown
    del man["pages"][0]["missing_urls"]
    man["pages"][0]["missing"] = 3
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(man))
    old = load(tmp_path / "c").page("p")
    assert old.missing == 3 and old.missing_urls is None
    man["pages"][0]["missing_urls"] = [GONE]
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(CorpusError, match=r"\$\.pages\[0\]\.missing: is 3 but missing_urls"):
        load(tmp_path / "c")
    man["pages"][0]["missing_urls"] = [GONE, 7, "x"]
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(CorpusError, match=r"\$\.pages\[0\]\.missing_urls\[1\]"):
        load(tmp_path / "c")


def test_store_gains_the_validity_columns(tmp_path: Path) -> None:
    """A store made before the columns existed is migrated on the next append."""
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute('CREATE TABLE results ("row_id" VARCHAR, "ts" TIMESTAMP, "scheme" VARCHAR)')
    con.execute("INSERT INTO results VALUES ('r0', now(), 'all-hbc')")
    con.close()
    store.append_rows(
        [{"scheme": "dchannel", "valid": False, "resources_failed": 3,
          "resources_failed_unexpected": 1, "missing_expected": 2}],
        campaign="c", store=db,
    )  # fmt: skip
    rows = store.load_rows(store=db)
    assert [r["resources_failed_unexpected"] for r in rows] == [None, 1]
    assert rows[1]["missing_expected"] == 2 and rows[1]["resources_failed"] == 3


def test_report_counts_exclusions_by_reason() -> None:
    rows = [
        {"cell": "a", "valid": True, "resources_failed": 2},
        {"cell": "b", "valid": True, "resources_failed": 0},
        {"cell": "c", "valid": False, "invalid_reason": "1 unexpected failed resources (first: https://x/y)"},
        {"cell": "d", "valid": False, "invalid_reason": "3 unexpected failed resources (first: https://z/)"},
        {"cell": "e", "valid": False, "invalid_reason": "timeout after 60 s"},
    ]  # fmt: skip
    kinds, expected_only = exclusions(rows)
    assert kinds == {"unexpected failed resources": 2, "timeout after N s": 1}
    assert expected_only == 1
    assert reason_kind("main document status 404") == "main document status N"
    # a URL with parentheses, cut off before the closing one (as rows store it)
    cut = "1 unexpected failed resources (first: https://a/b?x=8(s*t)9(f*g)11(3!2)&u"
    assert reason_kind(cut) == "unexpected failed resources"
    assert reason_kind("2 timeouts (and 3 more); then x") == "timeouts"


def test_report_section_says_how_many_loads_were_excluded_and_why() -> None:
    from dchlab.experiments.campaign import cell_key, load_campaign
    from dchlab.experiments.report import section

    c = load_campaign(Path(__file__).resolve().parents[2] / "experiments" / "demo.yaml")
    rows = []  # TEST DATA ONLY
    for page in ("site0", "site1"):
        for s in c.schemes:
            bad = s.label == "dchannel" and page == "site1"
            rows.append({
                "test_data": True, "cell": cell_key(c.conditions[0].name, page, 0, s.label),
                "condition": c.conditions[0].name, "arm": s.label, "scheme": s.scheme,
                "item": page, "page": page, "trial": 0, "plt_ms": 900.0,
                "valid": not bad, "resources_failed": 2 if page == "site0" else 3,
                "invalid_reason": "1 unexpected failed resources (first: https://a/b)" if bad else "",
            })  # fmt: skip
    counts = section(c, rows, with_channels=False)["counts"]
    assert "1 of 6 loads excluded as invalid (1 unexpected failed resources)" in counts
    assert "5 valid loads failed only requests their corpus records as missing" in counts


def test_a_404_is_a_gap_of_the_recording_a_failed_delivery_is_not() -> None:
    """Issue 36: a page asking, on some loads only, for URLs the corpus lacks gets 404s
    from the replay on every scheme alike: counted (`missing_unrecorded`), never
    invalid. What the corpus holds but did not arrive invalidates the load."""
    beacon = "https://ads.ex.net/slot?r=1"
    v = judge(_res([(GONE, "HTTP 404"), (beacon, "HTTP 404"), (GONE + "2", "HTTP 404")]), [GONE])
    assert v.valid and v.invalid_reason == "" and v.failed == 3
    assert v.unrecorded == [beacon, GONE + "2"] and v.unexpected == []
    for delivery_failure in (
        "net::ERR_CONNECTION_RESET",
        "net::ERR_TIMED_OUT",
        "net::ERR_CONTENT_LENGTH_MISMATCH",  # a truncated body
        "net::ERR_HTTP2_PROTOCOL_ERROR",
        "HTTP 502",  # objproxy's answer when its fetch failed
    ):
        v = judge(_res([(beacon, "HTTP 404"), ("https://www.ex.com/a.js", delivery_failure)]), [])
        assert not v.valid, delivery_failure
        assert v.unexpected == ["https://www.ex.com/a.js"] and v.unrecorded == [beacon]
        assert v.invalid_reason == "1 unexpected failed resources (first: https://www.ex.com/a.js)"
    # the document's own failure stays invalid whatever its subresources did
    v = judge(_res([(beacon, "HTTP 404")], "main document status 404"), [])
    assert not v.valid and v.invalid_reason == "main document status 404"


def test_row_counts_unrecorded_missing_apart_from_unexpected_failures() -> None:
    from dchlab.workloads.validity import page_outcome

    res = _res(
        [(GONE, "HTTP 404"), ("https://x.test/a", "HTTP 404"), ("https://x.test/b", "HTTP 404")]
    )
    res.update(plt_ms=812.5, resources_loaded=40, bytes_received=1000)
    row = page_outcome(res, [GONE])
    assert row.valid is True and row.invalid_reason == ""
    assert (row.resources_failed, row.resources_failed_unexpected) == (3, 0)
    assert row.missing_unrecorded == 2
    assert (row.plt_ms, row.total_ms, row.size_bytes) == (812.5, 812.5, 1000)


def test_invalid_reason_is_one_line() -> None:
    """A driver error followed by the browser's log tail (D-Bus chatter) is reported by
    its first line; the log stays in its file."""
    from dchlab.workloads.browser import LoadResult, finish
    from dchlab.workloads.validity import one_line

    dbus = "\n".join(
        f"[1126/061{i}:ERROR:bus.cc(407)] Failed to connect to the bus: Could not parse server address"
        for i in range(8)
    )
    reason = "driver error: Expecting property name enclosed in double quotes\n" + dbus
    assert one_line(reason) == (
        "driver error: Expecting property name enclosed in double quotes (+8 more lines)"
    )
    assert one_line("x" * 400) == "x" * 299 + "…"
    assert one_line("\n\n  only \n") == "only" and one_line("") == ""
    res = LoadResult("https://a.test/", invalid_reason=reason)
    finish(res)
    assert not res.valid and "\n" not in res.invalid_reason and "\n" not in res.document_error
    assert res.invalid_reason.startswith("driver error: Expecting property name")
    v = judge({"document_error": reason, "failed": [], "resources_failed": 0}, [])
    assert not v.valid and v.invalid_reason == one_line(reason)


def test_error_answers_chromium_dropped_are_reported_as_the_answer() -> None:
    """Measured (Chromium 156): a cross-origin 404 image/script/stylesheet ends in
    loadingFailed net::ERR_BLOCKED_BY_ORB with no responseReceived (its status only in
    responseReceivedExtraInfo); a same-origin 404 script in net::ERR_ABORTED after a
    404 responseReceived. Both are the server's 404."""
    from dchlab.workloads.browser import answered_error

    assert answered_error("net::ERR_BLOCKED_BY_ORB", 404) == "HTTP 404"
    assert answered_error("net::ERR_BLOCKED_BY_RESPONSE", 404) == "HTTP 404"
    assert answered_error("net::ERR_ABORTED", 404) == "HTTP 404"
    assert answered_error("net::ERR_BLOCKED_BY_ORB", 502) == "HTTP 502"  # still a failure
    # the page cancelled it: stays excused as before whatever the status
    assert answered_error("net::ERR_ABORTED", 502) == "net::ERR_ABORTED"
    assert answered_error("net::ERR_ABORTED", 0) == "net::ERR_ABORTED"
    # the answer began and then broke: a failed delivery, not the server's answer
    assert (
        answered_error("net::ERR_CONTENT_LENGTH_MISMATCH", 404)
        == "net::ERR_CONTENT_LENGTH_MISMATCH"
    )
    assert answered_error("net::ERR_CONNECTION_RESET", 200) == "net::ERR_CONNECTION_RESET"
    assert answered_error("net::ERR_BLOCKED_BY_ORB", 200) == "net::ERR_BLOCKED_BY_ORB"


def test_a_name_outside_the_corpus_that_does_not_resolve_is_a_gap_too() -> None:
    """Measured on published fig3_warc rows: reddit asks for
    pagead2.googlesyndication.com (no origin of the corpus: the testbed's DNS answers
    no) on some loads. With the corpus' hosts known that is a gap of the recording; a
    corpus host that did not resolve is a failure (its DNS crossed the channels)."""
    hosts = ["www.reddit.com", "WWW.REDDITSTATIC.COM"]
    rum = "https://pagead2.googlesyndication.com/pagead/js/rum.js"
    own = "https://www.redditstatic.com/x.js"
    v = judge(_res([(rum, "net::ERR_NAME_NOT_RESOLVED")]), [], hosts)
    assert v.valid and v.unrecorded == [rum] and v.unexpected == []
    v = judge(_res([(own, "net::ERR_NAME_NOT_RESOLVED")]), [], hosts)
    assert not v.valid and v.unexpected == [own] and v.unrecorded == []
    # without the corpus' hosts nothing tells the two apart: not excused (as before)
    v = judge(_res([(rum, "net::ERR_NAME_NOT_RESOLVED")]), [])
    assert not v.valid and v.unexpected == [rum]
    # another error on a foreign host is no DNS gap
    v = judge(_res([(rum, "net::ERR_CONNECTION_RESET")]), [], hosts)
    assert not v.valid and v.unexpected == [rum]
    from dchlab.workloads.validity import page_outcome

    row = page_outcome(_res([(rum, "net::ERR_NAME_NOT_RESOLVED"), (GONE, "HTTP 404")]), [], hosts)
    assert row.valid and row.missing_unrecorded == 2 and row.resources_failed == 2
