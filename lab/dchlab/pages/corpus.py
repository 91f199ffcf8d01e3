"""Page corpora: the `dchannel-corpus/1` directory format (docs/formats.md).

A corpus is `<dir>/manifest.json` plus content-addressed bodies under `<dir>/bodies/`.
`Corpus` is the in-memory form; `CorpusWriter` builds one on disk (importers and the
generator use it); `load()` reads and validates one, failing with the file, the JSON
path of the offending field and what was expected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dchlab.errors import UserError
from dchlab.pages.cdn import TIERS, classify, ratio_tier
from dchlab.pages.servable import header_problem, host_name_problem

log = logging.getLogger(__name__)

FORMAT = "dchannel-corpus/1"
ALPN_CHOICES = (["h2", "http/1.1"], ["http/1.1"])

# Stored bodies are decoded, so these are recomputed by the server (formats.md).
DROPPED_HEADERS = frozenset(
    {
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)


class CorpusError(UserError, ValueError):
    """A manifest or body that does not follow docs/formats.md."""


@dataclass
class Origin:
    host: str
    alpn: list[str] = field(default_factory=lambda: ["h2", "http/1.1"])


@dataclass
class Page:
    name: str
    entry_url: str
    missing: int = 0
    # The exact requests the corpus cannot answer (URLs as Chromium puts them on the wire):
    # the importer's static analysis, replaced by `dch corpus probe`. None = only a count
    # is known (manifests written before the URL set existed).
    missing_urls: list[str] | None = None


@dataclass
class Object:
    url: str
    page: str
    status: int
    headers: list[tuple[str, str]]
    body: str
    size: int
    think_ms: float = 0.0
    # CDN tier from the recorded headers (dchlab.pages.cdn); None: webreplay's hit ratio
    # decides at run time.
    tier: str | None = None

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


@dataclass
class Corpus:
    root: Path
    name: str
    source: str
    origins: list[Origin]
    pages: list[Page]
    objects: list[Object]
    # Files an importer left out, per reason (not saved in the manifest; see the log).
    skipped: dict[str, int] = field(default_factory=dict)

    def page(self, name: str) -> Page:
        for p in self.pages:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.pages[:20])
        raise CorpusError(f"{self.root}: no page named {name!r} (pages: {known}...)")

    def objects_of(self, page: str) -> list[Object]:
        return [o for o in self.objects if o.page == page]

    def body_path(self, obj: Object) -> Path:
        return self.root / obj.body

    def read_body(self, obj: Object) -> bytes:
        return (self.root / obj.body).read_bytes()

    def hosts_of(self, page: str) -> list[str]:
        return sorted({o.host for o in self.objects_of(page)})

    def all_hosts(self) -> list[str]:
        return [o.host for o in self.origins]


def url_key(url: str) -> str:
    """Canonical key of a URL for deduplication: scheme-less host + path + query."""
    parts = urlsplit(url)
    key = f"{(parts.hostname or '').lower()}{parts.path or '/'}"
    return f"{key}?{parts.query}" if parts.query else key


class CorpusWriter:
    """Builds a corpus directory; bodies are written as they are added.

    The first object added for a URL wins (two saved pages may share a third-party URL
    with different contents; the server can only answer one) — `duplicates` counts the rest.
    """

    def __init__(self, root: Path, name: str, source: str) -> None:
        self.root = Path(root)
        self.name = name
        self.source = source
        (self.root / "bodies").mkdir(parents=True, exist_ok=True)
        self.origins: dict[str, Origin] = {}
        self.pages: list[Page] = []
        self.objects: dict[str, Object] = {}
        self.duplicates = 0

    @classmethod
    def for_captures(
        cls, kind: str, files: list[Path], dest: Path, name: str | None = None
    ) -> CorpusWriter:
        """A writer that replaces `dest` with a corpus made from capture `files` (HAR,
        WARC, ...): named `name` or `<kind>-<number of files>`."""
        dest = Path(dest)
        if dest.exists():
            shutil.rmtree(dest)
        src = Path(files[0]).parent if files else Path(".")
        return cls(dest, name or f"{kind}-{len(files)}", f"{kind} import of {src}")

    def add_origin(self, host: str, alpn: list[str] | None = None) -> None:
        host = host.lower()
        if host not in self.origins:
            self.origins[host] = Origin(host, list(alpn or ["h2", "http/1.1"]))
        elif alpn is not None:
            self.origins[host].alpn = list(alpn)

    def add_page(self, name: str, entry_url: str, missing: Iterable[str] | int = ()) -> None:
        """`missing`: the URLs the page references that the corpus cannot answer (an int
        is a bare count, as old manifests had; 0 means the empty set)."""
        if isinstance(missing, int):
            self.pages.append(Page(name, entry_url, missing, [] if missing == 0 else None))
            return
        urls = sorted(set(missing))
        self.pages.append(Page(name, entry_url, len(urls), urls))

    def add_object(
        self,
        url: str,
        page: str,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
        status: int = 200,
        think_ms: float = 0.0,
    ) -> Object | None:
        """Add a recorded response; its CDN tier is read from `headers` (none: the hit
        ratio decides when webreplay serves it)."""
        key = url_key(url)
        if key in self.objects:
            self.duplicates += 1
            log.debug("%s: URL already in the corpus (page %s); first copy kept", url, page)
            return None
        digest = hashlib.sha256(body).hexdigest()
        path = self.root / "bodies" / digest
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(body)
            tmp.replace(path)
        kept = [(k.lower(), v) for k, v in headers if k.lower() not in DROPPED_HEADERS]
        host = urlsplit(url).hostname
        if not host:
            raise CorpusError(f"object URL {url!r} has no host")
        self.add_origin(host)
        obj = Object(
            url, page, status, kept, f"bodies/{digest}", len(body), float(think_ms), classify(kept)
        )
        self.objects[key] = obj
        return obj

    def has(self, url: str) -> bool:
        return url_key(url) in self.objects

    def finish(self) -> Corpus:
        """Write the manifest, after refusing what webreplay could not serve."""
        corpus = Corpus(
            self.root,
            self.name,
            self.source,
            sorted(self.origins.values(), key=lambda o: o.host),
            self.pages,
            list(self.objects.values()),
        )
        problems = servable_problems(corpus)
        if problems:
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise CorpusError(
                f"{self.root}: webreplay could not serve this corpus: "
                + "; ".join(problems[:5])
                + more
            )
        save(corpus)
        return corpus


def servable_problems(corpus: Corpus) -> list[str]:
    """Fields webreplay would refuse (host names, header names/values), each named by its
    JSON path in the manifest; empty when it can serve everything."""
    file = corpus.root / "manifest.json"
    out = []
    for i, o in enumerate(corpus.origins):
        why = host_name_problem(o.host)
        if why:
            out.append(f"{file}: $.origins[{i}].host {o.host!r}: {why}")
    for i, obj in enumerate(corpus.objects):
        for j, (k, v) in enumerate(obj.headers):
            why = header_problem(k, v)
            if why:
                out.append(f"{file}: $.objects[{i}].headers[{j}] ({obj.url}): {why}")
    return out


def to_json(corpus: Corpus) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": corpus.name,
        "source": corpus.source,
        "origins": [{"host": o.host, "alpn": o.alpn} for o in corpus.origins],
        "pages": [_page_json(p) for p in corpus.pages],
        "objects": [_object_json(o) for o in corpus.objects],
    }


def _object_json(o: Object) -> dict[str, Any]:
    out: dict[str, Any] = {
        "url": o.url,
        "page": o.page,
        "status": o.status,
        "headers": [list(h) for h in o.headers],
        "body": o.body,
        "size": o.size,
        "think_ms": o.think_ms,
    }
    if o.tier is not None:  # absent: the hit ratio decides (and old readers see no change)
        out["tier"] = o.tier
    return out


def _page_json(p: Page) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "entry_url": p.entry_url, "missing": p.missing}
    if p.missing_urls is not None:
        out["missing"] = len(p.missing_urls)
        out["missing_urls"] = list(p.missing_urls)
    return out


def save(corpus: Corpus) -> Path:
    path = corpus.root / "manifest.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(to_json(corpus), indent=1) + "\n")
    tmp.replace(path)
    return path


# --- reading and validation -------------------------------------------------------------


class _Checker:
    def __init__(self, file: Path) -> None:
        self.file = file

    def fail(self, where: str, msg: str) -> CorpusError:
        return CorpusError(f"{self.file}: {where}: {msg}")

    def get(self, obj: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(where, f"expected a JSON object, got {type(obj).__name__}")
        if key not in obj:
            raise self.fail(f"{where}.{key}", "missing required field")
        value = obj[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self.fail(f"{where}.{key}", f"expected {want}, got {json.dumps(value)[:60]}")
        return value


def _check_url(c: _Checker, url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise c.fail(where, f"expected an absolute http(s) URL with a host, got {url!r}")


def load(root: Path | str, check_bodies: bool = True) -> Corpus:
    """Read and validate `<root>/manifest.json` (and, by default, every body's size)."""
    root = Path(root)
    file = root / "manifest.json"
    if not file.is_file():
        raise CorpusError(f"{root}: not a corpus directory (no manifest.json)")
    c = _Checker(file)
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise CorpusError(f"{file}: line {e.lineno} column {e.colno}: invalid JSON: {e.msg}") from e
    fmt = c.get(data, "format", "$", str)
    if fmt != FORMAT:
        raise c.fail("$.format", f"expected {FORMAT!r}, got {fmt!r}")
    name = c.get(data, "name", "$", str)
    source = data.get("source", "")
    origins: list[Origin] = []
    seen_hosts: set[str] = set()
    for i, o in enumerate(c.get(data, "origins", "$", list)):
        where = f"$.origins[{i}]"
        host = c.get(o, "host", where, str).lower()
        alpn = c.get(o, "alpn", where, list) if "alpn" in o else ["h2", "http/1.1"]
        if alpn not in ALPN_CHOICES:
            raise c.fail(
                f"{where}.alpn", f'expected ["h2", "http/1.1"] or ["http/1.1"], got {alpn}'
            )
        if host in seen_hosts:
            raise c.fail(f"{where}.host", f"duplicate origin {host!r}")
        why = host_name_problem(host)
        if why:  # webreplay's hosts parser would refuse it and every testbed would abort
            raise c.fail(f"{where}.host", f"{host!r}: {why}")
        seen_hosts.add(host)
        origins.append(Origin(host, alpn))
    pages: list[Page] = []
    page_names: set[str] = set()
    for i, p in enumerate(c.get(data, "pages", "$", list)):
        where = f"$.pages[{i}]"
        pname = c.get(p, "name", where, str)
        entry = c.get(p, "entry_url", where, str)
        _check_url(c, entry, f"{where}.entry_url")
        missing = c.get(p, "missing", where, int) if "missing" in p else 0
        if missing < 0:
            raise c.fail(f"{where}.missing", f"expected >= 0, got {missing}")
        missing_urls = None
        if "missing_urls" in p:
            missing_urls = c.get(p, "missing_urls", where, list)
            for j, u in enumerate(missing_urls):
                if not isinstance(u, str) or not u:
                    raise c.fail(f"{where}.missing_urls[{j}]", f"expected a URL string, got {u!r}")
            if missing != len(missing_urls):
                raise c.fail(
                    f"{where}.missing",
                    f"is {missing} but missing_urls lists {len(missing_urls)} URLs",
                )
        if pname in page_names:
            raise c.fail(f"{where}.name", f"duplicate page {pname!r}")
        page_names.add(pname)
        pages.append(Page(pname, entry, missing, missing_urls))
    objects: list[Object] = []
    for i, o in enumerate(c.get(data, "objects", "$", list)):
        where = f"$.objects[{i}]"
        url = c.get(o, "url", where, str)
        _check_url(c, url, f"{where}.url")
        host = (urlsplit(url).hostname or "").lower()
        if host not in seen_hosts:
            raise c.fail(f"{where}.url", f"host {host!r} is not listed in $.origins")
        page = c.get(o, "page", where, str)
        if page not in page_names:
            raise c.fail(f"{where}.page", f"unknown page {page!r}")
        status = c.get(o, "status", where, int)
        if not 200 <= status <= 599:  # webreplay cannot answer with a 1xx final status
            raise c.fail(f"{where}.status", f"expected an HTTP status 200..599, got {status}")
        headers = []
        for j, h in enumerate(c.get(o, "headers", where, list)):
            if not (isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)):
                raise c.fail(f"{where}.headers[{j}]", f"expected [name, value] strings, got {h!r}")
            why = header_problem(h[0], h[1])
            if why:  # webreplay refuses the whole corpus over one bad header
                raise c.fail(f"{where}.headers[{j}]", why)
            headers.append((h[0], h[1]))
        body = c.get(o, "body", where, str)
        if not body.startswith("bodies/") or "/" in body[7:] or len(body) != 7 + 64:
            raise c.fail(f"{where}.body", f"expected 'bodies/<sha256-hex>', got {body!r}")
        size = c.get(o, "size", where, int)
        think = c.get(o, "think_ms", where, float) if "think_ms" in o else 0.0
        if think < 0:
            raise c.fail(f"{where}.think_ms", f"expected >= 0, got {think}")
        tier = c.get(o, "tier", where, str) if "tier" in o else None
        if tier is not None and tier not in TIERS:
            raise c.fail(f"{where}.tier", f"expected one of {', '.join(TIERS)}, got {tier!r}")
        if check_bodies:
            bpath = root / body
            if not bpath.is_file():
                raise c.fail(f"{where}.body", f"body file {bpath} does not exist")
            actual = bpath.stat().st_size
            if actual != size:
                raise c.fail(f"{where}.size", f"manifest says {size} bytes, {bpath} has {actual}")
        objects.append(Object(url, page, status, headers, body, size, think, tier))
    for p in pages:
        if not any(url_key(o.url) == url_key(p.entry_url) for o in objects):
            raise c.fail(f"$.pages[{p.name}].entry_url", f"no object has URL {p.entry_url!r}")
    return Corpus(root, name, source, origins, pages, objects)


