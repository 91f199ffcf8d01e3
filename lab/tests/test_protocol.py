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
