"""Campaign schema validation, the results store and the runner's cell bookkeeping."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from dchlab.experiments import store
from dchlab.experiments.campaign import CampaignError, load_campaign, parse_size
from dchlab.experiments.runner import plan, run_campaign
from dchlab.paths import shared_data

REPO = Path(__file__).resolve().parents[2]

GOOD = """
name: t-bulk
description: test campaign (bulk sizes)
schemes: [all-hbc, {label: dch-x2, scheme: dchannel, agent_args: [--hbc-rtt-scale, "2"]}]
conditions:
  - {name: embb, hbc: "fixed:40ms/200mbit", llc: urllc, x: {hbc_rtt_ms: 40}}
  - {name: embb60, hbc: "fixed:60ms/200mbit", llc: urllc, agent_args: "--reorder off"}
workload: {kind: bulk, sizes: [10KB, 1MB]}
trials: 2
seed: 3
quick: {conditions: [embb], trials: 1, sizes: [10KB]}
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_good_campaign_parses(tmp_path):
    c = load_campaign(write(tmp_path, GOOD), check_channels=False)
    assert [s.label for s in c.schemes] == ["all-hbc", "dch-x2"]
    assert c.scheme("dch-x2").agent_args == ("--hbc-rtt-scale", "2")
    assert c.conditions[1].agent_args == ("--reorder", "off")
    assert c.workload.sizes == (10_000, 1_000_000)
    q = c.quick()
    assert q.is_quick and q.trials == 1 and [x.name for x in q.conditions] == ["embb"]
    assert q.workload.sizes == (10_000,)
    assert q.rerun_command().endswith("--quick")


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"trials": 0}, "trials"),
        ({"bogus": 1}, "bogus"),
        ({"schemes": []}, "schemes"),
        ({"schemes": ["all-hbc", "all-hbc"]}, "duplicate label"),
        ({"conditions": [{"name": "a", "hbc": "embb"}]}, "conditions[0].llc"),
        (
            {"conditions": [{"name": "a", "hbc": "embb", "llc": "urllc", "cc": "vegas"}]},
            "conditions[0].cc",
        ),
        ({"workload": {"kind": "video"}}, "workload.kind"),
        ({"workload": {"kind": "bulk", "sizes": ["ten"]}}, "workload.sizes[0]"),
        ({"workload": {"kind": "pageload", "pages": "all"}}, "workload.pages"),
        ({"workload": {"kind": "curl-phases"}}, "workload.url"),
        ({"workload": {"kind": "pageload", "speed_index": "yes"}}, "workload.speed_index"),
        (
            {"workload": {"kind": "bulk", "sizes": ["1KB"], "speed_index": True}},
            "workload.speed_index",
        ),
        ({"workload": {"kind": "pageload", "timeout_s": float("nan")}}, "workload.timeout_s"),
        ({"workload": {"kind": "pageload", "timeout_s": float("inf")}}, "workload.timeout_s"),
        ({"quick": {"schemes": ["nope"]}}, "quick.schemes[0]"),
        ({"analysis": {"kind": "gain", "baseline": "all-llc"}}, "analysis.baseline"),
        ({"analysis": {"kind": "gain", "llc_usage": "yes"}}, "analysis.llc_usage"),
        (
            {"analysis": {"kind": "gain", "versus": {"candidate": "nope", "reference": "x"}}},
            "analysis.versus.candidate",
        ),
        ({"analysis": {"kind": "gain", "versus": {"cand": "dchannel"}}}, "analysis.versus"),
        ({"seed": -1}, "seed"),
        (
            {"schemes": [{"scheme": "dchannel", "agent_args": {"reorder": "off"}}]},
            "schemes[0].agent_args",
        ),
        (
            {"schemes": [{"scheme": "dchannel", "client_args": [["--reorder"]]}]},
            "schemes[0].client_args",
        ),
        (
            {"schemes": [{"scheme": "dchannel", "gateway_args": {"--reorder": "off"}}]},
            "schemes[0].gateway_args",
        ),
        (
            {"schemes": [{"scheme": "dchannel", "proxy_args": ["--x"]}]},
            "schemes[0].proxy_args",
        ),
        (
            {"conditions": [{"name": "a", "hbc": "embb", "llc": "urllc", "gateway_args": 5}]},
            "conditions[0].gateway_args",
        ),
        (
            {"conditions": [{"name": "a", "hbc": "embb", "llc": "urllc", "client_args": True}]},
            "conditions[0].client_args",
        ),
    ],
)
def test_schema_errors_name_file_and_field(tmp_path, patch, where):
    data = yaml.safe_load(GOOD)
    data.update(patch)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(CampaignError) as e:
        load_campaign(p, check_channels=False)
    assert str(p) in str(e.value)
    assert where in str(e.value)


