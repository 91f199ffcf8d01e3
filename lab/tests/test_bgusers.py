"""Background users (dchlab.workloads.bgusers): a page's dependency order from the
corpus, think-time sampling, and the replayer's request scheduling (fake transport)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dchlab.pages.corpus import CorpusWriter
from dchlab.pages.generator import generate, plan_page
from dchlab.workloads.bgusers import replay, think
from dchlab.workloads.bgusers.deps import Request, page_requests

HTML = b"""<html><head><link rel="stylesheet" href="/a.css"><script src="b.js"></script>
<a href="https://www.x.test/other.html">not fetched</a></head>
<body><img src="https://img.x.test/i1.png"></body></html>"""
CSS = b"body{background:url(../img/bg.png)}"
JS = b"fetch('https://api.x.test/c.json').then(r=>r.json())"


def _tiny(tmp_path: Path) -> Any:
    w = CorpusWriter(tmp_path / "c", "tiny", "test")
    w.add_page("p", "https://www.x.test/")
    html = [("content-type", "text/html")]
    w.add_object("https://www.x.test/", "p", HTML, html)
    w.add_object("https://www.x.test/orphan.js", "p", b"//nobody refers to me")
    w.add_object("https://www.x.test/a.css", "p", CSS, [("content-type", "text/css")])
    w.add_object("https://www.x.test/b.js", "p", JS, [("content-type", "text/javascript")])
    w.add_object("https://img.x.test/i1.png", "p", b"png1")
    w.add_object("https://www.x.test/img/bg.png", "p", b"png2")
    w.add_object("https://api.x.test/c.json", "p", b"{}", [("content-type", "application/json")])
    w.add_object("https://www.x.test/other.html", "p", b"<html></html>", html)
    return w.finish()


def test_dependency_order_of_a_hand_built_page(tmp_path: Path) -> None:
    """Entry first; its fetched references in document order (css, js, img; the <a>
    link is not a subresource); then breadth-first: the CSS's url() (resolved against
    the CSS's URL), the JS's absolute URL; objects nothing references hang off the
    entry, last (deps module rule)."""
    reqs = page_requests(_tiny(tmp_path), "p")
    got = [(r.url.split("//")[1], r.parent) for r in reqs]
    assert got == [
        ("www.x.test/", -1),
        ("www.x.test/a.css", 0),
        ("www.x.test/b.js", 0),
        ("img.x.test/i1.png", 0),
        ("www.x.test/img/bg.png", 1),
        ("api.x.test/c.json", 2),
        ("www.x.test/orphan.js", 0),
        ("www.x.test/other.html", 0),
    ]
    assert reqs[1].sha256 == hashlib.sha256(CSS).hexdigest() and reqs[1].size == len(CSS)


def test_dependency_order_recovers_the_generators_tree(tmp_path: Path) -> None:
    """On synthetic pages the generator knows each object's parent (PagePlan): the
    order derived from the bodies alone finds exactly those parents."""
    corpus = generate(tmp_path / "syn", seed=1, pages=3)
    for i, page in enumerate(corpus.pages):
        plan = plan_page(1, i)
        reqs = page_requests(corpus, page.name)
        got = {r.url: reqs[r.parent].url if r.parent >= 0 else None for r in reqs}
        want = {r.url: plan.resources[r.parent].url if r.parent >= 0 else None
                for r in plan.resources}  # fmt: skip
        assert got == want and len(reqs) == len(plan.resources)
        assert all(r.parent < i for i, r in enumerate(reqs))


def test_think_time_parse_and_errors() -> None:
    assert think.parse("exp:30") == think.ThinkTime("exp", 30.0)
    assert think.parse("lognormal:10,1.5") == think.ThinkTime("lognormal", 10.0, 1.5)
    assert str(think.parse(think.DEFAULT)) == "exp:30"
    for bad in ("exp", "exp:0", "exp:-1", "exp:1,2", "gamma:1", "lognormal:5", "exp:x", "exp:nan"):
        with pytest.raises(ValueError, match="--think"):
            think.parse(bad, "--think")


def test_think_time_samples_follow_the_stated_distribution() -> None:
    """exp:30 (3GPP2 C.R1002-0: mean 30 s): 40 000 draws have mean 30 ± 1 % (the
    standard error is 30/√40000 = 0.15 s, so 0.3 s is 2σ) and P(X > 30) = e^-1;
    lognormal:10,0.5 has median 10 and mean 10·e^(0.125) = 11.33."""
    rng = np.random.default_rng(7)
    x = np.array([think.parse("exp:30").sample(rng) for _ in range(40_000)])
    assert abs(x.mean() - 30) < 0.3
    assert abs((x > 30).mean() - math.exp(-1)) < 0.01
    ln = think.parse("lognormal:10,0.5")
    y = np.array([ln.sample(rng) for _ in range(40_000)])
    assert abs(np.median(y) - 10) < 0.15 and abs(ln.mean_s - 10 * math.exp(0.125)) < 1e-9
    assert think.parse("fixed:2").sample(rng) == 2.0


class _Resp:
    def __init__(self, body: bytes, status: int = 200) -> None:
        self.content, self.status_code = body, status


def _reqs(bodies: dict[str, bytes], parents: dict[str, int]) -> list[Request]:
    return [Request(u, parents[u], len(b), hashlib.sha256(b).hexdigest())
            for u, b in bodies.items()]  # fmt: skip


def test_load_page_requests_each_object_after_its_parent() -> None:
    """A child starts only after its parent's response; siblings run in parallel; a
    transport error fails the request and its descendants (never requested); a body
    that differs from the corpus's counts as mismatched."""
    bodies = {f"https://h.test/{k}": k.encode() * 10 for k in "rabcdx"}
    parents = dict(zip(bodies, [-1, 0, 0, 1, 1, 0], strict=True))
    reqs = _reqs(bodies, parents)
    events: list[tuple[str, str]] = []

    async def fetch(_client: Any, url: str, _headers: dict[str, str]) -> _Resp:
        name = url.rsplit("/", 1)[1]
        events.append(("start", name))
        await asyncio.sleep(0.01)
        events.append(("end", name))
        if name == "x":
            raise OSError("reset")
        return _Resp(b"tampered" if name == "d" else bodies[url])

    failed, mismatched, nbytes = asyncio.run(replay.load_page(None, reqs, set(), fetch))
    assert (failed, mismatched) == (1, 1)
    assert nbytes == sum(len(b) for u, b in bodies.items() if not u.endswith(("x", "d"))) + 8
    pos = {e: i for i, e in enumerate(events)}
    for r in reqs[1:]:
        parent = reqs[r.parent].url.rsplit("/", 1)[1]
        assert pos[("end", parent)] < pos[("start", r.url.rsplit("/", 1)[1])]
    assert pos[("start", "b")] < pos[("end", "a")]  # siblings overlap

    # a failing parent's children are never requested and count as failed
    events.clear()
    parents2 = {**parents, "https://h.test/c": 5}
    out = asyncio.run(replay.load_page(None, _reqs(bodies, parents2), set(), fetch))
    assert out[0] == 2 and ("start", "c") not in events


