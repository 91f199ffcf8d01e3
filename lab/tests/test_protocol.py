"""`protocol: h2 | h3 | recorded` (dchlab.protocol, issue 39): the refusals at
config and campaign-parse time, what the replay server and Chromium are told, the row's
responses by protocol and the validity rule under h3 (no root needed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from dchlab import protocol
from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.experiments.run_quality import reason_kind
from dchlab.run_config import RunConfig, testbed_config
from dchlab.testbed.config import TestbedConfig
from dchlab.workloads.chromium_pipe import browser_flags
from dchlab.workloads.rows import column_types
from dchlab.workloads.validity import judge, page_outcome

PAGE = "https://www.ex.com/"


def _res(protocols: dict[str, int], failed: list[list[str]] | None = None) -> dict:  # type: ignore[type-arg]
    failed = failed or []
    return {
        "valid": not failed,
        "invalid_reason": f"{len(failed)} failed resources" if failed else "",
        "document_error": "",
        "resources_failed": len(failed),
        "failed": failed,
        "resources_loaded": sum(protocols.values()),
        "protocols": protocols,
    }


def test_default_is_todays_tcp() -> None:
    run = RunConfig("dchannel", "MM-S", "urllc")
    assert run.protocol == "h2" == protocol.DEFAULT
    cfg = testbed_config(run, "p")
    assert cfg.protocol == "h2" and cfg.describe()["protocol"] == "h2"
    assert protocol.webreplay_args("h2") == [] and browser_flags(cfg) == []
    assert protocol.webreplay_args("recorded") == []  # no corpus records QUIC origins


@pytest.mark.parametrize("scheme", ["mptcp", "ians", "passthrough", "obj-priority"])
def test_tcp_only_schemes_are_refused_under_h3(scheme: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=rf"scheme '{scheme}' cannot run under protocol h3"):  # fmt: skip
        RunConfig(scheme, "MM-S", "urllc", protocol="h3")
    # under h2 and recorded they run as always
    assert RunConfig(scheme, "MM-S", "urllc", protocol="recorded").protocol == "recorded"
    assert RunConfig(scheme, "MM-S", "urllc").protocol == "h2"


def test_packet_schemes_run_under_h3_and_a_bad_value_is_named() -> None:
    for scheme in ("all-hbc", "dchannel", "pkt-state", "asap", "ideal", "pkt-size:750"):
        assert RunConfig(scheme, "MM-S", "urllc", protocol="h3").protocol == "h3"
    with pytest.raises(protocol.ProtocolError, match="protocol: expected one of h2, h3, recorded, got 'quic'"):  # fmt: skip
        RunConfig("dchannel", "MM-S", "urllc", protocol="quic")


def test_h3_tells_webreplay_and_chromium(tmp_path: Path) -> None:
    assert protocol.webreplay_args("h3") == ["--h3-port", "443"]
    cfg = TestbedConfig(protocol="h3", hosts={"b.test": "198.19.128.9", "a.test": "198.19.128.8"})
    flags = browser_flags(cfg)
    # every testbed host (server.test is always there), sorted; QUIC from the first request
    assert flags == [
        "--enable-quic",
        "--origin-to-force-quic-on=a.test:443,b.test:443,server.test:443",
    ]
    assert browser_flags(dataclasses.replace(cfg, protocol="recorded")) == []


def test_rows_count_responses_by_protocol() -> None:
    out = page_outcome(_res({"h3": 40, "h2": 2, "http/1.1": 1, "?": 1}), [], None, 0, "h2")
    assert (out.responses_h3, out.responses_h2, out.responses_other) == (40, 2, 2)
    assert out.valid  # under h2 the mix is recorded, never judged
    types = column_types()
    assert types["protocol"] == "VARCHAR"
    assert {types[c] for c in ("responses_h3", "responses_h2", "responses_other")} == {"DOUBLE"}


def test_under_h3_a_response_over_tcp_invalidates_the_load() -> None:
    assert judge(_res({"h3": 43}), [], protocol="h3").valid
    v = judge(_res({"h3": 40, "h2": 3}), [], protocol="h3")
    assert not v.valid and v.invalid_reason == "3 responses fell back to TCP (and 40 over QUIC)"
    assert reason_kind(v.invalid_reason) == "responses fell back to TCP"
    v = judge(_res({"h3": 40, "http/1.1": 1}), [], protocol="h3")
    assert v.invalid_reason.startswith("1 responses fell back to TCP")
    assert judge(_res({"h3": 40, "h2": 3}), [], protocol="h2").valid


def test_under_h3_a_request_quic_could_not_carry_is_named() -> None:
    """An origin that does not answer QUIC: Chromium, forced onto QUIC, fails the
    requests with net::ERR_QUIC_HANDSHAKE_FAILED (measured, dchlab.protocol)."""
    failed = [["https://img.ex.com/a.png", "net::ERR_QUIC_HANDSHAKE_FAILED"]]
    v = judge(_res({"h3": 10}, failed), [], protocol="h3")
    assert not v.valid
    assert v.invalid_reason == (
        "1 requests failed over QUIC (first: https://img.ex.com/a.png "
        "net::ERR_QUIC_HANDSHAKE_FAILED)"
    )
    assert reason_kind(v.invalid_reason) == "requests failed over QUIC"
    # even a failure the record excuses is no excuse for QUIC failing
    assert not judge(_res({"h3": 10}, failed), ["https://img.ex.com/a.png"], protocol="h3").valid


CAMPAIGN = """
name: t-h3
schemes: [all-hbc, dchannel]
conditions:
  - {name: embb, hbc: "fixed:40ms/200mbit", llc: urllc}
