"""The N-device testbed's pure parts (no namespaces): configuration checks, namespace
names, the address plan, the agents' command lines and devices file, the campaign
field `devices`. The live topology: tests/test_devices_netns.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.experiments.runner import cell_config, plan
from dchlab.run_config import RunConfig, testbed_config
from dchlab.testbed import TestbedConfig, TestbedError, devices
from dchlab.testbed import addressing as A
from dchlab.testbed.namespaces import role_names
from dchlab.testbed.runrecord import NETNS_RE
from dchlab.testbed.schemes import agent


def test_config_checks_devices_and_shared_hbc() -> None:
    assert TestbedConfig().devices == 1
    for bad in (0, -1, 65, True, 2.0, "3"):
        with pytest.raises(ValueError, match="devices: expected"):
            TestbedConfig(devices=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shared_hbc: needs devices > 1"):
        TestbedConfig(shared_hbc=True)
    assert TestbedConfig(devices=64, shared_hbc=True).devices == 64


def test_several_devices_need_an_agent_scheme_without_one_link_instruments() -> None:
    devices.check(TestbedConfig(scheme="hbc-only"), "plain")  # one device: anything goes
    with pytest.raises(TestbedError, match="needs an agent scheme"):
        devices.check(TestbedConfig(scheme="hbc-only", devices=2), "plain")
    with pytest.raises(TestbedError, match="decision_logs"):
        devices.check(TestbedConfig(devices=2, decision_logs=True), "agent")
    with pytest.raises(TestbedError, match="oracle"):
        devices.check(TestbedConfig(devices=2, agent_args=["--hbc-owd-oracle", "auto"]), "agent")
    devices.check(TestbedConfig(devices=2), "agent")


def test_namespace_names_one_device_unchanged_n_devices_with_cells() -> None:
    assert role_names("dtb000001") == {
        "ue": "dtb000001-ue", "gw": "dtb000001-gw", "srv": "dtb000001-srv",
    }  # fmt: skip
    assert role_names("p", 3) == {
        "ue": "p-ue1", "ue2": "p-ue2", "ue3": "p-ue3", "gw": "p-gw", "srv": "p-srv",
        "llc-cell": "p-llc",
    }  # fmt: skip
    assert role_names("p", 2, shared_hbc=True)["hbc-cell"] == "p-hbc"
    # `dch cleanup` recognizes every one of them as the testbed's
    for ns in ("ue", "ue1", "ue17", "gw", "srv", "llc", "hbc"):
        assert NETNS_RE.match(f"dtbabc123-{ns}"), ns
    assert not NETNS_RE.match("dtbabc123-llcx")


def test_device_links_and_addresses() -> None:
    assert devices.device_links(TestbedConfig(devices=3)) == ["hbc1", "hbc2", "hbc3", "llc"]
    assert devices.device_links(TestbedConfig(devices=3, shared_hbc=True)) == ["hbc", "llc"]
    # device 1 keeps the single device's addresses; device i is .(1+i)
    assert A.device_channel_address("hbc", 1) == A.HBC.near == "198.18.1.2"
    assert A.device_channel_address("llc", 1) == A.LLC.near == "198.18.2.2"
    assert A.device_channel_address("llc", 64) == "198.18.2.65"
    assert A.device_agent_address(1) == A.UE_AGENT
    assert A.device_agent_address(3) == "198.19.0.4"


def _argv(monkeypatch, tmp_path: Path, role: str, **kw) -> list[str]:
    monkeypatch.setattr(agent, "binary", lambda name: tmp_path / name)
    keys = agent.AgentKeys(
        tmp_path / "gateway.key", tmp_path / "client.key", "GWPUB=", tmp_path / "devices.toml",
        (tmp_path / "client2.key", tmp_path / "client3.key"),
    )  # fmt: skip
    cfg = TestbedConfig(devices=3, agent_args=kw.pop("agent_args", []))
    return agent.agent_argv(
        role, cfg, policy="dchannel", token="t0k", llc_mbit=2.0,
        stats_json=tmp_path / "s.json", keys=keys, devices=3, **kw,
    )  # fmt: skip


def _flag(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_agent_argv_of_device_i(monkeypatch, tmp_path) -> None:
    c2 = _argv(monkeypatch, tmp_path, "client", device=2)
    assert _flag(c2, "--tun-addr") == ["198.19.0.3/32"]
    assert _flag(c2, "--key") == [str(tmp_path / "client2.key")]
    # every device reaches the same gateway channel addresses
    assert _flag(c2, "--hbc-gateway") == ["198.18.1.1:4500"]
    assert _flag(c2, "--llc-gateway") == ["198.18.2.1:4501"]
    gw = _argv(monkeypatch, tmp_path, "gateway", gateway_devs=False)
    assert "--hbc-dev" not in gw and "--llc-dev" not in gw  # gw has hbc1..hbcN
    assert _flag(gw, "--devices") == [str(tmp_path / "devices.toml")]
    tokens = ["a1", "b2", "c3"]
    ins = _argv(monkeypatch, tmp_path, "gateway", agent_args=["--insecure"], tokens=tokens)
    assert _flag(ins, "--client") == ["198.19.0.2=a1", "198.19.0.3=b2", "198.19.0.4=c3"]
    c3 = _argv(monkeypatch, tmp_path, "client", agent_args=["--insecure"], tokens=tokens, device=3)
    assert _flag(c3, "--token") == ["c3"]
    with pytest.raises(ValueError, match="3 devices need 3 tokens"):
        _argv(monkeypatch, tmp_path, "gateway", agent_args=["--insecure"], tokens=["x"])


def test_make_keys_writes_one_device_per_client(monkeypatch, tmp_path) -> None:
    """The devices file the gateway reads (docs/deploy.md "Devices config"): a name,
    public key and tunnel address per device; one device keeps its name `ue`."""
    made: list[list[str]] = []

    def fake_run(cmd, step, **kw):  # genkey writes nothing; pubkey answers per file
        made.append(cmd)
        out = f"PUB-{Path(cmd[-1]).stem}=\n" if cmd[1] == "pubkey" else ""
        return type("R", (), {"stdout": out})()

    monkeypatch.setattr(agent, "binary", lambda name: tmp_path / name)
    monkeypatch.setattr(agent.sh, "run", fake_run)
    keys = agent.make_keys(tmp_path, 3)
    assert keys.gateway_public == "PUB-gateway="
    assert [keys.client_key_of(i) for i in (1, 2, 3)] == [tmp_path / "keys" / f"{n}.key" for n in ("client", "client2", "client3")]  # fmt: skip
    assert keys.devices.read_text() == "".join(
        f'[[device]]\nname = "ue{i}"\npublic_key = "PUB-{agent.client_role(i)}="\n'
        f'address = "198.19.0.{1 + i}"\n'
        for i in (1, 2, 3)
    )
    one = agent.make_keys(tmp_path, 1)
    assert one.devices.read_text() == (
        '[[device]]\nname = "ue"\npublic_key = "PUB-client="\naddress = "198.19.0.2"\n'
    )


CAMPAIGN = """
name: t-dev
schemes: [all-hbc, dchannel]
conditions:
  - {name: one, hbc: "fixed:40ms/200mbit", llc: urllc}
  - {name: four, hbc: "fixed:40ms/200mbit", llc: urllc, devices: 4, shared_hbc: true}
