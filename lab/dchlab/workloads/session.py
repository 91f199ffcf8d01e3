"""Browsing sessions (HotMobile'21 Fig. 4): one browser in one testbed loads a landing
page and then further pages of the same site, one after the other, as a user clicking
through a site's menu would — the HTTP cache stays warm and open connections are kept
(`dch pageload` instead starts every load cold, in a fresh browser and testbed).

One row per page (ROW_KEYS plus SessionColumns, dchlab.workloads.rows). Per page, from the CDP events
of its load (dchlab.workloads.browser.navigate `observe`):

- `requests`: requests that went to the network (not answered from Chromium's cache);
  `requests_cached`: those the cache answered;
- `request_bytes`: bytes of the request headers and bodies the browser sent for them —
  the headers as sent (Network.requestWillBeSentExtraInfo: cookies included), counted as
  an HTTP/1.1 header block (request line or HTTP/2 pseudo-headers, `name: value` CRLF per
  header, a blank line) before any HPACK compression; `request_size_p99`: the 99th
  percentile of one request's size (HotMobile'21: 1.92 KB on landing pages, 2.9 KB over
  five pages — ASAP, which sends requests over the low-bandwidth channel, suffers as
  they grow);
- `connections_opened`: connections (Chromium's connectionId) the page's responses came
  over that no earlier page of the session used; `connections_used`: all it used.

Validity is pageload's: the driver's verdict per page, judged against the page's record of
missing URLs (dchlab.workloads.validity). A page the session never reached (the browser
died, an earlier page timed out) is invalid with the reason.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from dchlab.units import is_uint
from dchlab.workloads import browser as B
from dchlab.workloads.chromium_pipe import PipeChromium, launch_browser
from dchlab.workloads.measure import RunSpec, in_testbed, testbed_config
from dchlab.workloads.rows import Outcome, SessionColumns, make_row
from dchlab.workloads.validity import page_outcome


def request_size(method: str, url: str, headers: dict[str, Any], body: int = 0) -> int:
    """Bytes of one request as an HTTP/1.1 header block plus its body (module doc)."""
    size = 2 + body  # the blank line ending the headers
    if not any(k.startswith(":") for k in headers):  # HTTP/1: a request line
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        size += len(f"{method} {target} HTTP/1.1\r\n".encode())
    for k, v in headers.items():
        size += len(f"{k}: {v}\r\n".encode())
    return size


def p99(values: list[int]) -> int | None:
    """Nearest-rank 99th percentile (None for no values)."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