def test_http1_origins_get_at_most_six_parallel_requests() -> None:
    bodies = {f"https://old.test/{k}": b"x" for k in range(20)}
    parents = {u: (-1 if i == 0 else 0) for i, u in enumerate(bodies)}
    live, peak = 0, 0

    async def fetch(_client: Any, url: str, _headers: dict[str, str]) -> _Resp:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.005)
        live -= 1
        return _Resp(b"x")

    asyncio.run(replay.load_page(None, _reqs(bodies, parents), {"old.test"}, fetch))
    assert peak == replay.H1_PER_HOST
    peak = 0
    asyncio.run(replay.load_page(None, _reqs(bodies, parents), set(), fetch))
    assert peak == 19  # HTTP/2: every child of the entry at once


def test_run_user_thinks_then_loads_pages_drawn_with_its_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fixed think times, 3 pages: one log line per page, pages drawn uniformly with
    the seed (the same seed draws the same pages)."""
    plans = {n: _reqs({f"https://h.test/{n}": n.encode()}, {f"https://h.test/{n}": -1})
             for n in ("p1", "p2", "p3")}  # fmt: skip

    async def fetch(_client: Any, url: str, _headers: dict[str, str]) -> _Resp:
        return _Resp(url.rsplit("/", 1)[1].encode())

    class _Client:
        async def __aenter__(self) -> _Client:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(replay, "_client", lambda _ctx: _Client())
    monkeypatch.setattr(replay, "_fetch", fetch)

    def run(seed: int) -> list[dict[str, Any]]:
        log = io.StringIO()
        n = asyncio.run(replay.run_user(plans, set(), think.parse("fixed:0.01"),
                                        np.random.default_rng(seed), log, max_pages=5))  # fmt: skip
        assert n == 5
        return [json.loads(line) for line in log.getvalue().splitlines()]

    lines = run(3)
    assert len(lines) == 5 and all(ln["failed"] == ln["mismatched"] == 0 for ln in lines)
    assert all(ln["start"] >= 0.01 * (i + 1) - 1e-3 for i, ln in enumerate(lines))
    rng = np.random.default_rng(3)
    want = []
    for _ in range(5):
        want.append(["p1", "p2", "p3"][int(rng.integers(3))])
    assert [ln["page"] for ln in lines] == want == [ln["page"] for ln in run(3)]


def test_bg_think_is_checked_where_it_is_given() -> None:
    from dchlab.run_config import RunConfig

    assert RunConfig("dchannel", "MM-S", "urllc", devices=4).bg_think == "exp:30"
    assert RunConfig("dchannel", "MM-S", "urllc", devices=4, bg_think="idle").bg_think == "idle"
    with pytest.raises(ValueError, match="bg_think: expected exp:MEAN_S"):
        RunConfig("dchannel", "MM-S", "urllc", bg_think="exp")


def test_request_headers_are_chromiums_per_kind() -> None:
    from dchlab.workloads.bgusers.headers import request_headers

    entry = "https://www.x.test/"
    doc = request_headers(entry, entry)
    assert (doc["sec-fetch-mode"], doc["sec-fetch-dest"], doc["sec-fetch-site"]) == (
        "navigate", "document", "none")  # fmt: skip
    css = request_headers("https://www.x.test/a.css", entry)
    assert (css["sec-fetch-dest"], css["sec-fetch-site"], css["referer"]) == (
        "style",
        "same-origin",
        entry,
    )
    img = request_headers("https://img.x.test/i.png?v=1", entry)
    assert (img["sec-fetch-dest"], img["sec-fetch-site"]) == ("image", "same-site")
    api = request_headers("https://api.other.test/data", entry)
    assert (api["sec-fetch-dest"], api["sec-fetch-mode"], api["sec-fetch-site"]) == (
        "empty",
        "cors",
        "cross-site",
    )
    assert api["origin"] == "https://www.x.test" and api["referer"] == entry


def test_a_campaign_condition_may_set_bg_think(tmp_path: Path) -> None:
    from dchlab.experiments.campaign import CampaignError, load_campaign

    text = """name: x
