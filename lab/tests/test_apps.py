"""App profiles, their compilation into a corpus, and the IRT record checks (no network)."""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from dchlab.apps.compile import compile_profile, dag_json, request_url, shell_url
from dchlab.apps.profile import (
    INTERACTIONS,
    ProfileError,
    builtin_profiles,
    load_profile,
    parse_profile,
    session_for,
)
from dchlab.apps.run import app_result, check_interaction
from dchlab.pages.corpus import load as load_corpus
from dchlab.run_config import RunConfig
from dchlab.workloads.rows import APP_KEYS, ROW_KEYS, make_row


def _minimal() -> dict[str, Any]:
    one = {"requests": [{"id": "a", "origin": "api", "path": "/a", "kind": "json", "size": 1000}]}
    return {
        "name": "t",
        "shell": "app",
        "origins": {"app": "app.t.test", "api": "api.t.test", "cdn": "cdn.t.test"},
        "interactions": {
            "launch": {
                "requests": [
                    {"id": "cfg", "origin": "api", "path": "/cfg", "kind": "json", "size": 2000},
                    {
                        "id": "feed",
                        "origin": "api",
                        "path": "/feed",
                        "kind": "json",
                        "size": [5000, 9000],
                        "think_ms": [100, 200],
                        "after": ["cfg"],
                    },
                    {
                        "id": "pic",
                        "count": 3,
                        "origin": "cdn",
                        "path": "/p.jpg",
                        "kind": "image",
                        "size": 20000,
                        "after": ["feed"],
                    },
                ]
            },
            "search": {"requests": [{**one["requests"][0], "path": "/s"}]},
            "item": {"requests": [{**one["requests"][0], "path": "/i"}]},
        },
    }


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    f = tmp_path / "prof.yaml"
    f.write_text(yaml.safe_dump(data))
    return f


def test_builtin_profiles_load_and_look_like_apps() -> None:
    assert builtin_profiles() == ["news", "shopping", "social"]
    for name in builtin_profiles():
        p = load_profile(name)
        assert set(p.interactions) == set(INTERACTIONS)
        assert len(p.origins) >= 4  # shell + API origins + CDN origins
        for it in p.interactions.values():
            jsons = [r for r in it.requests if r.kind == "json"]
            imgs = [r for r in it.requests if r.kind == "image"]
            assert jsons and imgs and it.depth() >= 2
            # Published app traffic: small API answers, thumbnails 2-180 KB (docs/apps.md).
            assert all(800 <= r.size <= 70_000 for r in jsons)
            assert all(2_000 <= r.size <= 180_000 for r in imgs)
        # "search has more server time": its slowest API call beats launch's slowest.
        worst = {i: max(r.think_ms for r in it.requests) for i, it in p.interactions.items()}
        assert worst["search"] > worst["launch"], (name, worst)


def test_expansion_and_ranges_are_deterministic(tmp_path: Path) -> None:
    f = _write(tmp_path, _minimal())
    a, b = load_profile(f), load_profile(f)
    it = a.interactions["launch"]
    assert [r.id for r in it.requests] == ["cfg", "feed", "pic.0", "pic.1", "pic.2"]
    assert [r.path for r in it.requests[2:]] == ["/p-0.jpg", "/p-1.jpg", "/p-2.jpg"]
    feed = it.by_id()["feed"]
    assert 5000 <= feed.size <= 9000 and 100 <= feed.think_ms <= 200
    assert it.by_id()["pic.1"].after == ("feed",)
    assert it.children()["feed"] == ["pic.0", "pic.1", "pic.2"]
    assert it.depth() == 3
    assert [r.size for r in it.requests] == [r.size for r in b.interactions["launch"].requests]
    assert session_for("launch") == ["launch"] and session_for("item") == ["launch", "item"]