workload: {kind: bulk, sizes: [10KB]}
"""


def _campaign(tmp_path: Path, **patch: object) -> Path:
    data = yaml.safe_load(CAMPAIGN)
    data.update(patch)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_campaign_protocol_field(tmp_path: Path) -> None:
    assert load_campaign(_campaign(tmp_path), check_channels=False).protocol == "h2"
    c = load_campaign(_campaign(tmp_path, protocol="h3"), check_channels=False)
    assert c.protocol == "h3"
    from dchlab.experiments.runner import cell_config, plan

    assert {cell_config(c, g).protocol for g in plan(c, set())[0]} == {"h3"}
    p = _campaign(tmp_path, protocol="h4")
    with pytest.raises(CampaignError, match=rf"{p}: protocol: expected one of h2, h3, recorded, got 'h4'"):  # fmt: skip
        load_campaign(p, check_channels=False)


def test_campaign_refuses_tcp_only_schemes_under_h3(tmp_path: Path) -> None:
    p = _campaign(tmp_path, protocol="h3", schemes=["all-hbc", "dchannel", "mptcp"])
    with pytest.raises(CampaignError) as e:
        load_campaign(p, check_channels=False)
    assert str(e.value).startswith(f"{p}: schemes[2]: scheme 'mptcp' cannot run under protocol h3")
    p = _campaign(tmp_path, protocol="h3", schemes=["all-hbc", {"label": "i", "scheme": "ians"}])
    with pytest.raises(CampaignError, match=r"schemes\[1\]: scheme 'ians' cannot run under protocol h3 \(the object-level schemes"):  # fmt: skip
        load_campaign(p, check_channels=False)
    p = _campaign(tmp_path, protocol="recorded", schemes=["all-hbc", "mptcp", "ians"])
    assert load_campaign(p, check_channels=False).protocol == "recorded"


def test_arms_of_both_protocols_pair_per_page_and_trial(tmp_path: Path) -> None:
    """An arm's own `protocol:` (fig3_h3): the h2 and h3 arms of one (condition, trial,
    item) are one unit of work with one paired testbed seed, each run under its protocol;
    an arm's protocol is checked and a TCP-only scheme is refused under its own h3."""
    from dchlab.experiments.runner import cell_config, pair_units, plan
    from dchlab.run_config import testbed_config

    arms = [
        "all-hbc",
        {"label": "all-hbc-h3", "scheme": "all-hbc", "protocol": "h3"},
        {"label": "dchannel-h3", "scheme": "dchannel", "protocol": "h3"},
    ]
    c = load_campaign(_campaign(tmp_path, schemes=arms, trials=2), check_channels=False)
    units = pair_units(plan(c, set())[0])
    assert len(units) == 2  # one per trial (one condition, one item)
    for unit in units:
        runs = {g.scheme.label: cell_config(c, g) for g in unit}
        assert {k: r.protocol for k, r in runs.items()} == {
            "all-hbc": "h2",
            "all-hbc-h3": "h3",
            "dchannel-h3": "h3",
        }
        seeds = {testbed_config(r, unit[0].items[0]).seed for r in runs.values()}
        assert len(seeds) == 1, seeds
    bad = [*arms, {"label": "m", "scheme": "mptcp", "protocol": "h3"}]
    p = _campaign(tmp_path, schemes=bad)
    with pytest.raises(CampaignError, match=r"schemes\[3\]: scheme 'mptcp' cannot run under protocol h3"):  # fmt: skip
        load_campaign(p, check_channels=False)
    p = _campaign(tmp_path, schemes=[{"label": "x", "scheme": "all-hbc", "protocol": "quic"}])
    with pytest.raises(CampaignError, match=r"schemes\[0\]\.protocol: expected one of h2, h3, recorded, got 'quic'"):  # fmt: skip
        load_campaign(p, check_channels=False)


