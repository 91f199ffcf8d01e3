"""Re-judging published invalid loads under the gap-of-the-recording rule (rejudge.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dchlab.experiments.rejudge import Held, Rejudged, moves, rejudge, rejudged_rows
from dchlab.pages.corpus import Corpus, Object, Origin


def _held() -> Held:
    urls = ["https://www.site.test/", "https://cdn.site.test/ads/show.js?v=1"]
    objs = [Object(u, "p", 200, [], "", 0) for u in urls]
    origins = [Origin("www.site.test"), Origin("CDN.site.test")]
    return Held.of(Corpus(Path("/nowhere"), "t", "test", origins, [], objs))


def _why(n: int, url: str) -> dict[str, Any]:
    return {"valid": False, "invalid_reason": f"{n} unexpected failed resources (first: {url})"}


def test_one_unexpected_failure_is_judged_by_what_the_corpus_holds() -> None:
    held = _held()
    foreign = rejudge(_why(1, "https://d1.ads.test/x.js?uuid=1"), held)
    assert foreign.admitted and "host outside the corpus" in foreign.why
    lacked = rejudge(_why(1, "https://cdn.site.test/ads/other.js"), held)
    assert lacked.admitted and "webreplay 404" in lacked.why
    # held by host + path (another query: webreplay's fallback), http alike, host any case
    held_one = rejudge(_why(1, "http://CDN.site.test/ads/show.js?v=2"), held)
    assert held_one == Rejudged(False, "a URL the corpus holds failed")


def test_a_url_with_parentheses_and_the_no_record_suffix_are_parsed() -> None:
    url = "https://www.google-analytics.test/__utm.gif?utme=8(site*path)9(a*b)"
    row = _why(1, url)
    row["invalid_reason"] += "; the corpus records no missing URLs (re-run `dch corpus probe`)"
    v = rejudge(row, _held())
    assert v.admitted and "host outside" in v.why


def test_several_failures_are_undecidable_unless_assumed_and_other_reasons_stay() -> None:
    held = _held()
    row = _why(3, "https://d0.ads.test/a.js")
    assert not rejudge(row, held).admitted
    assert "undecidable" in rejudge(row, held).why
    assumed = rejudge(row, held, assume_rest=True)
    assert assumed.admitted and "assumed" in assumed.why
    # the named one is held: not a gap, even as an upper bound
    assert not rejudge(_why(3, "https://www.site.test/"), held, assume_rest=True).admitted
    doc = {"valid": False, "invalid_reason": "document: net::ERR_CONNECTION_RESET"}
    assert rejudge(doc, held).why == "not an unexpected-failure exclusion"


def _load(page: str, scheme: str, trial: int, plt: float, valid: bool = True) -> dict[str, Any]:
    reason = "" if valid else "1 unexpected failed resources (first: https://x.ads.test/b)"
    return {
        "cell": f"C|{page}|{trial}|{scheme}",
        "ts": "2026-11-23T00:00:00",
        "condition": "C",
        "scheme": scheme,
        "page": page,
        "trial": trial,
        "plt_ms": plt,
        "valid": valid,
        "invalid_reason": reason,
    }


def test_admitted_loads_enter_the_paired_gain_with_hand_computed_move() -> None:
    rows = [
        _load("a", "all-hbc", 0, 1000.0),
        _load("a", "dchannel", 0, 800.0),
        _load("a", "all-hbc", 1, 1000.0),
        _load("a", "dchannel", 1, 800.0),
        _load("b", "all-hbc", 0, 1000.0),
        _load("b", "dchannel", 0, 500.0),
        _load("b", "all-hbc", 1, 1000.0),
        _load("b", "dchannel", 1, 700.0, valid=False),
    ]
    after, verdicts = rejudged_rows(rows, _held())
    assert rows[7]["valid"] is False  # the input is not touched
    assert after[7]["valid"] is True and after[7]["missing_unrecorded"] == 1
    assert after[7]["resources_failed_unexpected"] == 0 and after[7]["invalid_reason"] == ""
    assert all(a is r for a, r in zip(after[:7], rows[:7], strict=True))
    assert verdicts == {("b", "gap: host outside the corpus (does not resolve)"): 1}
    (m,) = moves(rows, after)
    assert (m.condition, m.arm) == ("C", "dchannel")
    # before: a 20%, b 50% (one pair) -> 35%; after: b (500 + 300) / 2 / 1000 = 40% -> 30%
    assert m.before.gain_pct.mean == pytest.approx(35.0)
    assert m.after.gain_pct.mean == pytest.approx(30.0)
    assert m.points == pytest.approx(-5.0)
    assert (m.before.pairs, m.after.pairs) == (3, 4)
