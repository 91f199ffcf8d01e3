"""A page's requests in dependency order, from the corpus alone.

Rule: object B depends on object A (A is B's parent) when A's body references B the
way a browser would fetch it while loading the page: an HTML subresource reference
(`<script src>`, stylesheets, images, frames; dchlab.pages.rewrite decides what is
fetched), a CSS `url()` / `@import`, or — for scripts, JSON and an HTML document's
inline `<script>` blocks, whose fetches only run-time evaluation reveals — the object's
absolute URL appearing in that code (not elsewhere in HTML: an `<a href>` is a link, not
a fetch). The parent is the first object in breadth-first order from the entry document
that references B (a browser requests a URL once: on its first discovery). Objects of
the page that nothing references are children of the entry document (requested once it
has arrived). Requests are returned breadth-first, so a parent always precedes its
children; siblings keep the order in which their parent's body references them (the
parser's discovery order).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from dchlab.pages.corpus import Corpus, Object, url_key
from dchlab.pages.rewrite import SKIP_SCHEMES, rewrite_css, rewrite_html

_INLINE_SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script\s*>", re.I | re.S)


@dataclass(frozen=True)
class Request:
    """One request of a page load: its URL, its parent's index in the page's request
    list (-1: the entry document), the response size and the body's sha256 (the corpus
    stores bodies content-addressed), to check a replayed response byte for byte."""

    url: str
    parent: int
    size: int
    sha256: str


def _kind(obj: Object) -> str:
    ctype = next((v for k, v in obj.headers if k == "content-type"), "").lower()
    path = urlsplit(obj.url).path.lower()
    if "html" in ctype or path.endswith((".html", ".htm")) or path.endswith("/"):
        return "html"
    if "css" in ctype or path.endswith(".css"):
        return "css"
    return "other"


def references(obj: Object, body: bytes, known: dict[str, Object]) -> list[str]:
    """The url_keys of the page's objects (`known`: url_key → object) that `body` (of
    `obj`) references, in order of first appearance, each once."""
    text = body.decode("latin-1")
    found: list[tuple[int, str]] = []

    def resolve(ref: str, fetched: bool) -> str | None:
        if fetched and ref and not ref.lower().startswith(SKIP_SCHEMES):
            key = url_key(urljoin(obj.url, ref))
            if key in known:
                found.append((len(found), key))
        return None

    kind = _kind(obj)
    code = text  # where absolute URLs are run-time fetches
    if kind == "html":
        rewrite_html(text, resolve)
        code = "\n".join(m.group(1) for m in _INLINE_SCRIPT.finditer(text))
    elif kind == "css":
        rewrite_css(text, resolve)
        code = ""
    ordered = [k for _, k in found]
    # absolute URLs in code, placed by where they first appear
    literal = sorted((pos, k) for k, o in known.items() if (pos := code.find(o.url)) >= 0)
    ordered += [k for _, k in literal]
    out: list[str] = []
    for k in ordered:
        if k not in out and k != url_key(obj.url):
            out.append(k)
    return out


def page_requests(corpus: Corpus, page: str) -> list[Request]:
    """Every request of `page` (its corpus objects) in dependency order (module rule)."""
    entry = corpus.page(page)
    objects = {url_key(o.url): o for o in corpus.objects_of(page)}
    root = url_key(entry.entry_url)
    if root not in objects:
        raise ValueError(f"{corpus.root}: page {page!r}: entry {entry.entry_url} not in the corpus")
    order: list[str] = []
    parent: dict[str, int] = {root: -1}
    queue = deque([root])
    while queue:
        key = queue.popleft()
        order.append(key)
        obj = objects[key]
        for ref in references(obj, corpus.read_body(obj), objects):
            if ref not in parent:
                parent[ref] = len(order) - 1
                queue.append(ref)
    order += [k for k in objects if k not in parent]
    out = []
    for key in order:
        o = objects[key]
        out.append(Request(o.url, parent.get(key, 0), o.size, o.body.rsplit("/", 1)[-1]))
    return out


def plans(corpus: Corpus, pages: list[str]) -> dict[str, Any]:
    """What a replayer needs, as JSON: {"pages": {page: [Request fields]}, "h1_hosts":
    the origins that offer no HTTP/2}."""
    return {
        "pages": {p: [asdict(r) for r in page_requests(corpus, p)] for p in pages},
        "h1_hosts": sorted(o.host for o in corpus.origins if "h2" not in o.alpn),
    }


def from_json(doc: dict[str, Any]) -> tuple[dict[str, list[Request]], set[str]]:
    """`plans()`'s JSON back: ({page: requests}, h1 hosts)."""
    pages = {p: [Request(**r) for r in reqs] for p, reqs in doc["pages"].items()}
    return pages, set(doc["h1_hosts"])
