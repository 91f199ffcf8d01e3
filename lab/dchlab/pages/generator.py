"""Synthetic page corpora from published web statistics (the built-in default corpus).

Statistics (sources in docs/pages.md): HTTP Archive Web Almanac 2022/2024 page weight
and requests chapters (mobile+desktop medians): ≈70 requests and ≈2 MB per page at the
median, ≈180 requests and ≈6 MB at p90; bytes by content type ≈ images 45 %, JavaScript
27 %, fonts 6 %, CSS 3 %, HTML 1 % (the rest: JSON/XHR, media, other); 5–20 origins.

Two stages:
- `plan_page` draws the structure of one page (objects, types, sizes, origins and who
  references whom) from a seeded RNG — cheap, used by the statistics tests;
- `generate` turns plans into a corpus directory with real HTML, CSS, JS, PNG/JPEG and
  WOFF bodies that Chromium parses, decodes and runs.

Dependency chains (≥ 3 deep): HTML → CSS → fonts and background images;
HTML → loader JS → dynamically inserted JS → images inserted by script;
HTML → JS → fetch(JSON) → images listed in the JSON.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np

from dchlab.pages import media
from dchlab.pages.corpus import Corpus, CorpusWriter, load

# Log-normal fits: sigma = ln(p90 / median) / z_0.9.
# Bumped whenever generated bodies change, so cached corpora are rebuilt.
GENERATOR_VERSION = 2
# Bumped whenever internal pages (generate(internal_pages=...)) change.
INTERNAL_PAGES_VERSION = 2
Z90 = 1.2815515655446004
REQ_MEDIAN, REQ_P90 = 70.0, 180.0
BYTES_MEDIAN, BYTES_P90 = 2.0e6, 6.0e6
ORIGINS_MEDIAN, ORIGINS_MIN, ORIGINS_MAX = 10.0, 5, 20
REQ_BYTES_CORR = 0.6  # heavier pages have more requests
_NORMAL = NormalDist()
_WEYL = (0.6180339887498949, 0.4142135623730951, 0.7320508075688772)  # frac(φ), √2, √3

# Byte shares by type (Web Almanac); "json" stands for XHR/fetch data and other types.
BYTE_SHARE = {"image": 0.45, "js": 0.27, "json": 0.18, "font": 0.06, "css": 0.03, "html": 0.01}
# Request shares by type (Web Almanac requests chapter, rounded).
REQ_SHARE = {"image": 0.42, "js": 0.32, "json": 0.10, "font": 0.05, "css": 0.08}

CONTENT_TYPE = {
    "html": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "js": "application/javascript; charset=utf-8",
    "json": "application/json",
    "font": "font/woff2",
    "png": "image/png",
    "jpeg": "image/jpeg",
}
EXT = {"html": "html", "css": "css", "js": "js", "json": "json", "font": "woff2"}

# Third-party origins shared by all pages of a corpus (as CDNs, font and ad hosts are).
THIRD_PARTY = [
    *(f"cdn{i}.static-cdn.test" for i in range(6)),
    *(f"fonts{i}.webfonts.test" for i in range(2)),
    *(f"js{i}.libs.test" for i in range(4)),
    *(f"img{i}.pics.test" for i in range(4)),
    *(f"api{i}.data.test" for i in range(4)),
    *(f"t{i}.analytics.test" for i in range(4)),
]
FIRST_PARTY = ["www", "static", "img", "api"]


@dataclass
class Res:
    """One planned object. `parent` is the index of the object that references it."""

    idx: int
    kind: str  # html | css | js | json | font | image
    size: int
    host: str
    parent: int
    role: str = ""  # how the parent references it (link, script, img, bg, font, dyn, fetch)
    fmt: str = ""  # png | jpeg for images
    url: str = ""
    children: list[int] = field(default_factory=list)


@dataclass
class PagePlan:
    name: str
    entry_url: str
    resources: list[Res]

    @property
    def total_bytes(self) -> int:
        return sum(r.size for r in self.resources)

    @property
    def origins(self) -> set[str]:
        return {r.host for r in self.resources}

    def depth(self, idx: int) -> int:
        d = 1
        while self.resources[idx].parent >= 0:
            idx = self.resources[idx].parent
            d += 1
        return d


def _split(total: float, n: int, rng: np.random.Generator, sigma: float = 1.0) -> list[float]:
    w = rng.lognormal(0.0, sigma, n)
    return list(total * w / w.sum())


def plan_page(seed: int, index: int) -> PagePlan:
    rng = np.random.default_rng([seed, index, 0x9A6E])
    # Quasi-random (Weyl sequence) quantiles instead of independent draws, so that even a
    # 20-page corpus matches the published medians and p90s; the seed shifts the sequence.
    shift = np.random.default_rng([seed, 0x5EED]).random(3)
    z1, z2, z3 = (
        _NORMAL.inv_cdf(min(max((shift[k] + index * a) % 1.0, 1e-6), 1 - 1e-6))
        for k, a in enumerate(_WEYL)
    )
    zb = REQ_BYTES_CORR * z1 + math.sqrt(1 - REQ_BYTES_CORR**2) * z2
    n_req = round(REQ_MEDIAN * math.exp(z1 * math.log(REQ_P90 / REQ_MEDIAN) / Z90))
    n_req = max(12, min(n_req, 800))
    total = BYTES_MEDIAN * math.exp(zb * math.log(BYTES_P90 / BYTES_MEDIAN) / Z90)
    total = max(150e3, min(total, 40e6))
    zo = 0.7 * z1 + math.sqrt(1 - 0.49) * z3
    n_origins = round(ORIGINS_MEDIAN * math.exp(zo * 0.45))
    n_origins = max(ORIGINS_MIN, min(n_origins, ORIGINS_MAX, n_req // 2))

    site = f"site{index}"
    first = [f"{p}.{site}.test" for p in FIRST_PARTY]
    third = [str(h) for h in rng.permutation(THIRD_PARTY)]
    hosts = (first + third)[:n_origins] if n_origins > 4 else first[:n_origins]

    # Request counts per type (one HTML document; at least one of each other type).
    rest = n_req - 1
    counts = {k: max(1, round(rest * s)) for k, s in REQ_SHARE.items()}
    counts["image"] += rest - sum(counts.values())
    if counts["image"] < 1:
        counts["js"] += counts["image"] - 1
        counts["image"] = 1
    counts["js"] = max(counts["js"], 2)  # a loader and the script it inserts

    sizes: dict[str, list[float]] = {"html": [total * BYTE_SHARE["html"]]}
    for kind in REQ_SHARE:
        sizes[kind] = _split(total * BYTE_SHARE[kind], counts[kind], rng)
    floor = {"html": 2000, "css": 300, "js": 300, "json": 64, "font": 2500, "image": 900}

    res: list[Res] = []

    def add(kind: str, size: float, host: str, parent: int, role: str) -> Res:
        r = Res(len(res), kind, max(floor[kind], int(size)), host, parent, role)
        res.append(r)
        if parent >= 0:
            res[parent].children.append(r.idx)
        return r

    www = hosts[0]
    static_hosts = hosts[1:] or [www]

    def pick() -> str:
        return str(static_hosts[int(rng.integers(len(static_hosts)))])

    html = add("html", sizes["html"][0], www, -1, "entry")
    css = [add("css", s, pick(), html.idx, "link") for s in sizes["css"]]
    js_sizes = sizes["js"]
    # ~1/4 of scripts are inserted by other scripts (depth 3); one loader at least.
    n_dyn = max(1, len(js_sizes) // 4)
    top_js = [add("js", s, pick(), html.idx, "script") for s in js_sizes[n_dyn:]]
    dyn_js = [
        add("js", s, pick(), top_js[i % len(top_js)].idx, "dyn")
        for i, s in enumerate(js_sizes[:n_dyn])
    ]
    for i, s in enumerate(sizes["font"]):
        add("font", s, pick(), css[i % len(css)].idx, "font")
    json_objs = [
        add("json", s, pick(), top_js[(i + 1) % len(top_js)].idx, "fetch")
        for i, s in enumerate(sizes["json"])
    ]
    # Images: 55 % <img> in the HTML, 20 % CSS backgrounds, 15 % inserted by dynamic
    # scripts, 10 % listed in fetched JSON.
    for i, s in enumerate(sizes["image"]):
        u = (i * 0.618034) % 1.0  # low-discrepancy split keeps shares exact for small pages
        if u < 0.55:
            parent, role = html.idx, "img"
        elif u < 0.75:
            parent, role = css[i % len(css)].idx, "bg"
        elif u < 0.90:
            parent, role = dyn_js[i % len(dyn_js)].idx, "dyn"
        else:
            parent, role = json_objs[i % len(json_objs)].idx, "json"
        r = add("image", s, pick(), parent, role)
        r.fmt = "jpeg" if r.size > 20000 and rng.random() < 0.6 else "png"
    # Guarantee that every chosen origin serves something (n_origins <= n_req / 2).
    for j, h in enumerate(hosts[1:]):
        res[1 + j].host = h
    for r in res:
        if r.kind == "html":
            r.url = f"https://{r.host}/"
        else:
            ext = r.fmt if r.kind == "image" else EXT[r.kind]
            r.url = f"https://{r.host}/{site}/{r.kind}/{r.idx}.{ext}"
    return PagePlan(site, html.url, res)


# --- internal pages (browsing sessions) ------------------------------------------------

SHARED_IMAGE_EVERY = 2  # an internal page shows every 2nd image of the landing page again
NEW_IMAGE_SHARE = 0.5  # and half as many images of its own (articles, thumbnails)
# Cookie value bytes each page view adds (HotMobile'21: the p99 request grows by ~1 KB,
# 1.92 -> 2.9 KB, over a landing page and four internal pages).
VISIT_COOKIE_BYTES = 240


def internal_url(plan: PagePlan, k: int) -> str:
    """Entry URL of internal page `k` (1-based) of the site `plan` is the landing page of."""
    return f"https://{plan.resources[0].host}/p{k}/"


def plan_internal(seed: int, index: int, k: int, landing: PagePlan | None = None) -> PagePlan:
    """Internal page `k` (1-based) of site `index`: a new HTML document on the site's
    own host that links the landing page's stylesheets and top-level scripts (so fonts,
    CSS backgrounds, inserted scripts and fetched JSON are the landing page's too), shows
    every SHARED_IMAGE_EVERY-th of its <img> images again and adds new images of its own —
    what a click on the site's menu loads. Warm caches and connections make it cheaper
    than the landing page; its requests carry what the site set (cookies aside)."""
    landing = landing or plan_page(seed, index)
    rng = np.random.default_rng([seed, index, k, 0x1A7E])
    base = landing.resources
    res = [Res(r.idx, r.kind, r.size, r.host, r.parent, r.role, r.fmt, r.url, list(r.children))
           for r in base]  # fmt: skip
    top = base[0]
    imgs = [base[i] for i in top.children if base[i].kind == "image"]
    html = Res(len(res), "html", max(2000, int(top.size * rng.uniform(0.6, 1.2))), top.host, -1,
               "entry", url=internal_url(landing, k))  # fmt: skip
    res.append(html)
    html.children = [i for i in top.children if base[i].kind in ("css", "js")]
    html.children += [r.idx for r in imgs[::SHARED_IMAGE_EVERY]]
    sizes = [r.size for r in imgs] or [5000]
    hosts = [r.host for r in imgs] or [top.host]
    for j in range(max(2, round(len(imgs) * NEW_IMAGE_SHARE))):
        size = int(float(np.median(sizes)) * rng.lognormal(0.0, 0.8))
        r = Res(len(res), "image", max(900, size), hosts[j % len(hosts)], html.idx, "img")
        r.fmt = "jpeg" if r.size > 20000 and rng.random() < 0.6 else "png"
        r.url = f"https://{r.host}/{landing.name}/p{k}/image/{r.idx}.{r.fmt}"
        res.append(r)
        html.children.append(r.idx)
    return PagePlan(f"{landing.name}-p{k}", html.url, res)


def visit_cookie(plan: PagePlan, seed: int, k: int) -> str:
    """Inline script of page `k` (0: the landing page) of a site with internal pages: each
    page view adds a first-party cookie of VISIT_COOKIE_BYTES for the site's domain, as
    analytics and session scripts do — so, as on the sites of HotMobile'21 Fig. 4, the
    requests to the site's hosts grow page after page of a session (a fresh browser
    starts without cookies: pageload is unaffected)."""
    domain = plan.resources[0].host.split(".", 1)[1]
    value = np.random.default_rng([seed, k, 0xC00C]).bytes(VISIT_COOKIE_BYTES // 2).hex()
    return (
        '(function(){var n=document.cookie.split("_dchpv").length-1;'
        f'document.cookie="_dchpv"+n+"={value};domain={domain};path=/;max-age=86400;'
        'secure;samesite=lax";})();'
    )


def render_internal(plan: PagePlan, r: Res, seed: int, index: int, k: int) -> bytes:
    """Body of one of the objects an internal page adds (its HTML, its new images)."""
    rng = np.random.default_rng([seed, index, k, r.idx, 0xB0D3])
    if r.kind == "html":
        return _html(plan, r, rng, None, visit_cookie(plan, seed, k))
    return media.jpeg(r.size, rng) if r.fmt == "jpeg" else media.png(r.size, rng)


# --- bodies ---------------------------------------------------------------------------

_WORDS = [
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
    "incididunt",
    "ut",
    "labore",
    "et",
    "dolore",
    "magna",
    "aliqua",
    "enim",
    "ad",
    "minim",
    "veniam",
    "quis",
    "nostrud",
    "exercitation",
    "ullamco",
    "laboris",
    "nisi",
    "aliquip",
    "ex",
    "ea",
    "commodo",
    "consequat",
    "duis",
    "aute",
    "irure",
]


def _text(n: int, rng: np.random.Generator) -> str:
    words = rng.choice(_WORDS, size=max(1, n // 6 + 1))
    return " ".join(str(w) for w in words)[:n]


def _b64(n: int, rng: np.random.Generator) -> str:
    import base64

    return base64.b64encode(rng.bytes(n * 3 // 4 + 3)).decode()[:n]


def _pad_to(body: str, size: int, filler) -> str:  # type: ignore[no-untyped-def]
    need = size - len(body.encode())
    return body + filler(need) if need > 0 else body


def _html(
    plan: PagePlan,
    r: Res,
    rng: np.random.Generator,
    links: list[str] | None = None,
    visit_cookie: str = "",
) -> bytes:
    kids = [plan.resources[i] for i in r.children]
    fonts = [
        f for c in kids if c.kind == "css" for f in c.children if plan.resources[f].kind == "font"
    ]
    bgs = [
        b for c in kids if c.kind == "css" for b in c.children if plan.resources[b].kind == "image"
    ]
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{plan.name} — dchannel synthetic page</title>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
    ]
    if visit_cookie:  # first, so that the page's own requests already carry it
        head.append(f"<script>{visit_cookie}</script>")
    head += [f'<link rel="stylesheet" href="{c.url}">' for c in kids if c.kind == "css"]
    scripts = [c for c in kids if c.kind == "js"]
    # Half the scripts block the parser in <head>, the rest are deferred (as on real pages).
    for i, s in enumerate(scripts):
        attr = "" if i % 2 == 0 else " defer"
        head.append(f'<script src="{s.url}"{attr}></script>')
    head.append("</head><body>")
    body = [f'<h1 class="ff{i}">{plan.name} headline {i}</h1>' for i in fonts]
    body += [f'<div class="bg{i}"></div>' for i in bgs]
    for c in kids:
        if c.kind == "image":
            body.append(f'<img src="{c.url}" width="16" height="16" alt="">')
    if links:  # the site's menu (browsing sessions follow it)
        menu = "".join(f'<li><a href="{u}">page {k + 1}</a></li>' for k, u in enumerate(links))
        body.append(f'<nav><ul class="menu">{menu}</ul></nav>')
    body.append('<div id="dyn"></div>')
    doc = "\n".join(head + body) + "\n"
    end = "\n</body></html>\n"
    doc = _pad_to(doc, r.size - len(end), lambda n: f"<p>{_text(max(0, n - 8), rng)}</p>")
    return (doc + end).encode()


def _css(plan: PagePlan, r: Res, rng: np.random.Generator) -> bytes:
    out = []
    for i in r.children:
        c = plan.resources[i]
        if c.kind == "font":
            fam = f"F{plan.name}{i}"
            out.append(
                f'@font-face{{font-family:"{fam}";src:url("{c.url}") format("woff2");'
                "font-display:swap}"
            )
            out.append(f'.ff{i}{{font-family:"{fam}",sans-serif}}')
        else:
            out.append(f'.bg{i}{{background-image:url("{c.url}");width:16px;height:16px}}')
    text = "\n".join(out) + "\n"

    def filler(n: int) -> str:
        rules = []
        k = 0
        while n > 0:
            rule = (
                f".r{r.idx}x{k}{{margin:{k % 17}px;color:#{int(rng.integers(0, 1 << 24)):06x}}}\n"
            )
            rules.append(rule)
            n -= len(rule)
            k += 1
        return "".join(rules)

    return _pad_to(text, r.size, filler).encode()


def _js(plan: PagePlan, r: Res, rng: np.random.Generator) -> bytes:
    lines = ["(function(){", "var root=document.getElementById('dyn')||document.documentElement;"]
    for i in r.children:
        c = plan.resources[i]
        if c.kind == "js":
            lines.append(
                f"var s{i}=document.createElement('script');s{i}.src='{c.url}';"
                f"document.head.appendChild(s{i});"
            )
        elif c.kind == "image":
            lines.append(
                f"var m{i}=new Image(16,16);m{i}.src='{c.url}';"
                f"(document.body||root).appendChild(m{i});"
            )
        elif c.kind == "json":
            lines.append(
                f"fetch('{c.url}').then(function(r){{return r.json()}}).then(function(d){{"
                "(d.images||[]).forEach(function(u){var m=new Image(16,16);m.src=u;"
                "(document.body||root).appendChild(m);});window.__dchData=(window.__dchData||0)+1;});"
            )
    lines.append(f"window.__dchScripts=(window.__dchScripts||0)+1;var x{r.idx}=0;")
    lines.append(f"for(var k=0;k<200;k++){{x{r.idx}+=k*k%7;}}")
    lines.append("})();")
    code = "\n".join(lines) + "\n"
    return _pad_to(
        code,
        r.size,
        lambda n: f'var _pad{r.idx}="{_b64(max(0, n - 16 - len(str(r.idx))), rng)}";\n',
    ).encode()


def _json(plan: PagePlan, r: Res, rng: np.random.Generator) -> bytes:
    images = [plan.resources[i].url for i in r.children]
    doc: dict[str, object] = {"images": images, "items": []}
    base = len(json.dumps(doc))
    doc["blob"] = _b64(max(0, r.size - base - 12), rng)
    return json.dumps(doc).encode()


def render(plan: PagePlan, r: Res, seed: int, links: list[str] | None = None) -> bytes:
    """Body of one object; `links`: the internal pages a landing page's menu links (and
    then it sets a visit cookie, as they do)."""
    rng = np.random.default_rng([seed, int(plan.name[4:]), r.idx, 0xB0D1])
    if r.kind == "html":
        cookie = visit_cookie(plan, seed, 0) if links else ""
        return _html(plan, r, rng, links, cookie)
    if r.kind == "css":
        return _css(plan, r, rng)
    if r.kind == "js":
        return _js(plan, r, rng)
    if r.kind == "json":
        return _json(plan, r, rng)
    if r.kind == "font":
        return media.woff(r.size, f"F{plan.name}{r.idx}", rng)
    if r.fmt == "jpeg":
        return media.jpeg(r.size, rng)
    return media.png(r.size, rng)


def think_ms(r: Res, rng: np.random.Generator) -> float:
    """Server think time: dynamic HTML/JSON take longer to produce than static files."""
    if r.kind in ("html", "json"):
        return round(float(rng.lognormal(math.log(20.0), 0.5)), 2)
    return round(float(rng.uniform(0.0, 2.0)), 2)


def _headers(r: Res) -> list[tuple[str, str]]:
    return [
        ("content-type", CONTENT_TYPE[r.fmt if r.kind == "image" else r.kind]),
        ("cache-control", "max-age=86400" if r.kind != "html" else "no-cache"),
        ("access-control-allow-origin", "*"),
    ]


def generate(root: Path, seed: int = 1, pages: int = 20, internal_pages: int = 0) -> Corpus:
    """Write the synthetic corpus `synthetic-<seed>` with `pages` pages under `root`.
    `internal_pages` > 0: each site also gets that many internal pages (`siteN-pK`,
    plan_internal) and its landing page a menu linking them; with 0 the corpus is
    byte-identical to one generated without the option."""
    root = Path(root)
    if root.exists():
        shutil.rmtree(root)
    source = f"generator seed={seed} pages={pages}"
    if internal_pages:
        source += f" internal_pages={internal_pages}"
    w = CorpusWriter(root, f"synthetic-{seed}", source)
    rng = np.random.default_rng([seed, 0xA1B2])
    alpn_of: dict[str, list[str]] = {}
    for i in range(pages):
        plan = plan_page(seed, i)
        links = [internal_url(plan, k) for k in range(1, internal_pages + 1)]
        w.add_page(plan.name, plan.entry_url, 0)
        for r in plan.resources:
            if r.host not in alpn_of:
                # ~80 % of origins speak HTTP/2 (Web Almanac HTTP chapter).
                alpn_of[r.host] = ["h2", "http/1.1"] if rng.random() < 0.8 else ["http/1.1"]
                w.add_origin(r.host, alpn_of[r.host])
            body = render(plan, r, seed, links if r.kind == "html" else None)
            w.add_object(r.url, plan.name, body, _headers(r), 200, think_ms(r, rng))
        # Its own RNG: the landing pages' think times stay those of a corpus without them.
        irng = np.random.default_rng([seed, i, 0x1A7F])
        for k in range(1, internal_pages + 1):
            ip = plan_internal(seed, i, k, plan)
            w.add_page(ip.name, ip.entry_url, 0)
            for r in ip.resources[len(plan.resources) :]:
                body = render_internal(ip, r, seed, i, k)
                w.add_object(r.url, ip.name, body, _headers(r), 200, think_ms(r, irng))
    return w.finish()


def cached(seed: int = 1, pages: int = 20, internal_pages: int = 0) -> Corpus:
    """The generated corpus for (seed, pages, internal_pages), built once under the
    cache directory."""
    from dchlab.paths import cache_dir

    name = f"synthetic-{seed}-p{pages}-g{GENERATOR_VERSION}"
    if internal_pages:
        name += f"-i{internal_pages}v{INTERNAL_PAGES_VERSION}"
    root = cache_dir() / "corpora" / name
    stamp = root / ".complete"
    if stamp.exists():
        return load(root, check_bodies=False)
    tmp = root.with_name(f"{root.name}.building-{os.getpid()}")
    generate(tmp, seed, pages, internal_pages)
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    (root / ".complete").write_text("ok\n")
    return load(root, check_bodies=False)