workload: {kind: bulk, sizes: [10KB]}
"""


def test_campaign_condition_devices_reaches_the_testbed(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    c = load_campaign(path, check_channels=False)
    assert [(x.devices, x.shared_hbc) for x in c.conditions] == [(1, False), (4, True)]
    cfgs = {g.condition.name: testbed_config(cell_config(c, g), None) for g in plan(c, set())[0]}
    assert (cfgs["one"].devices, cfgs["four"].devices, cfgs["four"].shared_hbc) == (1, 4, True)
    assert RunConfig("dchannel", "a", "b").devices == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("devices: 0", "conditions[0].devices: expected a positive integer, got 0"),
        ("devices: two", "conditions[0].devices: expected a positive integer"),
        ("devices: 65", "conditions[0].devices: expected 1 to 64, got 65"),
        ("shared_hbc: yes-please", "conditions[0].shared_hbc: expected true or false"),
        ("shared_hbc: true", "conditions[0].shared_hbc: needs devices > 1"),
    ],
)
def test_campaign_devices_errors_name_the_field(tmp_path, fields: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: t-dev\nschemes: [all-hbc, dchannel]\nworkload: {kind: bulk, sizes: [10KB]}\n"
        f'conditions:\n  - {{name: c, hbc: "fixed:40ms/200mbit", llc: urllc, {fields}}}\n'
    )
    with pytest.raises(CampaignError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_campaign(path, check_channels=False)


def test_shell_devices_options_reach_the_config() -> None:
    import argparse

    from dchlab.commands import shell

    p = argparse.ArgumentParser()
    shell.add_testbed_args(p)
    cfg = shell.config_from_args(p.parse_args(["--devices", "8", "--shared-hbc"]))
    assert (cfg.devices, cfg.shared_hbc) == (8, True)
    one = shell.config_from_args(p.parse_args([]))
    assert (one.devices, one.shared_hbc) == (1, False)
    with pytest.raises(ValueError, match="devices: expected 1 to 64, got 0"):
        shell.config_from_args(p.parse_args(["--devices", "0"]))