def _launch_request(i: int, **changes: Any) -> Any:
    """A mutation: set `changes` on request `i` of the minimal profile's launch."""
    return lambda d: d["interactions"]["launch"]["requests"][i].update(changes)


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (_launch_request(1, after=["cgf"]), "interactions.launch.requests[1].after[0]", "unknown request 'cgf'"),
        (_launch_request(0, after=["feed"]), "interactions.launch.requests", "dependency cycle: cfg -> feed -> cfg"),
        (_launch_request(0, after=["cfg"]), "interactions.launch.requests[0].after[0]", "dependency cycle: cfg -> cfg"),
        (_launch_request(1, after=["pic"]), "interactions.launch.requests[1].after[0]", "is an image"),
        (_launch_request(2, origin="img"), "interactions.launch.requests[2].origin", "unknown origin role 'img'"),
        (_launch_request(0, size=[9000, 10]), "interactions.launch.requests[0].size", "lo <= hi"),
        (_launch_request(0, kind="video"), "interactions.launch.requests[0].kind", "expected one of json, image"),
        (lambda d: d["interactions"].pop("item"), "interactions.item", "missing"),
        (
            lambda d: d["interactions"]["search"]["requests"][0].update(path="/cfg"),
            "interactions.search.requests[a].path",
            "also requested by launch.cfg",
        ),
        (lambda d: d.update(shell="web"), "shell", "unknown origin role"),
        (lambda d: d["origins"].update(api="API_HOST"), "origins.api", "DNS host name"),
    ],
)  # fmt: skip
def test_validation_names_file_and_field(tmp_path: Path, mutate, field: str, words: str) -> None:  # type: ignore[no-untyped-def]
    data = _minimal()
    mutate(data)
    f = _write(tmp_path, data)
    with pytest.raises(ProfileError) as e:
        load_profile(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: {field}: "), msg
    assert words in msg, msg


def test_longer_cycle_is_reported_with_its_path(tmp_path: Path) -> None:
    data = _minimal()
    reqs = data["interactions"]["launch"]["requests"]
    reqs.append({"id": "x", "origin": "api", "path": "/x", "kind": "json", "size": 900})
    reqs.append(
        {"id": "y", "origin": "api", "path": "/y", "kind": "json", "size": 900, "after": ["x"]}
    )
    reqs[-2]["after"] = ["y"]
    with pytest.raises(ProfileError, match=r"dependency cycle: (x -> y -> x|y -> x -> y)"):
        parse_profile(data, Path("p.yaml"))


def test_unknown_profile_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="expected one of news, shopping, social"):
        load_profile("myspace")
    f = tmp_path / "bad.yaml"
    f.write_text("name: t\norigins: {a: [\n")
    with pytest.raises(ProfileError, match=rf"{f}: line \d+: invalid YAML"):
        load_profile(f)


def test_compiled_corpus_serves_the_profile(tmp_path: Path) -> None:
    from PIL import Image

    p = load_profile("social")
    compile_profile(p, tmp_path / "c")
    c = load_corpus(tmp_path / "c", check_bodies=True)  # sizes match the manifest
    assert [o.host for o in c.origins] == sorted(p.origins.values())
    assert all(o.alpn == ["h2", "http/1.1"] for o in c.origins)
    assert c.pages[0].entry_url == shell_url(p)
    objs = {o.url: o for o in c.objects}
    dag = json.loads(c.read_body(objs[shell_url(p) + "dag.json"]))
    assert dag == dag_json(p)
    assert b"/app.js" in c.read_body(objs[shell_url(p)])
    for name, it in p.interactions.items():
        roots = [n for n in dag["interactions"][name]["nodes"] if not n["parents"]]
        assert all("url" in n for n in roots)
        assert all(
            "url" not in n for n in dag["interactions"][name]["nodes"] if n["parents"]
        )  # the app learns those from the API
        for r in it.requests:
            o = objs[request_url(p, r)]
            body = c.read_body(o)
            assert len(body) == r.size and o.think_ms == r.think_ms
            hdr = dict(o.headers)
            assert hdr["timing-allow-origin"] == "*"
            assert hdr["access-control-allow-origin"] == "*"
            if r.kind == "json":
                doc = json.loads(body)
                want = {k: request_url(p, it.by_id()[k]) for k in it.children()[r.id]}
                assert doc["links"] == want and doc["items"]
                assert hdr["cache-control"] == "no-store"
            else:
                img = Image.open(io.BytesIO(body))
                img.load()  # real, decodable image bytes
                assert img.size[0] > 0


