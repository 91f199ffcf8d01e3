"""Import HAR captures (browser DevTools "Save all as HAR with content") into a corpus.

Each HAR page becomes a corpus page; its entries (GET responses with content) become
objects exactly like WARC records (dchlab.pages.warc.add_captured_page: https
everywhere, references rewritten, per-visit headers dropped). Entries without content
(HAR saved without bodies) are skipped and counted as missing, so the browser meets
them as failures rather than silently smaller pages. Server think time is taken from
`timings.wait` minus the page's smallest `wait` (an estimate of one network round trip).
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dchlab.pages.corpus import Corpus, CorpusError
from dchlab.pages.warc import CapturedPage, Record, import_captures

log = logging.getLogger(__name__)

_DROP = {"content-length", "content-encoding", "transfer-encoding"}


def _entries_by_page(har: dict[str, Any], path: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        log = har["log"]
        entries = log["entries"]
    except (KeyError, TypeError) as exc:
        raise CorpusError(f"{path}: not a HAR file (expected log.entries)") from exc
    pages = [p.get("id") for p in log.get("pages") or []] or [None]
    out: dict[str, list[dict[str, Any]]] = {str(p): [] for p in pages}
    for i, entry in enumerate(entries):
        ref = str(entry.get("pageref", pages[0]))
        if ref not in out:
            raise CorpusError(f"{path}: log.entries[{i}].pageref {ref!r} names no page")
        out[ref].append(entry)
    return out


def _record(e: dict[str, Any], path: Path, i: int) -> Record | None:
    try:
        url = e["request"]["url"]
        status = int(e["response"]["status"])
        headers = [(h["name"], h["value"]) for h in e["response"].get("headers", [])]
        content = e["response"].get("content") or {}
    except (KeyError, TypeError, ValueError) as exc:
        raise CorpusError(
            f"{path}: log.entries[{i}]: expected request.url and response.status"
        ) from exc
    if e["request"].get("method", "GET") != "GET" or not url.startswith(("http://", "https://")):
        return None
    text = content.get("text")
    if text is None:
        return None if status in (204, 301, 302, 303, 304, 307, 308) else (url, -1, [], b"")
    body = base64.b64decode(text) if content.get("encoding") == "base64" else text.encode("utf-8")
    if not any(k.lower() == "content-type" for k, _ in headers) and content.get("mimeType"):
        headers.append(("content-type", content["mimeType"]))
    headers = [(k, v) for k, v in headers if not k.startswith(":") and k.lower() not in _DROP]
    return (url, 200 if status == 304 else status, headers, body)


def import_har(
    files: list[Path], dest: Path, name: str | None = None
) -> tuple[Corpus, dict[str, int]]:
    """Import HAR files into `dest` (replaced). Returns missing per page."""
    return import_captures("har", files, dest, name, _har_pages)


def _har_pages(path: Path) -> Iterator[CapturedPage]:
    """The pages of one HAR file: one per page it records (entries by pageref)."""
    try:
        har = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path}: cannot read HAR JSON: {exc}") from exc
    groups = _entries_by_page(har, path)
    for ref, entries in groups.items():
        page = (
            re.sub(r"[^a-z0-9._-]+", "-", f"{path.stem}-{ref}".lower())
            if len(groups) > 1
            else path.stem.lower()
        )
        records: list[Record] = []
        waits: list[float] = []
        lost: set[str] = set()
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            rec = _record(entry, path, i)
            if rec is None:
                continue
            if rec[1] == -1:
                lost.add(rec[0])
                continue
            if rec[0] in seen:
                # A redirect chain or a retry recorded the URL twice: the replay can
                # answer it one way; the first response is kept.
                log.warning(
                    "%s: log.entries[%d]: skipped %s: URL recorded twice", path, i, rec[0][:200]
                )
                continue
            seen.add(rec[0])
            records.append(rec)
            waits.append(float((entry.get("timings") or {}).get("wait") or 0.0))
        base = min((x for x in waits if x > 0), default=0.0)
        think = [max(0.0, x - base) for x in waits]
        yield CapturedPage(page, records, think, lost)
