"""Import WARC captures (one page per file) into a corpus, with warcio.

Every `response` record becomes an object: status and headers as recorded, body decoded
(chunked transfer coding and content-encoding removed — the server recomputes them).
All URLs become https:// (object URLs, references in HTML/CSS, absolute URLs of the
capture's hosts in any text body, `location` headers), so the page loads without mixed
content. The entry URL is the first HTML response of the file. Subresources that HTML
or CSS references but the capture lacks are counted per page as `missing`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

from dchlab.pages.corpus import Corpus, CorpusError, CorpusWriter, url_key
from dchlab.pages.rewrite import SKIP_SCHEMES, normalize, rewrite_css, rewrite_html
from dchlab.pages.servable import header_problem, host_name_problem

log = logging.getLogger(__name__)

# One captured response: URL, status, headers, body (decoded).
Record = tuple[str, int, list[tuple[str, str]], bytes]


def _https(url: str) -> str:
    return "https://" + url[7:] if url.lower().startswith("http://") else url


def _brotli_body(rec: Any, path: Path, url: str) -> bytes:
    """Undo chunking, then brotli (warcio's own br path breaks with current brotli)."""
    try:
        import brotli
    except ImportError as e:
        raise CorpusError(
            f"{path}: {url}: body is brotli-encoded and the brotli module is missing "
            "(pip install -r lab/requirements.txt)"
        ) from e
    from warcio.bufferedreaders import ChunkedDataReader

    chunked = "chunked" in (rec.http_headers.get_header("transfer-encoding") or "").lower()
    raw = ChunkedDataReader(rec.raw_stream).read() if chunked else rec.raw_stream.read()
    try:
        return bytes(brotli.decompress(raw))
    except brotli.error as e:
        raise CorpusError(f"{path}: {url}: invalid brotli body: {e}") from e


def _read_records(path: Path) -> list[Record]:
    from warcio.archiveiterator import ArchiveIterator

    out = []
    try:
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type != "response" or rec.http_headers is None:
                    continue
                url = rec.rec_headers.get_header("WARC-Target-URI")
                if not url:
                    continue
                status = int(rec.http_headers.get_statuscode() or 0)
                headers = list(rec.http_headers.headers)
                encoding = (rec.http_headers.get_header("content-encoding") or "").lower()
                if encoding == "br":
                    body = _brotli_body(rec, path, url)
                else:
                    body = rec.content_stream().read()
                out.append((url, status, headers, body))
    except Exception as e:  # warcio raises a variety of parse errors
        raise CorpusError(f"{path}: not a readable WARC file: {e}") from e
    if not out:
        raise CorpusError(f"{path}: no HTTP response records")
    return out


def _ctype(headers: list[tuple[str, str]]) -> str:
    for k, v in headers:
        if k.lower() == "content-type":
            return v.lower()
    return ""


def add_captured_page(
    w: CorpusWriter,
    page: str,
    records: list[Record],
    source: str,
    think_ms: list[float] | None = None,
    known_missing: set[str] | None = None,
) -> int:
    """Add one captured page (records in capture order: url, status, headers, decoded
    body) to `w`: https everywhere, references rewritten, per-visit headers dropped.
    Returns the number of missing subresources; the entry is the first HTML 200.

    Records webreplay cannot serve are skipped with a warning naming them (and count as
    missing where referenced): hosts its hosts parser refuses (IP literals, `_`-less
    junk, non-ASCII), a URL recorded twice (the first is kept); header fields it would
    refuse (non-ASCII values, bad names) are dropped from the record."""
    kept: list[Record] = []
    seen_keys: set[str] = set()
    for rec in records:
        host = (urlsplit(rec[0]).hostname or "").lower()
        why = host_name_problem(host) if host else "URL has no host"
        key = url_key(normalize(_https(rec[0])))
        if why is None and key in seen_keys:
            why = "URL recorded twice (the first response is kept)"
        if why is not None:
            log.warning("%s: skipped %s: %s", source, rec[0][:200], why)
            continue
        seen_keys.add(key)
        kept.append(rec)
    if think_ms is not None:
        keep_ids = {id(r) for r in kept}
        think_ms = [t for r, t in zip(records, think_ms, strict=True) if id(r) in keep_ids]
    records = kept
    hosts = {(urlsplit(u).hostname or "").lower() for u, *_ in records}
    have = {url_key(normalize(_https(u))) for u, *_ in records}
    # Captured without a body (e.g. HAR saved without content): missing, however referenced.
    lost = {normalize(_https(u)) for u in known_missing or ()}
    entry = None
    for i, (raw_url, status, headers, body) in enumerate(records):
        url = normalize(_https(raw_url))
        ctype = _ctype(headers)

        def resolve(ref: str, fetched: bool, base: str = url) -> str | None:
            if not ref or ref.lower().startswith(SKIP_SCHEMES):
                return None
            absolute = urljoin(base, ref)
            if not absolute.lower().startswith(("http://", "https://")):
                return None
            absolute = normalize(_https(absolute.split("#", 1)[0]))
            if fetched and url_key(absolute) not in have:
                lost.add(absolute)  # a set: a URL counts once however often it is used
            return absolute

        if "html" in ctype or "css" in ctype or "javascript" in ctype:
            text = body.decode("latin-1")
            if "html" in ctype:
                text = rewrite_html(text, resolve)
            elif "css" in ctype:
                text = rewrite_css(text, resolve)
            for h in hosts:
                text = text.replace(f"http://{h}", f"https://{h}")
                text = text.replace(f"http:\\/\\/{h}", f"https:\\/\\/{h}")
            body = text.encode("latin-1")
        headers = [
            (k, _https(v) if k.lower() == "location" else v)
            for k, v in headers
            # Replayed pages are loaded cold and over our own TLS: drop cookies', HSTS's
            # and alternative services' cross-visit state.
            if k.lower() not in ("set-cookie", "strict-transport-security", "alt-svc")
        ]
        bad = [(k, v) for k, v in headers if header_problem(k, v)]
        for k, v in bad:
            log.warning("%s: %s: dropped header: %s", source, url[:200], header_problem(k, v))
        headers = [h for h in headers if h not in bad]
        if entry is None and status == 200 and "html" in ctype:
            entry = url
        think = think_ms[i] if think_ms else 0.0
        w.add_object(url, page, body, headers, status or 200, think)
    if entry is None:
        raise CorpusError(f"{source}: no HTML response to use as the entry page")
    w.add_page(page, entry, lost)
    return len(lost)


class CapturedPage(NamedTuple):
    """One page of a capture file, as add_captured_page takes it."""

    name: str
    records: list[Record]
    think_ms: list[float] | None = None
    known_missing: set[str] | None = None


def import_captures(
    kind: str,
    files: list[Path],
    dest: Path,
    name: str | None,
    pages: Callable[[Path], Iterable[CapturedPage]],
) -> tuple[Corpus, dict[str, int]]:
    """Import capture `files` of `kind` (har, warc) into `dest` (replaced): every page
    `pages(file)` reads from a file, in file order. Returns missing per page."""
    files = [Path(f) for f in files]
    w = CorpusWriter.for_captures(kind, files, dest, name)
    missing: dict[str, int] = {}
    for path in files:
        for page in pages(path):
            missing[page.name] = add_captured_page(
                w, page.name, page.records, str(path), page.think_ms, page.known_missing
            )
    return w.finish(), missing


def _warc_pages(path: Path) -> list[CapturedPage]:
    return [CapturedPage(path.name.split(".")[0].lower(), _read_records(path))]


def import_warc(
    files: list[Path], dest: Path, name: str | None = None
) -> tuple[Corpus, dict[str, int]]:
    """Import WARC files (a page each) into `dest` (replaced). Returns missing per page."""
    return import_captures("warc", files, dest, name, _warc_pages)
