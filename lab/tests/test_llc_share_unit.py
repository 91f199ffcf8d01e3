"""The `llc_share` field (issue 41 item 3, docs/llc_sharing.md) without namespaces: its
four values and nothing else, what each adds to the agents' and the LLC emulator's
command lines (none adds nothing: today's runs exactly), and how it reaches the testbed
from a campaign condition, a RunConfig and `dch shell`/`dch pageload --llc-share`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.experiments.runner import cell_config, plan
from dchlab.run_config import RunConfig, testbed_config
from dchlab.testbed import TestbedConfig, llc_share
from dchlab.testbed.schemes import agent


def test_exactly_four_rules_with_none_the_default() -> None:
    assert llc_share.RULES == ("none", "token-bucket", "probe", "priority")
    assert TestbedConfig().llc_share == "none"
    assert RunConfig("dchannel", "a", "b").llc_share == "none"
    for bad in ("tokenbucket", "", None, 1):
        with pytest.raises(ValueError, match="llc_share: expected one of none, token-bucket"):
            TestbedConfig(llc_share=bad)  # type: ignore[arg-type]
    # describe() shows it only when set: a run without it describes as before
    assert "llc_share" not in TestbedConfig().describe()
    assert TestbedConfig(llc_share="probe").describe()["llc_share"] == "probe"


def test_each_rule_adds_its_flags_and_none_adds_nothing() -> None:
    # 2 Mbit/s among 3 devices: the gateway splits C itself; each client gets
    # 2_000_000 // 3 = 666_666 bit/s, the split the gateway makes (rounded down)
    tb = llc_share.agent_args("token-bucket", "gateway", 2.0, 3)
    assert tb == ["--llc-share", "token-bucket", "--llc-capacity", "2000000"]
    tc = llc_share.agent_args("token-bucket", "client", 2.0, 3)
    assert tc == ["--llc-share", "token-bucket", "--llc-share-rate", "666666"]
    assert llc_share.agent_args("probe", "client", 10.0, 4) == ["--llc-share", "probe"]
    for rule in ("none", "priority"):
        for role in ("client", "gateway"):
            assert llc_share.agent_args(rule, role, 2.0, 3) == []
    # rule (c) on every sender: the gateway sends a page's downlink
    assert llc_share.agent_args("probe", "gateway", 2.0, 3) == ["--llc-share", "probe"]
    assert llc_share.chanemu_args("priority", "llc") == ["--control-first"]
    for link in ("hbc", "hbc1", "srvpath"):
        assert llc_share.chanemu_args("priority", link) == []
    for rule in ("none", "token-bucket", "probe"):
        assert llc_share.chanemu_args(rule, "llc") == []


def test_agent_rules_need_an_agent_scheme() -> None:
    for rule in ("token-bucket", "probe"):
        why = llc_share.refusal(rule, "plain")
        assert why is not None and "needs an agent scheme" in why
        assert llc_share.refusal(rule, "agent") is None
    for rule in ("none", "priority"):
        assert llc_share.refusal(rule, "plain") is None


def _argv(monkeypatch, tmp_path: Path, role: str, rule: str) -> list[str]:
    monkeypatch.setattr(agent, "binary", lambda name: tmp_path / name)
    keys = agent.AgentKeys(
        tmp_path / "gateway.key", tmp_path / "client.key", "GWPUB=", tmp_path / "devices.toml",
        (tmp_path / "client2.key",),
    )  # fmt: skip
    cfg = TestbedConfig(devices=2, llc_share=rule)
    return agent.agent_argv(
        role, cfg, policy="dchannel", token="t0k", llc_mbit=2.0,
        stats_json=tmp_path / "s.json", keys=keys, devices=2,
    )  # fmt: skip


def test_agent_argv_carries_the_rule(monkeypatch, tmp_path) -> None:
    gw = _argv(monkeypatch, tmp_path, "gateway", "token-bucket")
    i = gw.index("--llc-share")
    assert gw[i : i + 4] == ["--llc-share", "token-bucket", "--llc-capacity", "2000000"]
    cl = _argv(monkeypatch, tmp_path, "client", "token-bucket")
    assert cl[cl.index("--llc-share-rate") + 1] == "1000000"
    assert "--llc-share" not in _argv(monkeypatch, tmp_path, "client", "none")
    assert "--llc-share" not in _argv(monkeypatch, tmp_path, "gateway", "priority")


CAMPAIGN = """
name: t-share
schemes: [all-hbc, dchannel]
conditions:
  - {name: plain, hbc: "fixed:40ms/200mbit", llc: urllc, devices: 2}
  - {name: bucket, hbc: "fixed:40ms/200mbit", llc: urllc, devices: 2, llc_share: token-bucket}
workload: {kind: bulk, sizes: [10KB]}
"""


def test_campaign_condition_llc_share_reaches_the_testbed(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN)
    c = load_campaign(path, check_channels=False)
    assert [x.llc_share for x in c.conditions] == ["none", "token-bucket"]
    cfgs = {g.condition.name: testbed_config(cell_config(c, g), None) for g in plan(c, set())[0]}
    assert (cfgs["plain"].llc_share, cfgs["bucket"].llc_share) == ("none", "token-bucket")


def test_campaign_llc_share_error_names_the_field(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN.replace("token-bucket", "fair"))
    with pytest.raises(CampaignError, match=r"conditions\[1\]\.llc_share: expected one of none"):
        load_campaign(path, check_channels=False)


def test_shell_and_pageload_take_llc_share() -> None:
    from dchlab.commands import shell

    p = argparse.ArgumentParser()
    shell.add_testbed_args(p)
    cfg = shell.config_from_args(p.parse_args(["--devices", "3", "--llc-share", "priority"]))
    assert (cfg.devices, cfg.llc_share) == (3, "priority")
    assert shell.config_from_args(p.parse_args([])).llc_share == "none"
    with pytest.raises(SystemExit):
        p.parse_args(["--llc-share", "fair"])
    # dch pageload builds its RunConfigs from the same testbed options
    from dchlab import run_options

    q = argparse.ArgumentParser()
    run_options.add_testbed_args(q, several_schemes=True)
    runs = run_options.run_configs(q.parse_args(["--scheme", "all-hbc,dchannel", "--llc-share", "probe"]), 0)  # fmt: skip
    assert [r.llc_share for r in runs] == ["probe", "probe"]