def verify_bodies(corpus: Corpus) -> list[str]:
    """Hash every body; returns the problems found (empty when all match their names)."""
    problems = []
    for o in corpus.objects:
        data = corpus.read_body(o)
        if hashlib.sha256(data).hexdigest() != o.body[7:]:
            problems.append(f"{o.url}: {o.body} does not hash to its name")
    return problems


def tier_mix(
    corpus: Corpus, ratio: tuple[float, float] | None = None, seed: int = 1
) -> list[dict[str, Any]]:
    """Objects and bytes per (source, tier): `headers` for the manifest's tiers, `ratio`
    for the rest — their tiers as webreplay would draw them with `ratio` = (edge,
    parent) shares and `seed`, or tier `unset` without a ratio."""
    acc: dict[tuple[str, str], list[int]] = {}
    for o in corpus.objects:
        if o.tier is not None:
            key = ("headers", o.tier)
        elif ratio is None:
            key = ("ratio", "unset")
        else:
            key = ("ratio", ratio_tier(o.url, seed, *ratio))
        n = acc.setdefault(key, [0, 0])
        n[0] += 1
        n[1] += o.size
    order = {t: i for i, t in enumerate((*TIERS, "unset"))}
    return [
        {"source": s, "tier": t, "objects": n, "bytes": b}
        for (s, t), (n, b) in sorted(acc.items(), key=lambda kv: (kv[0][0], order[kv[0][1]]))
    ]


def summary(corpus: Corpus) -> list[dict[str, Any]]:
    """Per page: requests, bytes, origins, missing (for `dch corpus info`)."""
    rows = []
    for p in corpus.pages:
        objs = corpus.objects_of(p.name)
        rows.append(
            {
                "page": p.name,
                "entry_url": p.entry_url,
                "requests": len(objs),
                "bytes": sum(o.size for o in objs),
                "origins": len({o.host for o in objs}),
                "missing": p.missing,
            }
        )
    return rows