def test_unreadable_and_non_yaml_files(tmp_path):
    with pytest.raises(CampaignError, match="cannot read"):
        load_campaign(tmp_path / "missing.yaml")
    with pytest.raises(CampaignError, match="not valid YAML"):
        load_campaign(write(tmp_path, "name: [unclosed"))
    with pytest.raises(CampaignError, match="top level"):
        load_campaign(write(tmp_path, "- a list"))


def test_parse_size():
    assert parse_size("10KB", "x") == 10_000
    assert parse_size("1.5MB", "x") == 1_500_000
    assert parse_size(123, "x") == 123
    with pytest.raises(CampaignError):
        parse_size("1TB", "x")


STANDIN = REPO / ".cache" / "cellreplay-standin" / "tmobile-lte"
CELLREPLAY_SET = REPO / "crates" / "chanemu" / "testdata" / "cellreplay"


def _provide_inputs(path: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What shipped campaigns name outside the repository, as `dch run` from the root
    would find it: CellReplay's archive (copies of chanemu's synthetic set in the
    layout docs/traces.md expects) and the derived CellReplay stand-in."""
    monkeypatch.chdir(REPO)
    text = path.read_text()
    if "$DCH_CELLREPLAY_TRACES" in text:
        for op in ("tmobile", "verizon"):
            for s in ("stationary", "walking", "driving"):
                shutil.copytree(CELLREPLAY_SET, tmp / "cr" / op / s)
        monkeypatch.setenv("DCH_CELLREPLAY_TRACES", str(tmp / "cr"))
    if str(STANDIN.relative_to(REPO)) in text and not STANDIN.is_dir():
        if shared_data() is None:
            pytest.skip("../shared/data absent: the CellReplay stand-in is derived from it")
        from dchlab.traces.cellreplay_derive import derive

        traces = shared_data() / "traces"
        derive(
            traces / "mahimahi" / "TMobile-LTE-short.up",
            traces / "mahimahi" / "TMobile-LTE-short.down",
            traces / "imc23-driving-rtt" / "tmobile",
            STANDIN,
        )


@pytest.mark.parametrize(
    "path", sorted((REPO / "experiments").glob("*.yaml")), ids=lambda p: p.name
)
def test_shipped_campaigns_are_valid(path, tmp_path, monkeypatch):
    _provide_inputs(path, tmp_path, monkeypatch)
    c = load_campaign(path)
    q = c.quick()
    assert q.trials <= c.trials
    assert c.paper, f"{path.name}: the paper's numbers belong in the campaign (paper:)"


def test_store_appends_provenance_and_grows_columns(tmp_path):
    db = tmp_path / "s.duckdb"
    store.append_rows(
        [
            {
                "scheme": "dchannel:alpha=0.5",
                "hbc": "embb",
                "llc": "urllc",
                "plt_ms": 12.5,
                "stats": {"x": [1]},
            }
        ],
        campaign="c1",
        store=db,
    )
    store.append_rows(
        [{"scheme": "all-hbc", "brand_new": 3, "valid": False}], campaign="c1", store=db
    )
    rows = store.load_rows("c1", store=db)
    assert len(rows) == 2
    a, b = rows
    assert a["scheme_name"] == "dchannel" and store.decode_json(a["scheme_params"]) == {
        "alpha": 0.5
    }
    assert store.decode_json(a["profiles"]) == {"hbc": "embb", "llc": "urllc"}
    assert store.decode_json(a["stats"]) == {"x": [1]}
    assert a["code_rev"] and a["kernel_version"] and a["hostname"] and a["ts"]
    assert a["brand_new"] is None and b["brand_new"] == 3.0 and b["valid"] is False
    with pytest.raises(store.StoreError, match="BOOLEAN"):
        store.append_rows([{"valid": "yes"}], store=db)
    with pytest.raises(store.StoreError, match="identifier"):
        store.append_rows([{"bad key": 1}], store=db)
    assert len(store.load_rows(store=db)) == 2  # the failed appends wrote nothing


def _fake_bulk(calls):
    """TEST DATA ONLY: a deterministic stand-in for the bulk workload, to exercise the
    runner's bookkeeping without a testbed (the real one is tested with real loads)."""

    def execute(c, g, pool=None):
        calls.append((g.condition.name, g.trial, g.scheme.label, tuple(g.items)))
        if g.scheme.label == "dch-x2" and g.trial == 1 and g.condition.name == "embb60":
            raise RuntimeError("testbed exploded")
        return [
            {"size_bytes": 1, "total_ms": 100.0 + g.trial, "valid": True, "test_data": True}
            for _ in g.items
        ]

    return execute


