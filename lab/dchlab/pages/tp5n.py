"""Import saved-page trees (Mozilla Talos tp5n layout) into a corpus.

Layout: `<src>/<site>/<host>/<path>` — one folder per page (`site`), inside it one
folder per original host. References between hosts are relative (`../../cdn.host/x.css`),
`?` in saved names became `@`. Every file becomes an object `https://<host>/<path>`;
references in HTML and CSS are rewritten to those absolute https URLs (absolute
`http://` references too), so the page loads over the replay server's per-origin
addresses exactly as the original did. References the browser would fetch but the tree
lacks are recorded per page (`missing_urls`) — real saved pages lose ~1.5 % of their
subresources — and still point where the original did, so they fail as they would live.
What is not page content (litter, non-host folders, ...) is skipped: `_site_files`.
"""

from __future__ import annotations

import logging
import mimetypes
import os
import posixpath
import shutil
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from dchlab.pages.corpus import Corpus, CorpusError, CorpusWriter, url_key
from dchlab.pages.litter import Skips, litter_reason
from dchlab.pages.rewrite import (
    SKIP_SCHEMES,
    fs_name_to_url_path,
    normalize,
    rewrite_css,
    rewrite_html,
)
from dchlab.pages.servable import host_name_problem

log = logging.getLogger(__name__)

MANIFEST_PREFIX = "http://localhost/page_load_test/tp5n/"
TEXT_KINDS = ("html", "css")


def content_type(name: str) -> str:
    base = name.split("@", 1)[0]
    guess, _ = mimetypes.guess_type(base)
    if guess is None:
        low = base.lower()
        if (
            low.endswith((".php", ".asp", ".aspx", ".jsp", "/"))
            or "." not in low.rsplit("/", 1)[-1]
        ):
            guess = "text/html"
        else:
            guess = "application/octet-stream"
    if guess.startswith("text/") or guess in ("application/javascript", "application/json"):
        return guess
    return guess


def kind_of(ctype: str) -> str:
    if "html" in ctype:
        return "html"
    if "css" in ctype:
        return "css"
    if "javascript" in ctype:
        return "js"
    return "other"


@dataclass
class PageReport:
    site: str
    entry_url: str
    files: int = 0
    missing: set[str] = field(default_factory=set)


