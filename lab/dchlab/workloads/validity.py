"""Is a page load valid? Judged against the corpus' record of what the page cannot get.

Saved pages always miss a few subresources, the same ones on every load; the corpus
lists them per page (`Page.missing_urls`: the importer's static analysis, replaced by
what `dch corpus probe` saw Chromium fail). A load is valid when the document loaded
(the driver's `document_error` is empty) and every failed request is in that set or
is a gap of the recording (below). Any other failed request — an object the replay
holds but did not deliver (a reset connection, a timeout, a truncated body) — makes it
invalid: it is not the page as recorded.

Gaps of the recording: a 404 (`HTTP 404` in the driver's `failed`), the replay's
answer for a URL the corpus lacks, and a name that does not resolve
(`net::ERR_NAME_NOT_RESOLVED`) on a host outside the corpus (the testbed's DNS and the
local replay's resolver rules know only the corpus' hosts: `corpus_hosts`). Both are
answered at once and the same under every scheme, so neither invalidates a load; a
corpus host that does not resolve does (its DNS crossed the channels), and a scheme
cannot turn a delivered object into a 404 (objproxy answers its own failures 502).
Pages make some requests on some loads only (an ad slot, a beacon with a random path),
which the probe may not have seen (issue 36: "3 unexpected failed resources" on one
trial of every scheme): those outside the record are counted, `missing_unrecorded`.

URLs are compared the way webreplay matches them: http and https alike (it serves both
from the same objects; other schemes, like a saver's `httpdisabled://`, stay distinct),
host case-insensitive, fragment dropped, percent-escapes decoded — and, as webreplay
falls back to host + path when host + path + query finds nothing, a recorded URL also
excuses the same host + path with another query. That is what makes the record hold on
every load: analytics beacons carry a random cache-buster (`__utm.gif?utmn=<random>`),
a new URL each time, and the replay could answer none of them.

A request the page cancels itself (`net::ERR_ABORTED`: a script swapped an image's
`src`, aborted a fetch) is not a request the replay failed: it is counted in
`resources_failed` but excuses itself. Whether it is still in flight when the page
cancels it depends on the channel's speed (measured: homeway.com.cn swaps four hexun.com
images for `httpdisabled://` ones; over dchannel the https loads were still running and
were aborted, over all-hbc they had finished), so counting it would make validity
depend on the scheme under test. Likewise a request Chromium refuses before it leaves
the browser (`net::ERR_UNKNOWN_URL_SCHEME`: a saver's `httpdisabled://` links) never
reaches the replay or the channels; scripts build such URLs with random paths
(telegraph.co.uk: `httpdisabled://pix04.revsci.net/.../<random>.js`), so no record could
list them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from dchlab import protocol as P
from dchlab.workloads.handshakes import handshake_summary
from dchlab.workloads.rows import Outcome

CANCELLED = "net::ERR_ABORTED"  # Chromium: the request was cancelled (by the page)
NOT_SENT = "net::ERR_UNKNOWN_URL_SCHEME"  # refused in the browser: nothing went out
EXCUSED = frozenset({CANCELLED, NOT_SENT})
MISSING = "HTTP 404"  # the replay's answer for a URL the corpus does not hold
NAME_NOT_RESOLVED = "net::ERR_NAME_NOT_RESOLVED"  # a host the testbed's DNS does not know


@dataclass
class Verdict:
    valid: bool
    invalid_reason: str
    failed: int  # failed requests (every one, expected or not)
    # failed URLs outside the record that invalidate the load (not excused, not a 404)
    unexpected: list[str] = field(default_factory=list)
    # gaps of the recording the record does not list: URLs answered 404, names outside
    # the corpus that did not resolve (valid)
    unrecorded: list[str] = field(default_factory=list)


# Row column <- browser result key (`total_ms` is the PLT, `size_bytes` what arrived).
_ROW_FROM_RESULT = (
    *((k, k) for k in ("plt_ms", "fcp_ms", "lcp_ms", "speed_index_ms", "atf_ms")),
    *((k, k) for k in ("resources_loaded", "dns_ms", "connect_ms", "tls_ms", "ttfb_ms")),
    ("total_ms", "plt_ms"),
    ("size_bytes", "bytes_received"),
)


def one_line(text: str, limit: int = 300) -> str:
    """`text`'s first non-empty line, at most `limit` characters, marking what was cut:
    an invalid_reason is one line (an error's first line names it; what follows, such
    as a browser's log tail, is detail for the log file, not a reason)."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0]
    more = len(lines) - 1
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    return f"{first} (+{more} more lines)" if more else first


def url_match_key(url: str, with_query: bool = True) -> str:
    """What makes two URLs the same request for the replay (see module doc)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    if not parts.netloc:  # data-less odd forms (`foo:bar`): compare verbatim
        return url.strip().split("#", 1)[0]
    scheme = "http" if parts.scheme.lower() in ("http", "https") else parts.scheme.lower()
    key = f"{scheme}://{(parts.hostname or '').lower()}{unquote(parts.path or '/')}"
    return f"{key}?{unquote(parts.query)}" if parts.query and with_query else key


def judge(
    result: dict[str, Any],
    expected_missing: Iterable[str] | None,
    corpus_hosts: Iterable[str] | None = None,
    protocol: str = P.DEFAULT,
) -> Verdict:
    """Verdict for one driver result (dchlab.workloads.browser.LoadResult as a dict).

    `expected_missing`: the page's record; None when the corpus only has a count (a
    manifest from before the record existed), in which case every failure but a gap of
    the recording is unexpected. `corpus_hosts`: the corpus' hosts (Corpus.all_hosts);
    None: a name that did not resolve is never taken for a gap. `protocol`: what the
    load asked for (dchlab.protocol); under h3 a request that failed in Chromium's QUIC
    stack, or any response over TCP, makes the load invalid, each with its own reason.
    """
    failed = [str(f[0]) for f in result.get("failed") or []]
    errors = [str(f[1]) if len(f) > 1 else "" for f in result.get("failed") or []]
    n_failed = int(result.get("resources_failed") or len(failed))
    doc_error = result.get("document_error")
    if doc_error is None:  # a result without the field (driver crashed before it was set)
        doc_error = "" if result.get("valid") else (result.get("invalid_reason") or "failed")
    if not failed and n_failed:
        # Failures counted but not itemised (an older driver): nothing can be excused.
        failed = [f"<{n_failed} unnamed failed requests>"] * n_failed
        errors = [""] * n_failed
    record = {url_match_key(u) for u in expected_missing or ()}
    record |= {url_match_key(u, with_query=False) for u in expected_missing or ()}
    hosts = None if corpus_hosts is None else {h.lower() for h in corpus_hosts}
    unexpected: list[str] = []
    unrecorded: list[str] = []
    for u, err in zip(failed, errors, strict=True):
        if err in EXCUSED or url_match_key(u) in record:
            continue
        if url_match_key(u, with_query=False) in record:
            continue
        (unrecorded if _recording_gap(u, err, hosts) else unexpected).append(u)
    unexpected.sort()
    unrecorded.sort()
    if doc_error:
        return Verdict(False, one_line(str(doc_error)), n_failed, unexpected, unrecorded)
    quic = sorted(f"{u} {e}" for u, e in zip(failed, errors, strict=True) if P.is_quic_error(e))
    if protocol == "h3" and quic:
        why = f"{len(quic)} requests failed over QUIC (first: {quic[0]})"
        return Verdict(False, why, n_failed, unexpected, unrecorded)
    if unexpected:
        why = f"{len(unexpected)} unexpected failed resources (first: {unexpected[0]})"
        if expected_missing is None:
            why += "; the corpus records no missing URLs (re-run `dch corpus probe`)"
        return Verdict(False, why, n_failed, unexpected, unrecorded)
    counts = P.protocol_counts(result.get("protocols") or {})
    if fallback := P.fallback_reason(protocol, counts):
        return Verdict(False, fallback, n_failed, [], unrecorded)
    return Verdict(True, "", n_failed, [], unrecorded)


def _recording_gap(url: str, error: str, corpus_hosts: set[str] | None) -> bool:
    """Is this failure the corpus lacking the request (the same under every scheme)?"""
    if error == MISSING:
        return True
    if error != NAME_NOT_RESOLVED or corpus_hosts is None:
        return False
    try:
        host = (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        return False
    return bool(host) and host not in corpus_hosts


def page_outcome(
    res: dict[str, Any],
    missing_urls: Any,
    corpus_hosts: Iterable[str] | None = None,
    missing_expected: int | None = None,
    protocol: str = P.DEFAULT,
) -> Outcome:
    """One page load's outcome: its browser result (`browser.LoadResult` as a dict)
    judged against the page's record (`missing_urls`, `judge`; `corpus_hosts` and
    `protocol` as there; `missing_expected`: the record's count), with the responses
    counted by protocol. The one mapping `dch pageload` and `dch session` rows share;
    the testbed frame's columns are the caller's."""
    verdict = judge(res, missing_urls, corpus_hosts, protocol)
    measured: dict[str, Any] = {col: res.get(key) for col, key in _ROW_FROM_RESULT}
    counts = P.protocol_counts(res.get("protocols") or {})
    return Outcome(
        **measured,
        valid=verdict.valid,
        invalid_reason=verdict.invalid_reason,
        resources_failed=verdict.failed,
        resources_failed_unexpected=len(verdict.unexpected),
        missing_expected=missing_expected,
        missing_unrecorded=len(verdict.unrecorded),
        responses_h3=counts["h3"],
        responses_h2=counts["h2"],
        responses_other=counts["other"],
        **handshake_summary(res.get("connections")),
    )