schemes: [all-hbc, dchannel]
conditions:
  - {name: a, hbc: embb, llc: urllc, devices: 4, bg_think: BG}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1]}
"""
    p = tmp_path / "c.yaml"
    p.write_text(text.replace("BG", "idle"))
    assert load_campaign(p, check_channels=False).conditions[0].bg_think == "idle"
    p.write_text(text.replace("BG", "'lognormal:5'"))
    with pytest.raises(CampaignError, match=r"conditions\[0\]\.bg_think: expected exp:MEAN_S"):
        load_campaign(p, check_channels=False)
    p.write_text(text.replace(", bg_think: BG", ""))
    assert load_campaign(p, check_channels=False).conditions[0].bg_think == think.DEFAULT


def test_a_campaign_condition_may_choose_the_background_client(tmp_path: Path) -> None:
    from dchlab.experiments.campaign import CampaignError, load_campaign

    text = """name: x
schemes: [all-hbc, dchannel]
conditions:
  - {name: a, hbc: embb, llc: urllc, devices: 4BG}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1]}
"""
    p = tmp_path / "c.yaml"
    p.write_text(text.replace("BG", ""))
    assert load_campaign(p, check_channels=False).conditions[0].bg_client == "rust"
    p.write_text(text.replace("BG", ", bg_client: python"))
    assert load_campaign(p, check_channels=False).conditions[0].bg_client == "python"
    p.write_text(text.replace("BG", ", bg_client: go"))
    with pytest.raises(CampaignError, match=r"conditions\[0\]\.bg_client: .*'go'.*rust, python"):
        load_campaign(p, check_channels=False)


def test_validation_compares_per_channel_and_direction() -> None:
    """Bytes summed over the pages; mean packet size = bytes / packets; 10 % tolerance."""
    from dchlab.workloads.bgusers import validate

    def row(hbc: tuple[int, int, int, int], llc: tuple[int, int, int, int]) -> dict[str, Any]:
        def side(c: tuple[int, int, int, int]) -> dict[str, int]:
            return dict(zip(("rx_bytes", "rx_packets", "tx_bytes", "tx_packets"), c, strict=True))

        return {"stats": {"interfaces": {"ue": {"hbc": side(hbc), "llc": side(llc)}}}}

    chromium = [
        row((1000, 10, 200, 4), (300, 3, 100, 2)),
        row((1000, 10, 200, 4), (300, 3, 100, 2)),
    ]
    replayed = [row((2100, 20, 200, 8), (600, 4, 150, 2))]
    got = {m["metric"]: (m["chromium"], m["replay"], round(m["diff"], 4), m["within"])
           for m in validate.compare(chromium, replayed)}  # fmt: skip
    assert got["hbc down bytes"] == (2000, 2100, 0.05, True)
    assert got["hbc down mean packet size"] == (100.0, 105.0, 0.05, True)
    assert got["hbc up mean packet size"] == (50.0, 25.0, -0.5, False)
    assert got["llc down mean packet size"] == (100.0, 150.0, 0.5, False)
    assert got["llc both bytes"] == (800, 750, -0.0625, True)


def test_idle_background_starts_no_user() -> None:
    from types import SimpleNamespace

    from dchlab.workloads.api import background_users

    tb = SimpleNamespace(cfg=SimpleNamespace(devices=4))  # no namespaces: nothing may start
    summary: dict[str, Any] = {}
    with background_users(tb, None, "idle", summary):
        pass
    assert summary == {"users": 0, "think": "idle"}
    one: dict[str, Any] = {}
    with background_users(SimpleNamespace(cfg=SimpleNamespace(devices=1)), None, "exp:30", one):
        pass
    assert one == {}


def test_the_rust_clients_schedule_is_the_python_users_draws(tmp_path: Path) -> None:
    """background.schedule_text: the first N (think, page) of replay.draws with the
    seed, the same sequence run_user follows: think, then a page (numpy's draws in
    that order; no think before the first page without first_think)."""
    from dchlab.workloads.bgusers import background

    class _Corpus:
        root = tmp_path

    users = background.Users(_Corpus(), ("p2", "p1", "p3"), "exp:30", seed=1, client="rust")
    doc = json.loads(background.schedule_text(users, 7, 4, first_think=False))
    rng = np.random.default_rng(7)
    want = []
    for i in range(4):
        wait = float(rng.exponential(30.0)) if i else 0.0
        want.append([wait, ["p1", "p2", "p3"][int(rng.integers(3))]])
    assert doc == {"schedule": want}
    with pytest.raises(ValueError, match=r"Users\.client: background client 'go'"):
        background.Users(_Corpus(), ("p1",), client="go")


def test_plans_carry_each_requests_chromium_headers_in_order(tmp_path: Path) -> None:
    """plans_text adds "headers": per page, per request, request_headers(url, entry) as
    [name, value] pairs in their order (what the Rust client sends)."""
    from dchlab.pages import open_corpus
    from dchlab.workloads.bgusers import background
    from dchlab.workloads.bgusers.headers import request_headers

    corpus = open_corpus("synthetic:1:2")
    page = corpus.pages[0].name
    doc = json.loads(background.plans_text(background.Users(corpus, (page,))))
    reqs = doc["pages"][page]
    assert len(doc["headers"][page]) == len(reqs) > 1
    entry = reqs[0]["url"]
    for r, hdrs in zip(reqs, doc["headers"][page], strict=True):
        assert hdrs == [list(kv) for kv in request_headers(r["url"], entry).items()]
    assert dict(doc["headers"][page][0])["sec-fetch-mode"] == "navigate"