def test_gains_per_protocol_use_that_protocols_baseline_and_ideal(tmp_path: Path) -> None:
    """analysis.by_protocol: each protocol's arms against the baseline and ideal of the
    same protocol. Two pages, one trial; h2: all-hbc 1000, dchannel 800, ideal 600 ms →
    gain 20%, share 200/400 = 50%; h3: all-hbc 900, dchannel 810, ideal 720 → 10%, 50%.
    dchannel-h3's LLC share is 100·100/(300+100) = 25%."""
    from dchlab.experiments.analyses.protocols import gains_by_protocol, protocol_table

    arms = ["all-hbc", "dchannel", "ideal"]
    arms += [{"label": f"{a}-h3", "scheme": a, "protocol": "h3"} for a in arms]
    c = load_campaign(
        _campaign(tmp_path, schemes=arms, analysis={"kind": "gain", "by_protocol": True}),
        check_channels=False,
    )
    plt = {"all-hbc": 1000, "dchannel": 800, "ideal": 600}
    plt |= {"all-hbc-h3": 900, "dchannel-h3": 810, "ideal-h3": 720}
    rows = [
        {"arm": a, "condition": "embb", "item": page, "trial": 0, "valid": True,
         "plt_ms": float(ms), "bytes_hbc": 300, "bytes_llc": 100, "cell": f"{a}/{page}"}
        for a, ms in plt.items() for page in ("p1", "p2")
    ]  # fmt: skip
    g = gains_by_protocol(c, rows, "plt_ms")
    assert set(g) == {"h2", "h3"}
    h2, h3 = g["h2"][("embb", "dchannel")], g["h3"][("embb", "dchannel")]
    assert round(h2.gain_pct.mean, 6) == 20.0 and round(h3.gain_pct.mean, 6) == 10.0
    assert round(h2.ideal_share or 0, 6) == round(h3.ideal_share or 0, 6) == 0.5
    assert h3.llc_bytes_pct == 25.0 and (h3.pages, h3.pairs) == (2, 2)
    t = protocol_table(c, rows, "plt_ms")
    assert [r[:2] for r in t.rows] == [["embb", "dchannel"], ["embb", "ideal"]]
    assert t.rows[0][3] == "50%" and t.rows[0][7] == "50%"
