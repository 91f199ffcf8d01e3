"""The request headers a background user sends: those of the desktop Chromium the lab
measures with (Chromium 156, headless, Linux), per kind of request, so that the uplink
carries what the measured device's would.

Kind by the URL's extension (the corpus records no request headers): the entry document
(a navigation), style sheets, scripts, images, fonts (CORS), anything else as a
`fetch()` (CORS, destination empty). `sec-fetch-site` compares the request's host with
the entry's (same-origin, same-site by the last two labels, else cross-site); `referer`
is the entry URL (strict-origin-when-cross-origin: its origin only when cross-origin).
Chromium also sends cookies the page set and client hints it asked for; the corpus
records neither. Not matched either: Chromium's TLS ClientHello (~1.9 kB with its
X25519MLKEM768 key share) is larger than Python's OpenSSL 3.0 one (~0.5 kB).
"""

from __future__ import annotations

from urllib.parse import urlsplit

_COMMON = {
    "sec-ch-ua": '"Chromium";v="156", "Not?A_Brand";v="24", "HeadlessChrome";v="156"',
    "sec-ch-ua-mobile": "?0",
    "sec-ch-ua-platform": '"Linux"',
    "user-agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "HeadlessChrome/156.0.0.0 Safari/537.36",
    "accept-encoding": "gzip, deflate, br, zstd",
    "accept-language": "en-US,en;q=0.9",
}

#: (accept, sec-fetch-mode, sec-fetch-dest, priority) per kind.
_KINDS = {
    "style": ("text/css,*/*;q=0.1", "no-cors", "style", "u=0"),
    "script": ("*/*", "no-cors", "script", "u=1"),
    "image": (
        "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
        "no-cors",
        "image",
        "u=2, i",
    ),
    "font": ("*/*", "cors", "font", "u=0"),
    "empty": ("*/*", "cors", "empty", "u=4"),
}
_EXT = {".css": "style", ".js": "script", ".mjs": "script", ".png": "image", ".jpg": "image",
        ".jpeg": "image", ".gif": "image", ".webp": "image", ".svg": "image", ".avif": "image",
        ".ico": "image", ".woff": "font", ".woff2": "font", ".ttf": "font", ".otf": "font"}  # fmt: skip
_DOCUMENT = {
    "upgrade-insecure-requests": "1",
    "accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
    "sec-fetch-site": "none",
    "sec-fetch-mode": "navigate",
    "sec-fetch-user": "?1",
    "sec-fetch-dest": "document",
    "priority": "u=0, i",
}


def kind(url: str) -> str:
    """The request's kind (style, script, image, font, empty) by its path's extension."""
    path = urlsplit(url).path.lower()
    dot = path.rfind(".")
    return _EXT.get(path[dot:], "empty") if dot > path.rfind("/") else "empty"


def _site(host: str) -> str:
    return ".".join(host.split(".")[-2:])


def request_headers(url: str, entry_url: str) -> dict[str, str]:
    """Chromium's headers for `url` loaded by the page `entry_url` (itself: a navigation)."""
    if url == entry_url:
        return {**_COMMON, **_DOCUMENT}
    accept, mode, dest, priority = _KINDS[kind(url)]
    host, entry = urlsplit(url), urlsplit(entry_url)
    same_origin = (host.scheme, host.netloc) == (entry.scheme, entry.netloc)
    site = ("same-origin" if same_origin
            else "same-site" if _site(host.hostname or "") == _site(entry.hostname or "")
            else "cross-site")  # fmt: skip
    out = {**_COMMON, "accept": accept, "sec-fetch-site": site, "sec-fetch-mode": mode,
           "sec-fetch-dest": dest, "priority": priority,
           "referer": entry_url if same_origin else f"{entry.scheme}://{entry.netloc}/"}  # fmt: skip
    if mode == "cors":
        out["origin"] = f"{entry.scheme}://{entry.netloc}"
    return out