def test_runner_resumes_and_retries_failed_cells(tmp_path):
    c = load_campaign(write(tmp_path, GOOD), check_channels=False)
    db = tmp_path / "r.duckdb"
    calls: list = []
    s1 = run_campaign(c, store_path=db, executor=_fake_bulk(calls))
    assert s1.total_cells == 2 * 2 * 2 * 2  # conditions × trials × schemes × sizes
    assert (s1.measured, s1.failed, s1.skipped) == (14, 2, 0)
    assert "testbed exploded" in s1.errors[0]
    assert len(calls) == 16  # one call per cell
    # condition -> trial -> item -> scheme, the scheme order rotating
    assert calls[:4] == [
        ("embb", 0, "all-hbc", ("10KB",)),
        ("embb", 0, "dch-x2", ("10KB",)),
        ("embb", 0, "dch-x2", ("1MB",)),
        ("embb", 0, "all-hbc", ("1MB",)),
    ]
    calls.clear()
    s2 = run_campaign(c, store_path=db, executor=_fake_bulk(calls))
    assert s2.skipped == 14
    assert calls == [("embb60", 1, "dch-x2", ("10KB",)), ("embb60", 1, "dch-x2", ("1MB",))]
    rows = store.load_rows("t-bulk", store=db)
    assert {r["arm"] for r in rows} == {"all-hbc", "dch-x2"}
    assert all(r["cell"].count("|") == 3 for r in rows)
    # quick is a subset of the same cells: nothing left to do
    groups, total = plan(c.quick(), store.done_cells("t-bulk", None, db))
    assert total == 2 and groups == []


@pytest.mark.parametrize(
    ("paper", "where"),
    [
        ({"values": {"nope": {"all-hbc": 1}}}, "paper.values.nope"),
        ({"values": {"embb": {"ghost": 1}}}, "paper.values.embb.ghost"),
        ({"values": {"embb": {"all-hbc": "fast"}}}, "paper.values.embb.all-hbc"),
        ({"values": {"embb": {"all-hbc": {"plt_ms": None}}}}, "paper.values.embb.all-hbc.plt_ms"),
        ({"figure": 3}, "paper.figure"),
    ],
)
def test_paper_values_must_name_real_conditions_and_schemes(tmp_path, paper, where):
    data = yaml.safe_load(GOOD)
    data["paper"] = paper
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(CampaignError, match=re.escape(where)):
        load_campaign(p, check_channels=False)


@pytest.mark.parametrize("kind", [["gain"], {"gain": 1}, 3])
def test_analysis_kind_that_is_not_a_name_is_refused(tmp_path, kind):
    data = yaml.safe_load(GOOD)
    data["analysis"] = {"kind": kind}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(CampaignError, match=re.escape("analysis.kind")):
        load_campaign(p, check_channels=False)


