"""CDN tiers from recorded response headers (dchlab.pages.cdn, docs/formats.md "CDN tiers"),
the manifest's `tier` field, `dch corpus info`'s tier mix and the campaign `cdn:` block."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from dchlab.pages.cdn import (
    CdnSpec,
    CdnSpecError,
    classify,
    parse_hit_ratio,
    parse_spec,
    ratio_draw,
    ratio_tier,
)
from dchlab.pages.corpus import CorpusError, CorpusWriter, load, tier_mix

# Header sets as the CDNs send them (values from responses of real sites, ids shortened).
FASTLY_EDGE_HIT = [
    ("server", "Apache"),
    ("via", "1.1 varnish, 1.1 varnish"),
    ("age", "1523"),
    ("x-served-by", "cache-iad-kjyo7100033-IAD, cache-lhr7370-LHR"),
    ("x-cache", "MISS, HIT"),  # shield missed once long ago; the edge (last) hit
    ("x-cache-hits", "0, 3"),
    ("x-timer", "S1700000000.123456,VS0,VE0"),
]
FASTLY_SHIELD_HIT = [
    ("x-served-by", "cache-iad-kjyo7100033-IAD, cache-lhr7344-LHR"),
    ("x-cache", "HIT, MISS"),  # shield hit, edge missed → parent
    ("x-cache-hits", "1, 0"),
    ("age", "86"),
]
FASTLY_ALL_MISS = [
    ("x-served-by", "cache-iad-kjyo7100033-IAD, cache-lhr7344-LHR"),
    ("x-cache", "MISS, MISS"),
    ("x-cache-hits", "0, 0"),
    ("age", "0"),
]
FASTLY_SINGLE_NODE_HIT = [("x-served-by", "cache-fra-eddf8230073-FRA"), ("x-cache", "HIT")]
# Fastly-Debug:1 responses: per node, edge first; H hit, M miss.
FASTLY_DEBUG = [
    ("fastly-debug-path", "(D cache-lhr7344-LHR 1700000000) (F cache-iad-kjyo7100033-IAD 1700000000)"),
    ("fastly-debug-ttl", "(M cache-lhr7344-LHR - - 0) (H cache-iad-kjyo7100033-IAD 3542.317 86400.000 58)"),
]  # fmt: skip
CLOUDFLARE_HIT = [
    ("server", "cloudflare"),
    ("cf-ray", "7f1a2b3c4d5e6f70-LHR"),
    ("cf-cache-status", "HIT"),
    ("age", "5231"),
]
CLOUDFLARE_DYNAMIC = [("server", "cloudflare"), ("cf-cache-status", "DYNAMIC")]
CLOUDFLARE_REVALIDATED = [("cf-cache-status", "REVALIDATED"), ("age", "0")]
AKAMAI_PARENT = [
    ("x-cache", "TCP_MISS from a23-45-67-89.deploy.akamaitechnologies.com (AkamaiGHost/11.3.0-52062960) (-)"),
    ("x-cache-remote", "TCP_HIT from a184-25-56-10.deploy.akamaitechnologies.com (AkamaiGHost/11.3.0-52062960) (-)"),
]  # fmt: skip
AKAMAI_ORIGIN = [
    ("x-cache", "TCP_MISS from a23-45-67-89.deploy.akamaitechnologies.com (AkamaiGHost/11.3.0-52062960) (-)"),
    ("x-cache-remote", "TCP_MISS from a184-25-56-10.deploy.akamaitechnologies.com (AkamaiGHost/11.3.0-52062960) (-)"),
]  # fmt: skip
AKAMAI_MEM_HIT = [
    ("x-cache", "TCP_MEM_HIT from a23-45-67-89.deploy.akamaitechnologies.com (AkamaiGHost/11.3.0-52062960) (-)"),
]  # fmt: skip
AKAMAI_STATUS_PARENT = [("akamai-cache-status", "Miss from child, Hit from parent")]
AKAMAI_SERVER_TIMING = [
    ("server-timing", "cdn-cache; desc=HIT"),
    ("server-timing", "edge; dur=1"),
    ("server-timing", "origin; dur=0"),
]
AKAMAI_SERVER_TIMING_MISS = [
    ("server-timing", "cdn-cache; desc=MISS, edge; dur=12, origin; dur=87")
]
CLOUDFRONT_HIT = [
    ("x-cache", "Hit from cloudfront"),
    ("via", "1.1 5f3a9c2b1d0e.cloudfront.net (CloudFront)"),
    ("x-amz-cf-pop", "LHR61-P1"),
    ("x-amz-cf-id", "AbCdEf0123456789=="),
    ("age", "300"),
]
CLOUDFRONT_MISS = [("x-cache", "Miss from cloudfront"), ("x-amz-cf-pop", "LHR61-P1")]
CLOUDFRONT_REFRESH = [("x-cache", "RefreshHit from cloudfront"), ("age", "0")]
VARNISH_HIT = [("via", "1.1 varnish (Varnish/6.0)"), ("x-varnish", "32770 3"), ("age", "12")]
VARNISH_MISS = [("via", "1.1 varnish (Varnish/6.0)"), ("x-varnish", "32771"), ("age", "0")]
NGINX_CACHE_MISS = [("server", "nginx"), ("x-cache-status", "MISS")]
AGE_ONLY = [("server", "ECS (lhr/2D9B)"), ("age", "412")]
NO_CDN = [("server", "nginx/1.25.3"), ("content-type", "text/html"), ("age", "0")]


@pytest.mark.parametrize(
    ("headers", "tier"),
    [
        (FASTLY_EDGE_HIT, "edge"),
        (FASTLY_SHIELD_HIT, "parent"),
        (FASTLY_ALL_MISS, "origin"),
        (FASTLY_SINGLE_NODE_HIT, "edge"),
        (FASTLY_DEBUG, "parent"),
        (CLOUDFLARE_HIT, "edge"),
        (CLOUDFLARE_DYNAMIC, "origin"),
        (CLOUDFLARE_REVALIDATED, "origin"),
        (AKAMAI_PARENT, "parent"),
        (AKAMAI_ORIGIN, "origin"),
        (AKAMAI_MEM_HIT, "edge"),
        (AKAMAI_STATUS_PARENT, "parent"),
        (AKAMAI_SERVER_TIMING, "edge"),
        (AKAMAI_SERVER_TIMING_MISS, "origin"),
        (CLOUDFRONT_HIT, "edge"),
        (CLOUDFRONT_MISS, "origin"),
        (CLOUDFRONT_REFRESH, "origin"),
        (VARNISH_HIT, "edge"),
        (VARNISH_MISS, "origin"),
        (NGINX_CACHE_MISS, "origin"),
        (AGE_ONLY, "edge"),
        (NO_CDN, None),
        ([], None),
    ],
)
def test_classify_recorded_header_sets(headers: list[tuple[str, str]], tier: str | None) -> None:
    assert classify(headers) == tier
    # Names are case-insensitive, as recorded by any tool.
    assert classify([(k.upper(), v) for k, v in headers]) == tier


def test_classify_edge_cases() -> None:
    # Several X-Cache fields are one list (RFC 9110 §5.3): shield HIT, edge MISS.
    assert classify([("X-Cache", "HIT"), ("X-Cache", "MISS")]) == "parent"
    # A status that says nothing falls through to the next rule (here Age).
    assert classify([("x-cache", "Error from cloudfront"), ("age", "10")]) == "edge"
    assert classify([("x-cache", "Error from cloudfront")]) is None
    # Cloudflare stale-while-revalidate is still answered by the edge.
    assert classify({"cf-cache-status": "UPDATING"}) == "edge"
    # Quoted desc and the metric-name spelling of Server-Timing.
    assert classify([("server-timing", 'cdn-cache;desc="MISS"')]) == "origin"
    assert classify([("server-timing", "cdn-cache-hit")]) == "edge"
    # X-Cache wins over Age (a MISS with a positive Age is the shield's copy: parent).
    assert classify([("x-cache", "HIT, MISS"), ("age", "30")]) == "parent"


def test_ratio_draw_matches_webreplay() -> None:
    # The same constant is asserted in crates/webreplay/src/cdn.rs (RATIO_A_X_SEED1).
    assert ratio_draw("https://a.test/x", 1) == pytest.approx(0.289800063337906, abs=1e-15)
    assert ratio_tier("https://a.test/x", 1, 0.3, 0.2) == "edge"
    assert ratio_tier("https://a.test/x", 1, 0.28, 0.2) == "parent"
    assert ratio_tier("https://a.test/x", 1, 0.0, 0.0) == "origin"


def _corpus(tmp_path: Path) -> Path:
    w = CorpusWriter(tmp_path / "c", "t", "test")
    w.add_page("p", "https://a.test/")
    w.add_object(
        "https://a.test/", "p", b"<html>", [("content-type", "text/html"), *CLOUDFLARE_HIT]
    )
    w.add_object("https://a.test/s.css", "p", b"x" * 100, AKAMAI_PARENT)
    w.add_object("https://a.test/i.png", "p", b"y" * 1000, FASTLY_ALL_MISS)
    w.add_object("https://a.test/plain.js", "p", b"z" * 10, NO_CDN)
    w.finish()
    return tmp_path / "c"


def test_manifest_tier_roundtrip_and_mix(tmp_path: Path) -> None:
    root = _corpus(tmp_path)
    data = json.loads((root / "manifest.json").read_text())
    assert [o.get("tier") for o in data["objects"]] == ["edge", "parent", "origin", None]
    assert "tier" not in data["objects"][3], "no CDN headers: no tier field"
    c = load(root)
    assert [o.tier for o in c.objects] == ["edge", "parent", "origin", None]
    assert tier_mix(c) == [
        {"source": "headers", "tier": "edge", "objects": 1, "bytes": 6},
        {"source": "headers", "tier": "parent", "objects": 1, "bytes": 100},
        {"source": "headers", "tier": "origin", "objects": 1, "bytes": 1000},
        {"source": "ratio", "tier": "unset", "objects": 1, "bytes": 10},
    ]
    # With a ratio the unrecorded object gets webreplay's draw.
    want = ratio_tier("https://a.test/plain.js", 7, 0.5, 0.25)
    assert tier_mix(c, (0.5, 0.25), 7)[-1] == {
        "source": "ratio", "tier": want, "objects": 1, "bytes": 10,
    }  # fmt: skip


def test_old_manifest_without_tiers_loads_and_bad_tier_is_named(tmp_path: Path) -> None:
    root = _corpus(tmp_path)
    data = json.loads((root / "manifest.json").read_text())
    for o in data["objects"]:
        o.pop("tier", None)
    (root / "manifest.json").write_text(json.dumps(data))
    assert all(o.tier is None for o in load(root).objects)
    data["objects"][1]["tier"] = "shield"
    (root / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(CorpusError, match=r"\$\.objects\[1\]\.tier: expected one of edge"):
        load(root)


def test_har_import_keeps_the_cdn_tier(tmp_path: Path) -> None:
    from dchlab.pages.har import import_har

    def entry(url: str, ctype: str, text: str, extra: list[tuple[str, str]]) -> dict:  # type: ignore[type-arg]
        hdrs = [{"name": "Content-Type", "value": ctype}] + [
            {"name": k, "value": v} for k, v in extra
        ]
        return {
            "pageref": "page_1",
            "request": {"method": "GET", "url": url},
            "response": {
                "status": 200,
                "headers": hdrs,
                "content": {"mimeType": ctype, "text": base64.b64encode(text.encode()).decode(), "encoding": "base64"},
            },
            "timings": {"wait": 1.0},
        }  # fmt: skip

    har = {
        "log": {
            "pages": [{"id": "page_1", "title": "x"}],
            "entries": [
                entry("https://h.test/", "text/html", '<img src="/a.png">', CLOUDFRONT_MISS),
                entry("https://h.test/a.png", "image/png", "PNG", FASTLY_SHIELD_HIT),
            ],
        }
    }
    (tmp_path / "p.har").write_text(json.dumps(har))
    import_har([tmp_path / "p.har"], tmp_path / "out")
    tiers = {o.url: o.tier for o in load(tmp_path / "out").objects}
    assert tiers == {"https://h.test/": "origin", "https://h.test/a.png": "parent"}


def test_corpus_info_shows_tier_mix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dchlab.cli import main

    root = _corpus(tmp_path)
    assert main(["corpus", "info", str(root), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["page"] == "p"
    mix = {(r["source"], r["tier"]): (r["objects"], r["bytes"]) for r in lines[-1]["tier_mix"]}
    assert mix == {
        ("headers", "edge"): (1, 6),
        ("headers", "parent"): (1, 100),
        ("headers", "origin"): (1, 1000),
        ("ratio", "unset"): (1, 10),
    }
    assert main(["corpus", "info", str(root), "--cdn-hit-ratio", "edge=0,parent=0"]) == 0
    out = capsys.readouterr().out
    assert "CDN tiers" in out and "ratio" in out and "origin" in out
    assert main(["corpus", "info", str(root), "--cdn-hit-ratio", "edge=0.9,parent=0.2"]) == 2
    assert "exceeds 1" in capsys.readouterr().err


def test_cdn_spec_parsing() -> None:
    s = parse_spec(
        {"delays_ms": {"edge": 0, "parent": 10, "origin": 50}, "hit_ratio": {"edge": 0.6, "parent": 0.25}, "seed": 3},
        "x.yaml: cdn",
    )  # fmt: skip
    assert s == CdnSpec((0.0, 10.0, 50.0), (0.6, 0.25), 3)
    assert s.webreplay_args() == (
        "--cdn-delays-ms", "edge=0,parent=10,origin=50",
        "--cdn-hit-ratio", "edge=0.6,parent=0.25",
        "--cdn-seed", "3",
    )  # fmt: skip
    assert parse_spec({}, "cdn") == CdnSpec()
    assert parse_spec({"delays_ms": {"origin": 120}}, "cdn").delays_ms == (0.0, 10.0, 120.0)
    for raw, want in [
        ([], "cdn: expected a mapping"),
        ({"ratio": 1}, "cdn.ratio: unknown key"),
        ({"delays_ms": {"shield": 1}}, "cdn.delays_ms.shield: not a tier"),
        ({"delays_ms": {"origin": -1}}, "cdn.delays_ms.origin: expected milliseconds"),
        ({"hit_ratio": {"edge": 0.9, "parent": 0.2}}, "cdn.hit_ratio: edge 0.9 + parent 0.2 exceeds 1"),
        ({"hit_ratio": {"origin": 0.1}}, "cdn.hit_ratio.origin: give edge and parent only"),
        ({"hit_ratio": {"edge": "most"}}, "cdn.hit_ratio.edge: expected a share"),
        ({"seed": -1}, "cdn.seed: expected a non-negative integer"),
    ]:  # fmt: skip
        with pytest.raises(CdnSpecError, match=want.replace("+", r"\+").replace(".", r"\.")):
            parse_spec(raw, "cdn")
    assert parse_hit_ratio("edge=0.6, parent=0.25") == (0.6, 0.25)
    assert parse_hit_ratio("parent=0.5") == (0.0, 0.5)
    with pytest.raises(CdnSpecError, match="not a number"):
        parse_hit_ratio("edge=lots")


def test_campaign_cdn_block_reaches_the_testbed_config() -> None:
    from dchlab.experiments.campaign import CampaignError, parse_campaign
    from dchlab.workloads.measure import RunSpec, testbed_config

    d = {
        "name": "cdn-check",
        "schemes": ["obj-priority", "hbc-only"],
        "conditions": [{"name": "c", "hbc": "embb", "llc": "urllc"}],
        "workload": {"kind": "pageload"},
        "analysis": {"baseline": "hbc-only"},
        "cdn": {
            "delays_ms": {"parent": 10, "origin": 50},
            "hit_ratio": {"edge": 0.6, "parent": 0.25},
        },
    }
    c = parse_campaign(d, Path("x.yaml"))
    assert c.cdn == CdnSpec((0.0, 10.0, 50.0), (0.6, 0.25), 1)
    no_cdn = {k: v for k, v in d.items() if k != "cdn"}
    assert parse_campaign(no_cdn, Path("x.yaml")).cdn is None
    with pytest.raises(CampaignError, match=r"x\.yaml: cdn\.hit_ratio\.edge: expected a share"):
        parse_campaign({**d, "cdn": {"hit_ratio": {"edge": 2}}}, Path("x.yaml"))
    cfg = testbed_config(
        RunSpec("hbc-only", "embb", "urllc", webreplay_args=c.cdn.webreplay_args()), "p"
    )
    assert list(cfg.webreplay_args) == [
        "--cdn-delays-ms", "edge=0,parent=10,origin=50",
        "--cdn-hit-ratio", "edge=0.6,parent=0.25",
        "--cdn-seed", "1",
    ]  # fmt: skip
    assert cfg.describe()["webreplay_args"] == list(cfg.webreplay_args)
