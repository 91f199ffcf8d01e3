"""Find and rewrite the URL references of HTML and CSS documents (for the importers).

Works on bytes decoded as latin-1 so any page encoding round-trips unchanged. A
`resolver(ref, is_subresource)` callback returns the replacement URL (or None to keep
the reference as it is); it also sees whether the browser would fetch the reference
while loading the page (`<img src>`, stylesheets, scripts, frames, CSS `url()` and
`@import`) as opposed to a navigation link (`<a href>`), which the importers need to
count missing files.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

Resolver = Callable[[str, bool], str | None]

_TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)(\s[^>]*)?>", re.S)
_ATTR = re.compile(
    r"""(\s)(src|href|background|poster|data|srcset)(\s*=\s*)("([^"]*)"|'([^']*)'|([^\s"'>]+))""",
    re.I,
)
_REL = re.compile(r"""\brel\s*=\s*["']?([^"'>]*)""", re.I)
_CSS_URL = re.compile(r"""url\(\s*(["']?)([^"')]*?)\1\s*\)""", re.I)
_CSS_IMPORT = re.compile(r"""@import\s+(["'])([^"']+)\1""", re.I)
_OPAQUE = re.compile(r"(<!--|<script\b[^>]*>)(.*?)(-->|</script\s*>)", re.I | re.S)
_STYLE_BLOCK = re.compile(r"(<style[^>]*>)(.*?)(</style\s*>)", re.I | re.S)
_STYLE_ATTR = re.compile(r"""(\sstyle\s*=\s*)("([^"]*)"|'([^']*)')""", re.I)

# Tags whose src/href the browser fetches while loading the page.
_FETCHED_SRC = {"img", "script", "iframe", "frame", "embed", "input", "source", "audio", "video"}
# (Headless Chromium fetches no favicons; srcset fetches one candidate, `src` counts.)
_FETCHED_LINK_RELS = {"stylesheet", "preload", "modulepreload"}

SKIP_SCHEMES = ("data:", "javascript:", "mailto:", "about:", "#", "tel:", "blob:")


def _is_fetched(tag: str, attr: str, attrs: str) -> bool:
    tag, attr = tag.lower(), attr.lower()
    if attr == "background":
        return True
    if attr == "poster":
        return tag == "video"
    if attr == "data":
        return tag == "object"
    if attr == "srcset":
        return False
    if attr == "src":
        return tag in _FETCHED_SRC
    if attr == "href" and tag == "link":
        m = _REL.search(attrs)
        rels = set(m.group(1).lower().split()) if m else set()
        return bool(rels & _FETCHED_LINK_RELS) and "alternate" not in rels
    return False


def rewrite_css(text: str, resolve: Resolver) -> str:
    def url_sub(m: re.Match[str]) -> str:
        new = resolve(html.unescape(m.group(2).strip()), True)
        return m.group(0) if new is None else f'url("{new}")'

    def import_sub(m: re.Match[str]) -> str:
        new = resolve(m.group(2).strip(), True)
        return m.group(0) if new is None else f'@import "{new}"'

    return _CSS_URL.sub(url_sub, _CSS_IMPORT.sub(import_sub, text))


def rewrite_html(text: str, resolve: Resolver) -> str:
    def attr_sub(tag: str, attrs: str) -> str:
        def sub(m: re.Match[str]) -> str:
            value = m.group(5) if m.group(5) is not None else m.group(6)
            if value is None:
                value = m.group(7)
            fetched = _is_fetched(tag, m.group(2), attrs)
            if m.group(2).lower() == "srcset":
                parts = []
                for cand in value.split(","):
                    bits = cand.strip().split(None, 1)
                    if not bits:
                        continue
                    new = resolve(html.unescape(bits[0]), fetched)
                    parts.append(" ".join([new if new is not None else bits[0], *bits[1:]]))
                out = ", ".join(parts)
            else:
                new = resolve(html.unescape(value.strip()), fetched)
                if new is None:
                    return m.group(0)
                out = new
            return f'{m.group(1)}{m.group(2)}{m.group(3)}"{html.escape(out, quote=True)}"'

        return _ATTR.sub(sub, attrs)

    def tag_sub(m: re.Match[str]) -> str:
        attrs = m.group(2)
        if not attrs:
            return m.group(0)
        attrs = _STYLE_ATTR.sub(
            lambda s: (
                f'{s.group(1)}"{html.escape(rewrite_css(html.unescape(s.group(3) if s.group(3) is not None else s.group(4)), resolve))}"'
            ),
            attrs,
        )
        return f"<{m.group(1)}{attr_sub(m.group(1), attrs)}>"

    def markup(chunk: str) -> str:
        chunk = _STYLE_BLOCK.sub(
            lambda m: m.group(1) + rewrite_css(m.group(2), resolve) + m.group(3), chunk
        )
        return _TAG.sub(tag_sub, chunk)

    # Comments (IE conditional comments included) and inline script bodies are not markup
    # the browser scans for subresources: keep them as they are (a <script> tag's own
    # attributes are markup).
    out, pos = [], 0
    for m in _OPAQUE.finditer(text):
        out.append(markup(text[pos : m.start()]))
        opener = m.group(1) if m.group(1) == "<!--" else markup(m.group(1))
        out.append(opener + m.group(2) + m.group(3))
        pos = m.end()
    out.append(markup(text[pos:]))
    return "".join(out)


# WHATWG URL percent-encode sets, so stored URLs equal what Chromium puts on the wire.
_PATH_SAFE = "/!$&'()*+,;=:@-._~%[]|^"
_QUERY_SAFE = "/?!$&()*+,;=:@-._~%[]|^{}`\\"


def normalize(url: str) -> str:
    """Percent-encode a URL the way a browser sends it (path and query sets)."""
    parts = urlsplit(url)
    path = quote(parts.path or "/", safe=_PATH_SAFE + "{}`\\")
    path = path.replace("{", "%7B").replace("}", "%7D").replace("`", "%60")
    query = quote(parts.query, safe=_QUERY_SAFE)
    return urlunsplit((parts.scheme, parts.netloc.lower(), path, query, ""))


def fs_name_to_url_path(rel: str) -> str:
    """Saved-tree path → URL path + query: percent-encode, `@` in the file name is `?`."""
    head, _, name = rel.rpartition("/")
    query = ""
    if "@" in name:
        name, query = name.split("@", 1)
    path = quote(f"{head}/{name}" if head else name, safe=_PATH_SAFE.replace("%", ""))
    path = path.replace("%40", "@")
    if query:
        return f"/{path}?{quote(query, safe=_QUERY_SAFE.replace('%', ''))}"
    return f"/{path}"


def url_path_to_fs_name(path: str, query: str) -> str:
    """URL path + query → the saved file name (inverse of fs_name_to_url_path)."""
    name = unquote(path.lstrip("/"))
    if query:
        name += "@" + unquote(query)
    return name