def test_bad_channel_spec_is_reported_with_its_field(tmp_path):
    pytest.importorskip("dchlab.traces.profiles")
    data = yaml.safe_load(GOOD)
    data["conditions"][1]["llc"] = "warp:9ms"
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(CampaignError, match=re.escape("conditions[1].llc")):
        load_campaign(p)


@pytest.mark.parametrize(
    ("llc", "error"),
    [
        ("fixed:0ms/unlimited", None),  # chanemu reads it; so must the campaign (floor.yaml)
        ("fixed:2.5ms/0.5mbit", None),
        ("fixed:5s/2mbit", "RTT must end in `ms`"),
        ("fixed:5ms/0mbit", "rate must be > 0"),
    ],
)
def test_fixed_channels_follow_the_one_grammar(tmp_path, llc, error):
    data = yaml.safe_load(GOOD)
    data["conditions"][1]["llc"] = llc
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    if error is None:
        assert load_campaign(p).conditions[1].llc == llc
    else:
        with pytest.raises(CampaignError, match=re.escape(error)) as exc:
            load_campaign(p)
        assert "conditions[1].llc" in str(exc.value)


def test_lab_failures_are_retried_but_invalid_loads_are_measurements(tmp_path):
    c = load_campaign(write(tmp_path, GOOD), check_channels=False).quick()
    db = tmp_path / "f.duckdb"

    def execute(c, g, pool=None):  # TEST DATA ONLY
        if g.scheme.label == "all-hbc":
            return [{"valid": False, "invalid_reason": "testbed: binary 'chanemu' not found"}]
        return [{"valid": False, "invalid_reason": "1 resource failed", "test_data": True}]

    s = run_campaign(c, store_path=db, executor=execute)
    assert (s.measured, s.invalid, s.failed) == (1, 1, 1)
    assert store.done_cells("t-bulk", None, db) == {"embb|10KB|t0|dch-x2"}


PER_ROLE = """
name: t-roles
schemes:
  - all-hbc
  - {label: "off", scheme: dchannel, agent_args: [--reorder, "off"]}
  - {label: client-only, scheme: dchannel, gateway_args: [--reorder, "off"]}
  - {label: mixed, scheme: dchannel, client_args: "--reorder-timeout-ms 50"}
conditions:
  - {name: a, hbc: "fixed:40ms/200mbit", llc: urllc, gateway_args: [--probe-interval-ms, 250]}
workload: {kind: bulk, sizes: [10KB]}
"""


def test_per_role_agent_args_parse_and_reach_the_run_spec(tmp_path):
    pytest.importorskip("dchlab.workloads.api")
    from dchlab.experiments.runner import cell_config

    c = load_campaign(write(tmp_path, PER_ROLE), check_channels=False)
    assert c.scheme("client-only").gateway_args == ("--reorder", "off")
    assert c.scheme("client-only").client_args == () == c.scheme("client-only").agent_args
    assert c.scheme("mixed").client_args == ("--reorder-timeout-ms", "50")
    assert c.conditions[0].gateway_args == ("--probe-interval-ms", "250")
    groups, _ = plan(c, set())
    specs = {g.scheme.label: cell_config(c, g) for g in groups}
    # scheme flags first, then the condition's, per role
    assert specs["client-only"].gateway_args == (
        "--reorder", "off", "--probe-interval-ms", "250",
    )  # fmt: skip
    assert specs["client-only"].client_args == ()
    assert specs["off"].agent_args == ("--reorder", "off")
    assert specs["off"].gateway_args == ("--probe-interval-ms", "250")
    assert specs["mixed"].client_args == ("--reorder-timeout-ms", "50")


def test_per_role_agent_args_are_stored_with_each_row(tmp_path):
    c = load_campaign(write(tmp_path, PER_ROLE), check_channels=False)
    db = tmp_path / "roles.duckdb"

    def execute(c, g, pool=None):  # TEST DATA ONLY
        return [{"valid": True, "total_ms": 1.0, "test_data": True} for _ in g.items]

    run_campaign(c, store_path=db, executor=execute)
    rows = {r["arm"]: r for r in store.load_rows("t-roles", store=db)}

    def flags(arm: str, key: str) -> list[str]:
        v = rows[arm][key]  # lists are stored as JSON text
        return list(json.loads(v) if isinstance(v, str) else v)

    assert flags("client-only", "gateway_args") == [
        "--reorder",
        "off",
        "--probe-interval-ms",
        "250",
    ]
    assert flags("client-only", "client_args") == []
    assert flags("mixed", "client_args") == ["--reorder-timeout-ms", "50"]