def _entries(src: Path) -> dict[str, str]:
    """site → saved path of its entry document (from tp5n.manifest, else index.html)."""
    out: dict[str, str] = {}
    man = src / "tp5n.manifest"
    if man.is_file():
        for lineno, line in enumerate(man.read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith(MANIFEST_PREFIX):
                raise CorpusError(f"{man}:{lineno}: expected a URL starting {MANIFEST_PREFIX!r}")
            rel = line[len(MANIFEST_PREFIX) :]
            site = rel.split("/", 1)[0]
            out[site] = unquote(rel.split("/", 1)[1])
    return out


def _count_files(path: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def _site_files(root: Path, skips: Skips) -> tuple[dict[str, str], list[Path]]:
    """Host folders (lower-case name → folder name) and page files of one site folder.

    Skipped, each with a logged, counted warning: litter at any depth (`.DS_Store`, a
    `.git/` folder as a whole; other dot-names are URL paths and stay), folders that are not host names webreplay accepts, files
    outside a host folder, empty folders, and a second file for an URL already taken
    (e.g. `WWW.EX.COM/` beside `www.ex.com/`).
    """
    hosts: dict[str, str] = {}
    files: list[Path] = []
    # Lower-case folder names first: of `www.ex.com/` and `WWW.EX.COM/` the former is kept.
    for entry in sorted(root.iterdir(), key=lambda p: (p.name != p.name.lower(), p.name)):
        why = litter_reason(entry.name)
        if why is None and not entry.is_dir():
            why = "not inside a host folder (expected <site>/<host>/<path>)"
        if why is None:
            why = host_name_problem(entry.name)
            why = why and f"folder name is not a host name: {why}"
        if why is None and "." not in entry.name:
            # webreplay would serve `page_files` as a host, but no saved page came from
            # one: a browser's "Save Page As" folder or a stray directory, not a host.
            why = "folder name is not a domain name (no dot; e.g. a `Page_files/` folder)"
        if why is None and entry.name.lower() in hosts:
            why = f"same host as folder {hosts[entry.name.lower()]!r} (host names ignore case)"
        if why is not None:
            skips.add(entry, why, _count_files(entry) if entry.is_dir() else 1)
            continue
        hosts[entry.name.lower()] = entry.name
        for dirpath, dirnames, filenames in os.walk(entry):
            here = Path(dirpath)
            if not dirnames and not filenames:
                skips.add(here, "empty folder", 0)
            for d in list(dirnames):
                why = litter_reason(d)
                if why is not None:
                    skips.add(here / d, why, _count_files(here / d))
                    dirnames.remove(d)
            dirnames.sort()
            for f in sorted(filenames):
                why = litter_reason(f)
                if why is not None:
                    skips.add(here / f, why)
                elif (here / f).is_file():
                    files.append(here / f)
                else:
                    skips.add(here / f, "not a regular file (broken link, socket, ...)")
    return hosts, files


class _SiteImporter:
    def __init__(
        self, src: Path, site: str, entry_rel: str, writer: CorpusWriter, skips: Skips
    ) -> None:
        self.root = src / site
        self.site = site
        self.entry_rel = entry_rel
        self.w = writer
        self.skips = skips
        self.hosts, self.files = _site_files(self.root, skips)

    def url_of(self, rel: str) -> str:
        """Saved path relative to the site folder (`host/a/b@q`) → absolute URL."""
        host, _, rest = rel.partition("/")
        return f"https://{host.lower()}{fs_name_to_url_path(rest)}"

    def run(self) -> PageReport:
        report = PageReport(self.site, self.url_of(self.entry_rel))
        files: list[Path] = []
        by_url: dict[str, Path] = {}
        for p in self.files:
            url = self.url_of(p.relative_to(self.root).as_posix())
            if url_key(url) in by_url:
                # Two saved files for one URL (percent-encoded and plain names, ...): the
                # replay can answer only one; the first in name order is kept.
                self.skips.add(p, f"duplicate URL {url} (kept {by_url[url_key(url)]})")
                continue
            by_url[url_key(url)] = p
            files.append(p)
        report.files = len(files)
        kept = {p.relative_to(self.root).as_posix() for p in files}
        known_urls = {self.url_of(rel) for rel in kept}
        self.kept = kept
        # Walk what the browser loads, from the entry document, to count missing files.
        queue = deque([self.entry_rel])
        seen = {self.entry_rel}
        bodies: dict[str, bytes] = {}
        while queue:
            rel = queue.popleft()
            path = self.root / rel
            data = path.read_bytes()
            ctype = content_type(rel)
            kind = kind_of(ctype)
            if kind not in TEXT_KINDS and kind != "js":
                continue
            found: list[str] = []
            bodies[rel] = self._rewrite(rel, data, kind, known_urls, report, found)
            for child in found:
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        for p in files:
            rel = p.relative_to(self.root).as_posix()
            if rel not in bodies:
                ctype = content_type(rel)
                kind = kind_of(ctype)
                data = p.read_bytes()
                body = (
                    self._rewrite(rel, data, kind, known_urls, PageReport("", ""), [])
                    if kind in TEXT_KINDS or kind == "js"
                    else data
                )
            else:
                body = bodies[rel]
            ctype = content_type(rel)
            if ctype.startswith("text/") and "charset" not in ctype:
                ctype += "; charset=" + _sniff_charset(body)
            headers = [("content-type", ctype), ("access-control-allow-origin", "*")]
            self.w.add_object(self.url_of(rel), self.site, body, headers, 200, 0.0)
        return report

    def _rewrite(
        self,
        rel: str,
        data: bytes,
        kind: str,
        known_urls: set[str],
        report: PageReport,
        found: list[str],
    ) -> bytes:
        text = data.decode("latin-1")
        base_dir = posixpath.dirname(rel)

        def resolve(ref: str, fetched: bool) -> str | None:
            ref = ref.strip()
            if not ref or ref.lower().startswith(SKIP_SCHEMES):
                return None
            if "://" in ref.split("?")[0] and not ref.lower().startswith(("http://", "https://")):
                # The saver disabled some links (`httpdisabled://...`): the browser still
                # tries them and fails, so a fetched one counts as missing.
                if fetched:
                    report.missing.add(ref)
                return None
            low = ref.lower()
            if low.startswith(("http://", "https://", "//")):
                parts = urlsplit(ref if not low.startswith("//") else "https:" + ref)
                host = (parts.hostname or "").lower()
                url = normalize(
                    f"https://{parts.netloc}{parts.path or '/'}"
                    + (f"?{parts.query}" if parts.query else "")
                )
                if host in self.hosts:
                    fs = f"{self.hosts[host]}/{unquote(parts.path.lstrip('/'))}"
                    if parts.query:
                        fs += "@" + unquote(parts.query)
                    self._note(fs, url, fetched, known_urls, report, found)
                elif fetched:
                    report.missing.add(url)
                return url
            path_part, _, query = ref.partition("?")
            path_part = path_part.split("#", 1)[0]
            query = query.split("#", 1)[0]
            # Root-relative references stay on the referring document's host folder.
            base = rel.split("/", 1)[0] if low.startswith("/") else base_dir
            path_part = path_part.lstrip("/") if low.startswith("/") else path_part
            target = posixpath.normpath(posixpath.join(base, unquote(path_part)))
            if query:
                target += "@" + unquote(query)
            if target.startswith("..") or "/" not in target:
                if fetched:  # above the saved tree: the browser asks the document's host
                    report.missing.add(normalize(urljoin(self.url_of(rel), ref)))
                return None
            if target not in self.kept and path_part != unquote(path_part):
                # Saved under its percent-encoded name (`a%20b.png`), as some savers do.
                literal = posixpath.normpath(posixpath.join(base, path_part))
                if query:
                    literal += "@" + query
                if literal in self.kept:
                    target = literal
            url = self.url_of(target)
            self._note(target, url, fetched, known_urls, report, found)
            return url

        if kind == "html":
            text = rewrite_html(text, resolve)
        elif kind == "css":
            text = rewrite_css(text, resolve)
        # In every text body, absolute http:// URLs of the page's hosts become https://.
        for host in self.hosts:
            text = text.replace(f"http://{host}", f"https://{host}")
            text = text.replace(f"http:\\/\\/{host}", f"https:\\/\\/{host}")
        return text.encode("latin-1")

    def _note(
        self,
        fs: str,
        url: str,
        fetched: bool,
        known_urls: set[str],
        report: PageReport,
        found: list[str],
    ) -> None:
        if not fetched:
            return
        if url in known_urls and fs in self.kept:
            found.append(fs)
        else:
            report.missing.add(url)


def _sniff_charset(body: bytes) -> str:
    head = body[:2048].lower()
    import re

    m = re.search(rb"charset\s*=\s*[\"']?([a-z0-9_\-]+)", head)
    return m.group(1).decode() if m else "utf-8"


def import_tp5n(
    src: Path, dest: Path, sites: list[str] | None = None
) -> tuple[Corpus, list[PageReport]]:
    """Import the saved-page tree `src` into the corpus directory `dest` (replaced).

    Anything that is not page content (see `_site_files`) is skipped with a logged
    warning naming it; the counts per reason end up in `corpus.skipped`."""
    src = Path(src)
    if not src.is_dir():
        raise CorpusError(f"{src}: not a directory")
    entries = _entries(src)
    skips = Skips()
    all_sites = []
    for p in sorted(src.iterdir()):
        if p.name == "tp5n.manifest":
            continue
        why = litter_reason(p.name)
        if why is None and p.name.startswith("."):
            why = "hidden folder (no site is named with a leading '.')"
        if why is None and not p.is_dir():
            why = "a file beside the site folders"
        if why is not None:
            skips.add(p, why, _count_files(p) if p.is_dir() else 1)
        else:
            all_sites.append(p.name)
    chosen = sites or all_sites
    for s in chosen:
        if s not in all_sites:
            raise CorpusError(f"{src}: no site folder {s!r} (have: {', '.join(all_sites[:10])}...)")
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    w = CorpusWriter(dest, f"tp5n-{len(chosen)}", f"tp5n import of {src}")
    reports = []
    for site in chosen:
        entry = entries.get(site)
        if entry is None:
            index = sorted(
                p.relative_to(src / site).as_posix()
                for p in (src / site).rglob("index.html")
                if not any(litter_reason(x) for x in p.relative_to(src / site).parts)
            )
            if not index:
                if not any(os.scandir(src / site)):
                    skips.add(src / site, "empty folder", 0)
                else:
                    skips.add(src / site, "no entry in tp5n.manifest and no index.html", 0)
                continue
            entry = index[0]
        if not (src / site / entry).is_file():
            raise CorpusError(f"{src / 'tp5n.manifest'}: entry of {site} ({entry}) does not exist")
        imp = _SiteImporter(src, site, entry, w, skips)
        if entry not in {p.relative_to(imp.root).as_posix() for p in imp.files}:
            skips.add(src / site / entry, "entry document was skipped; page left out", 0)
            continue
        rep = imp.run()
        w.add_page(site, rep.entry_url, rep.missing)
        reports.append(rep)
        if rep.missing:
            log.info("%s: %d missing subresources", site, len(rep.missing))
    if w.duplicates:
        log.info(
            "%d objects shared a URL with an earlier page; the first copy is served", w.duplicates
        )
    if not w.pages:
        raise CorpusError(f"{src}: no importable page (expected <site>/<host>/<path> folders)")
    if skips.total or skips.files:
        log.warning("%s: skipped %d entries: %s", src, len(skips.files), skips.summary())
    corpus = w.finish()
    corpus.skipped = dict(skips.by_reason)
    return corpus, reports