def _record(p, name: str, shift_child: float = 0.0) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A synthetic page record of `name` where each level takes 100 ms; `shift_child`
    moves the children of the first JSON node earlier (a dependency violation)."""
    it = p.interactions[name]
    level: dict[str, int] = {}
    for r in it.requests:
        level[r.id] = 1 + max((level[q] for q in r.after), default=0)
    reqs, timing = [], []
    for r in it.requests:
        t = 100.0 * level[r.id]
        if r.after and shift_child:
            t -= shift_child
        reqs.append({"id": r.id, "url": request_url(p, r), "sent": t, "done": t + 95})
        timing.append(
            {
                "url": request_url(p, r),
                "start": t + 0.01,
                "response_end": t + 90,
                "body_size": r.size,
            }
        )
    return {"interaction": name, "irt_ms": 500.0, "error": "", "requests": reqs, "timing": timing}


def test_check_interaction_accepts_order_and_flags_violations() -> None:
    p = load_profile("news")
    ok = check_interaction(p, _record(p, "item"))
    n = len(p.interactions["item"].requests)
    assert ok["answered"] == n and ok["violations"] == 0 and not ok["problems"]
    bad = check_interaction(p, _record(p, "item", shift_child=50.0))
    assert bad["violations"] >= 1
    assert any("before" in x for x in bad["problems"])
    rec = _record(p, "item")
    rec["requests"] = rec["requests"][:-1]  # the last request never sent
    miss = check_interaction(p, rec)
    assert miss["answered"] == n - 1 and "never sent" in miss["problems"][0]


def test_app_result_validity() -> None:
    p = load_profile("news")
    got = app_result(p, "item", {"interactions": [_record(p, "launch"), _record(p, "item")]})
    row = {**asdict(got.outcome), **asdict(got.columns)}
    assert row["valid"] and row["irt_ms"] == 500.0 and row["requests_answered"] == row["requests"]
    assert row["warm_irt_ms"] == {"launch": 500.0}
    assert row["resources_loaded"] == row["requests"] and row["resources_failed"] == 0
    assert set(got.detail) == {"problems", "protocols", "opened"} and got.detail["problems"] == []
    assert row["connections_opened"] == len(got.detail["opened"])
    # the row an app interaction makes: every workload's keys, then the app's
    made = make_row(RunConfig("all-hbc", "embb", "urllc"), "app", "news/item", row)
    assert list(made) == ROW_KEYS + APP_KEYS and made["irt_ms"] == 500.0
    got = app_result(p, "item", {"interactions": [_record(p, "launch")], "error": "item: timeout"})
    row = {**asdict(got.outcome), **asdict(got.columns)}
    assert not row["valid"] and "timeout" in row["invalid_reason"]
    assert row["irt_ms"] is None and row["size_bytes"] is None and got.detail == {}
    got = app_result(
        p, "search", {"interactions": [_record(p, "launch"), _record(p, "search", 50)]}
    )
    row = {**asdict(got.outcome), **asdict(got.columns)}
    assert not row["valid"] and "dependency-order" in row["invalid_reason"]


def test_critical_think_is_the_slowest_chain(tmp_path: Path) -> None:
    from dchlab.apps.run import critical_think_ms

    data = _minimal()
    reqs = data["interactions"]["launch"]["requests"]
    reqs[0]["think_ms"] = 30
    reqs[1]["think_ms"] = 120
    reqs[2]["think_ms"] = 2
    # A second, slower root that nothing depends on: 30 + 120 + 2 = 152 still wins over 140.
    reqs.append(
        {"id": "ads", "origin": "api", "path": "/ads", "kind": "json", "size": 900, "think_ms": 140}
    )
    p = load_profile(_write(tmp_path, data))
    assert critical_think_ms(p, "launch") == 152.0


def test_cli_lists_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from dchlab.commands import app as app_cmd

    ap = argparse.ArgumentParser()
    app_cmd.register(ap.add_subparsers())
    args = ap.parse_args(["app", "--list"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "social:" in out and "shopping:" in out and "news:" in out
    assert "launch   16 requests (4 JSON)" in out
    bad = ap.parse_args(["app", "--interaction", "checkout"])
    assert bad.func(bad) == 2
    assert "unknown checkout" in capsys.readouterr().err