def test_fig5_table3_has_the_three_reorder_arms():
    c = load_campaign(REPO / "experiments" / "fig5_table3.yaml")
    off, client, both = (c.scheme(x) for x in ("reorder-off", "reorder-client", "reorder-both"))
    assert off.agent_args == ("--reorder", "off") and not off.client_args + off.gateway_args
    # reordering at the client only: the gateway's buffer off, the client's at its default (on)
    assert client.gateway_args == ("--reorder", "off")
    assert not client.agent_args + client.client_args
    assert "off" not in both.agent_args + both.client_args + both.gateway_args
    assert {s.label for s in c.quick().schemes} >= {"reorder-off", "reorder-client", "reorder-both"}


def test_fig3_has_the_object_level_schemes():
    from dchlab.testbed import get_scheme

    c = load_campaign(REPO / "experiments" / "fig3.yaml")
    labels = [s.label for s in c.schemes]
    assert {"obj-size:3000", "obj-size:6000", "obj-oracle", "ians"} <= set(labels)
    assert all(get_scheme(c.scheme(x).scheme).kind == "proxy" for x in labels if "obj" in x)
    assert c.workload.kind == "pageload" and c.workload.corpus  # obj-oracle needs a corpus
    q = c.quick()
    assert [s.label for s in q.schemes] == ["all-hbc", "obj-oracle", "dchannel", "ideal"]


@pytest.mark.parametrize(
    "path", sorted((REPO / "experiments").glob("*.yaml")), ids=lambda p: p.name
)
def test_shipped_campaigns_use_known_testbed_schemes(path):
    from dchlab.testbed import TestbedError, get_scheme

    for s in load_campaign(path, check_channels=False).schemes:
        try:
            get_scheme(s.scheme)
        except TestbedError as e:
            pytest.fail(f"{path.name}: {s.label}: {e}")


def test_speed_index_is_the_campaign_files_choice(tmp_path):
    from dchlab.experiments.runner import cell_config

    data = yaml.safe_load(GOOD)
    data["workload"] = {"kind": "pageload", "corpus": "synthetic:1", "speed_index": True}
    on = load_campaign(write(tmp_path, yaml.safe_dump(data)), check_channels=False)
    data["workload"].pop("speed_index")
    off = load_campaign(write(tmp_path, yaml.safe_dump(data)), check_channels=False)
    g_on, g_off = plan(on, set())[0][0], plan(off, set())[0][0]
    assert cell_config(on, g_on).speed_index is True
    # not asked: off, whatever $DCH_SPEED_INDEX says (a campaign is reproducible)
    assert cell_config(off, g_off).speed_index is False


def test_hindsight_names_schemes_of_the_campaign(tmp_path):
    import textwrap

    text = """
    name: h
    schemes: [all-hbc, dchannel, asap]
    conditions: [{name: c, hbc: embb, llc: urllc}]
    workload: {kind: pageload, corpus: synthetic:1, pages: 1}
    analysis: {kind: gain, baseline: all-hbc, hindsight: HINDSIGHT}
    """
    p = tmp_path / "h.yaml"
    p.write_text(textwrap.dedent(text.replace("HINDSIGHT", "[dchannel, asap]")))
    assert load_campaign(p, check_channels=False).analysis["hindsight"] == ["dchannel", "asap"]
    for bad in ("[dchannel, ideal]", "[dchannel]", "dchannel"):
        p.write_text(textwrap.dedent(text.replace("HINDSIGHT", bad)))
        with pytest.raises(CampaignError, match=r"analysis.hindsight.*at least two scheme labels"):
            load_campaign(p, check_channels=False)