@dataclass
class PageTally:
    """What one page of a session sent and which connections it used, from CDP events."""

    earlier: set[int]  # connection ids of the session's earlier pages
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # requestId -> hops
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # headers as sent
    cached: set[str] = field(default_factory=set)
    conn_of: dict[str, int] = field(default_factory=dict)  # requestId -> connectionId

    @property
    def connections(self) -> set[int]:
        """Connections the page's network requests used (the cache's answers carry the
        connection that once fetched them: not this page's, whatever the event order)."""
        return {c for rid, c in self.conn_of.items() if rid not in self.cached}

    def on_event(self, method: str, p: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            req = p["request"]
            # As browser.navigate: data: URLs and Chromium's own requests (favicon,
            # manifest) are not the page's.
            if req["url"].startswith("data:") or _browser_initiated(p):
                return
            body = len((req.get("postData") or "").encode())
            hop = {"method": req["method"], "url": req["url"], "headers": req["headers"]}
            self.sent.setdefault(p["requestId"], []).append({**hop, "body": body})
        elif method == "Network.requestWillBeSentExtraInfo":
            self.extra.setdefault(p["requestId"], []).append(p.get("headers") or {})
        elif method == "Network.requestServedFromCache":
            self.cached.add(p["requestId"])
        elif method == "Network.responseReceived":
            r = p.get("response") or {}
            if r.get("fromDiskCache") or r.get("fromPrefetchCache"):
                self.cached.add(p["requestId"])
            elif p["requestId"] in self.sent and r.get("connectionId"):
                self.conn_of[p["requestId"]] = int(r["connectionId"])

    def summary(self) -> dict[str, Any]:
        sizes = []
        for rid, hops in self.sent.items():
            if rid in self.cached:
                continue
            extra = self.extra.get(rid, [])
            for i, hop in enumerate(hops):  # a redirect is a request of its own
                headers = extra[i] if i < len(extra) else hop["headers"]
                sizes.append(request_size(hop["method"], hop["url"], headers, hop["body"]))
        return {
            "requests": len(sizes),
            "requests_cached": len([r for r in self.sent if r in self.cached]),
            "request_bytes": sum(sizes),
            "request_size_p99": p99(sizes),
            "connections_opened": len(self.connections - self.earlier),
            "connections_used": len(self.connections),
        }


def _browser_initiated(p: dict[str, Any]) -> bool:
    if p.get("type") == "Manifest":
        return True
    return p.get("type") == "Other" and (p.get("initiator") or {}).get("type") == "other"


class SessionChromium(PipeChromium):
    """A PipeChromium that loads `urls` one after the other in its one page, with the
    HTTP cache enabled; `pages` holds (LoadResult, PageTally) per page reached."""

    def __init__(self, *args: Any, urls: list[str], timeout_s: float, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.urls, self.page_timeout = urls, timeout_s
        self.pages: list[tuple[B.LoadResult, PageTally]] = []

    async def drive(self, cdp: B.CDP, sid: str) -> None:
        # B.attach disables the cache (every pageload is cold); a session keeps it.
        await cdp.send("Network.setCacheDisabled", {"cacheDisabled": False}, sid)
        seen: set[int] = set()
        for i, url in enumerate(self.urls):
            while not cdp.events.empty():  # the previous page's late events: not this page's
                cdp.events.get_nowait()
            res, tally = B.LoadResult(url), PageTally(set(seen))
            self.pages.append((res, tally))
            last = i == len(self.urls) - 1
            try:
                await asyncio.wait_for(
                    B.navigate(
                        cdp,
                        sid,
                        url,
                        res,
                        self.page_timeout,
                        None,
                        tally.on_event,
                        last,
                        speed_index=self.speed_index,
                    ),
                    self.page_timeout + 15,
                )
            except TimeoutError:
                res.invalid_reason = res.invalid_reason or (
                    f"timeout after {self.page_timeout:.0f} s"
                )
                B.finish(res)
                return  # the browser's state is unknown: the session ends here
            B.finish(res)
            seen |= tally.connections


def session_rows(
    spec: RunSpec,
    corpus: Any,
    urls: list[str],
    names: list[str],
    timeout_s: float = 60,
) -> list[dict[str, Any]]:
    """One browsing session over `urls` (entry URLs of `corpus`, served by its replay) in
    one fresh testbed; `names`: the page name of each URL for the rows. The testbed seed
    pairs on the landing page (every scheme sees the same trace offset)."""
    from dchlab.testbed import Testbed

    if not urls or len(urls) != len(names):
        raise ValueError("a session needs one name per URL and at least one URL")
    session_id = uuid.uuid4().hex[:12]
    entries = {p.entry_url: p for p in corpus.pages}
    tb = Testbed(testbed_config(spec, names[0], corpus.root))
    holder: list[SessionChromium] = []
    timing: dict[str, float] = {}
    ended: list[str] = []  # why the session ended early, if it did

    def launch(tb: Any) -> None:
        holder.append(launch_browser(tb, timing, SessionChromium, urls=urls, timeout_s=timeout_s))

    def body(tb: Any) -> None:
        if not holder:
            launch(tb)
        t0 = time.monotonic()
        holder[0].speed_index = spec.speed_index
        # The whole session's budget: load() kills the browser once it returns.
        res = holder[0].load(urls[0], timeout_s * len(urls))
        timing["driver"] = round((time.monotonic() - t0) * 1000, 1)
        ended.append(res.invalid_reason if not holder[0].pages else "")
        if holder[0].pages and len(holder[0].pages) < len(urls):
            ended[-1] = holder[0].pages[-1][0].invalid_reason

    tb.on_ue(launch)
    try:
        frame = in_testbed(tb, body)
    finally:
        for b in holder:
            b.close()
    reached = holder[0].pages if holder else []
    hosts = corpus.all_hosts()
    rows = []
    for i, (url, name) in enumerate(zip(urls, names, strict=True)):
        entry = entries.get(url)
        expected = entry.missing if entry else 0
        columns = SessionColumns(session_id=session_id, page_index=i)
        if i < len(reached):
            res, tally = reached[i]
            result = asdict(res)
            missing = entry.missing_urls if entry else []
            outcome = page_outcome(result, missing, hosts, expected, spec.protocol)
            outcome = replace(outcome, stats={"browser": result})
            own = asdict(replace(columns, **tally.summary()))
        else:
            why = (ended and ended[0]) or frame.testbed_failure or "not reached"
            why = f"session ended before this page: {why}"
            outcome = Outcome(missing_expected=expected, valid=False, invalid_reason=why)
            # a page never reached counted no requests: its row has no such columns
            own = {"session_id": session_id, "page_index": i}
        if frame.testbed_failure:  # the testbed failed under the session
            outcome = replace(outcome, valid=False, invalid_reason=frame.testbed_failure)
        # the CPU shares cover the whole session (one testbed), not this page alone
        outcome = replace(
            outcome,
            trace_offset_ms=frame.trace_offset_ms,
            host_cpu_busy=frame.host_cpu_busy,
            host_cpu_steal=frame.host_cpu_steal,
        )
        rows.append(make_row(spec, "session", name, {**asdict(outcome), **own}))
    # The testbed's counters cover the whole session: kept once, on the landing page's row.
    rows[0]["stats"]["testbed"] = frame.stats
    rows[0]["stats"]["timing"] = timing
    return rows


def landing_pages(corpus: Any) -> list[str]:
    """Pages no other page's document links to (a synthetic corpus' sites, without their
    internal pages), in corpus order."""
    linked: set[str] = set()
    for p in corpus.pages:
        linked |= set(_links(corpus, p.entry_url)) - {p.entry_url}
    return [p.name for p in corpus.pages if p.entry_url not in linked]


def session_urls(corpus: Any, landing: str, pages: str | int) -> tuple[list[str], list[str]]:
    """(urls, names) of one session: `pages` further pages from the landing page's
    links (an int or digits), or a comma-separated list of URLs loaded after it (each a
    URL the corpus serves; rows name it by its page when it is a page's entry URL)."""
    if isinstance(pages, int) or is_uint(pages.strip()):
        return corpus_session(corpus, landing, int(pages))
    entry = corpus.page(landing)
    by_url = {p.entry_url: p.name for p in corpus.pages}
    urls = [entry.entry_url, *(u.strip() for u in pages.split(",") if u.strip())]
    for u in urls:
        if not urlsplit(u).hostname:
            from dchlab.pages import CorpusError

            raise CorpusError(f"session page {u!r}: expected an absolute URL (https://host/...)")
    return urls, [by_url.get(u, u) for u in urls]


def _links(corpus: Any, url: str) -> list[str]:
    """Absolute <a href> targets of the corpus' document at `url`, in document order."""
    from html.parser import HTMLParser
    from urllib.parse import urljoin

    doc = next((o for o in corpus.objects if o.url == url), None)
    hrefs: list[str] = []

    class Links(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            href = dict(attrs).get("href") if tag == "a" else None
            if href:
                hrefs.append(urljoin(url, href))

    if doc is not None and "html" in dict(doc.headers).get("content-type", "html"):
        Links().feed(corpus.read_body(doc).decode(errors="replace"))
    return list(dict.fromkeys(hrefs))


def corpus_session(corpus: Any, landing: str, pages: int) -> tuple[list[str], list[str]]:
    """(urls, names) of a session from a corpus: `landing` then the first `pages` corpus
    pages its HTML links to (<a href>), in the order of the links — a site's menu."""
    entry = corpus.page(landing)
    by_url = {p.entry_url: p.name for p in corpus.pages}
    hrefs = _links(corpus, entry.entry_url)
    linked = [u for u in dict.fromkeys(hrefs) if u in by_url and u != entry.entry_url]
    if len(linked) < pages:
        from dchlab.pages import CorpusError

        raise CorpusError(
            f"page {landing!r} of {corpus.root} links {len(linked)} other corpus pages, "
            f"a session of {pages} further pages needs {pages} (the synthetic corpus has them "
            "with internal pages: dch session --corpus synthetic)"
        )
    urls = [entry.entry_url, *linked[:pages]]
    return urls, [by_url[u] for u in urls]


def open_session_corpus(spec: str, internal_pages: int) -> Any:
    """A corpus for sessions: `synthetic[:SEED[:SITES]]` is generated with
    `internal_pages` internal pages per site (generator.plan_internal); anything else is
    opened as dch pageload opens it."""
    from dchlab.pages import open_corpus, parse_synthetic

    synthetic = parse_synthetic(spec, unit="SITES")
    if synthetic is None:
        return open_corpus(spec)
    from dchlab.pages.generator import cached

    return cached(*synthetic, max(0, internal_pages))


# --- campaigns (dchlab.experiments.runner: workload kind `session`) ----------------------


def session_sites(corpus_spec: str, sites: int | tuple[str, ...] | None, further: int) -> list[str]:
    """Landing pages of a session campaign: the names given, or the first `sites` (all
    when None) landing pages of the session corpus."""
    corpus = open_session_corpus(corpus_spec, further)
    if isinstance(sites, tuple):
        return [corpus.page(n).name for n in sites]
    names = landing_pages(corpus)
    return names[:sites] if sites else names


def page_item(site: str, index: int) -> str:
    """A campaign cell's item: page `index` (0 = the landing page) of `site`'s session."""
    return f"{site}#{index}"


def item_index(item: str) -> int:
    """The page index of a page_item."""
    return int(item.rpartition("#")[2])


def campaign_session(
    spec: RunSpec, corpus_spec: str, site: str, further: int, items: list[str], timeout_s: float
) -> list[dict[str, Any]]:
    """One session of `site` (landing page + `further` pages); the rows of `items`
    (page_item keys; a resumed campaign may need only some pages of it), in their order."""
    corpus = open_session_corpus(corpus_spec, further)
    urls, names = session_urls(corpus, site, further)
    rows = session_rows(spec, corpus, urls, names, timeout_s)
    return [rows[item_index(it)] for it in items]
