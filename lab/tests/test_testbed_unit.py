"""Testbed pieces that need no root: scheme registry, channel handling, addresses, CA."""

from __future__ import annotations

import json
import os
import signal
import time
import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from dchlab.testbed import TestbedError, ensure_ca, get_scheme, known_schemes
from dchlab.testbed import addressing as A
from dchlab.testbed import channels as ch

AGENT_SPECS = [
    "dchannel",
    "dchannel:alpha=0.5",
    "all-hbc",
    "all-llc",
    "pkt-size:750",
    "pkt-control",
    "pkt-uplink",
    "pkt-state",
    "asap",
    "realtime",
    "realtime:alpha=0.5",
    "realtime-dup",
    "realtime-dup:alpha=0.5",
]


@pytest.mark.parametrize("spec", AGENT_SPECS)
def test_agent_specs_pass_verbatim(spec: str) -> None:
    s = get_scheme(spec)
    assert s.kind == "agent"
    assert s.spec == spec  # handed to `dchannel --policy` unchanged


def test_other_scheme_kinds() -> None:
    assert get_scheme("mptcp").kind == "mptcp"
    assert get_scheme("ideal").kind == "ideal"
    assert get_scheme("hbc-only").kind == "plain"


def test_unknown_scheme_lists_known() -> None:
    with pytest.raises(TestbedError) as e:
        get_scheme("pkt-sise:750")
    msg = str(e.value)
    assert "pkt-sise:750" in msg and "pkt-size:PARAMS" in msg and "mptcp" in msg
    with pytest.raises(TestbedError, match="needs a parameter"):
        get_scheme("pkt-size")
    with pytest.raises(TestbedError, match="takes no parameters"):
        get_scheme("mptcp:2")
    assert set(known_schemes()) >= {"ideal", "mptcp", "dchannel[:PARAMS]", "all-llc"}


def test_unknown_channel_lists_presets() -> None:
    with pytest.raises(TestbedError) as e:
        ch.resolve_channel("urlcc", 1)
    assert "urlcc" in str(e.value) and "urllc" in str(e.value) and "embb" in str(e.value)


def test_ideal_profile_takes_llc_delay_and_hbc_rate(tmp_path) -> None:
    prof = ch.ideal_profile("fixed:40ms/200mbit", "urllc")
    assert prof["delay"] == {"kind": "fixed", "rtt_ms": 5.0}
    assert prof["uplink"]["rate"] == {"mbit": 200.0}
    assert prof["downlink"]["rate"] == {"mbit": 200.0}
    # Written as TOML that round-trips.
    path = ch.write_profile(prof, tmp_path / "ideal.toml")
    assert tomllib.loads(path.read_text())["delay"]["rtt_ms"] == 5.0


def test_ideal_profile_from_trace_profile_keeps_paths_absolute(tmp_path) -> None:
    (tmp_path / "x.rtt.csv").write_text("t_ms,rtt_ms\n0,30\n10,40\n")
    (tmp_path / "x.cap.csv").write_text("t_s,up_mbit,down_mbit\n0,10,100\n1,20,300\n")
    (tmp_path / "hbc.toml").write_text(
        'name = "x"\n[delay]\nkind = "timeline"\nfile = "x.rtt.csv"\n'
        '[uplink]\nrate = { series = "x.cap.csv", column = "up_mbit" }\n'
        '[downlink]\nrate = { series = "x.cap.csv", column = "down_mbit" }\n'
        "drx = { inactivity_ms = 30, wake_period_ms = 40 }\n"
    )
    hbc = str(tmp_path / "hbc.toml")
    prof = ch.ideal_profile(hbc, "urllc")
    assert prof["delay"]["kind"] == "fixed"  # the LLC's
    assert prof["downlink"]["rate"]["series"] == str(tmp_path / "x.cap.csv")
    assert "drx" not in prof["downlink"]  # radio sleep follows the delay side (LLC: none)
    assert ch.nominal_mbit(hbc, "downlink") == pytest.approx(200.0)
    assert ch.nominal_mbit("urllc", "uplink") == 2.0


def test_service_addresses() -> None:
    table = A.service_addresses(["www.a.test", "cdn.b.test", "www.a.test", "WWW.A.TEST."])
    assert table == {
        "server.test": "198.19.128.1",
        "www.a.test": "198.19.128.2",
        "cdn.b.test": "198.19.128.3",
    }
    assert A.DNS_SERVER not in table.values()


def test_ca_is_ecdsa_p256_pkcs8_and_cached(tmp_path) -> None:
    cert_path, key_path = ensure_ca(tmp_path)
    pem = key_path.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, not SEC1
    key = serialization.load_pem_private_key(pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical
    on = (usage.value.digital_signature, usage.value.key_cert_sign, usage.value.crl_sign)
    assert on == (True, True, True)
    off = (
        usage.value.content_commitment,
        usage.value.key_encipherment,
        usage.value.data_encipherment,
        usage.value.key_agreement,  # encipher_only/decipher_only are undefined without it
    )
    assert off == (False, False, False, False)
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    assert ensure_ca(tmp_path) == (cert_path, key_path)
    assert cert_path.read_bytes() == x509.load_pem_x509_certificate(
        cert_path.read_bytes()
    ).public_bytes(serialization.Encoding.PEM)


def test_key_usage_sets_exactly_the_granted_flags() -> None:
    from dchlab.testbed.ca import key_usage

    u = key_usage(frozenset({"key_agreement", "encipher_only"}))
    assert (u.key_agreement, u.encipher_only, u.decipher_only) == (True, True, False)
    assert (u.digital_signature, u.key_cert_sign, u.crl_sign) == (False, False, False)
    with pytest.raises(ValueError, match="not key usages: sign_everything"):
        key_usage(frozenset({"crl_sign", "sign_everything"}))


def test_failed_step_is_named() -> None:
    from dchlab.testbed import sh

    with pytest.raises(TestbedError) as e:
        sh.ip(None, ["link", "set", "dch-no-such0", "up"], "bring up the HBC link in ue")
    msg = str(e.value)
    assert "bring up the HBC link in ue" in msg and "dch-no-such0" in msg
    with pytest.raises(TestbedError, match="not installed"):
        sh.run(["dch-no-such-tool"], "start the tool")


def _agent_argvs(monkeypatch, tmp_path, oracle_file=None, **cfg_fields) -> dict[str, list[str]]:
    from dchlab.testbed import TestbedConfig
    from dchlab.testbed.schemes import agent

    # The argv builder needs no built binary: only its path goes into the argv.
    monkeypatch.setattr(agent, "binary", lambda name: tmp_path / name)
    cfg = TestbedConfig(**cfg_fields)
    keys = agent.AgentKeys(
        tmp_path / "gw.key", tmp_path / "ue.key", "GWPUB=", tmp_path / "dev.toml"
    )
    return {
        role: agent.agent_argv(
            role,
            cfg,
            policy="dchannel",
            token="t0k",
            llc_mbit=2.0,
            stats_json=tmp_path / f"{role}.json",
            keys=keys,
            oracle_file=oracle_file,
        )
        for role in ("client", "gateway")
    }


def test_agent_argv_per_role_flags(monkeypatch, tmp_path) -> None:
    argv = _agent_argvs(
        monkeypatch,
        tmp_path,
        agent_args=["--probe-interval-ms", "250"],
        gateway_args=["--reorder", "off"],
        client_args=["--reorder-timeout-ms", "50"],
    )
    cl, gw = argv["client"], argv["gateway"]
    assert cl[:2] == [str(tmp_path / "dchannel"), "client"]
    assert gw[:2] == [str(tmp_path / "dchannel"), "gateway"]
    # shared flags first, then this role's own; the other role's never
    assert cl[-4:] == ["--probe-interval-ms", "250", "--reorder-timeout-ms", "50"]
    assert gw[-4:] == ["--probe-interval-ms", "250", "--reorder", "off"]
    assert "--reorder" not in cl and "--reorder-timeout-ms" not in gw
    # encrypted by default: keys, no token
    assert cl[cl.index("--key") + 1] == str(tmp_path / "ue.key")
    assert cl[cl.index("--gateway-key") + 1] == "GWPUB="
    assert gw[gw.index("--key") + 1] == str(tmp_path / "gw.key")
    assert gw[gw.index("--devices") + 1] == str(tmp_path / "dev.toml")
    assert "--token" not in cl and "--client" not in gw
    assert cl[cl.index("--stats-json") + 1] == str(tmp_path / "client.json")
    assert gw[gw.index("--llc-mbit") + 1] == "2"


def test_agent_argv_points_the_oracle_flag_at_the_testbeds_file(monkeypatch, tmp_path) -> None:
    from dchlab.testbed import TestbedConfig
    from dchlab.testbed.schemes.agent import wants_oracle

    args = ["--hbc-owd-oracle", "auto"]
    assert wants_oracle(TestbedConfig(agent_args=args))
    assert wants_oracle(TestbedConfig(gateway_args=args))
    assert not wants_oracle(TestbedConfig(agent_args=["--reorder", "off"]))
    f = tmp_path / "hbc.oracle"
    argv = _agent_argvs(monkeypatch, tmp_path, oracle_file=f, agent_args=args)
    for cmd in argv.values():
        assert cmd[-2:] == ["--hbc-owd-oracle", str(f)]
    # an explicit file stays; `auto` without a testbed file is refused by name
    mine = ["--hbc-owd-oracle", "/x/o"]
    argv = _agent_argvs(monkeypatch, tmp_path, oracle_file=f, client_args=mine)
    assert argv["client"][-2:] == mine
    with pytest.raises(ValueError, match="--hbc-owd-oracle auto"):
        _agent_argvs(monkeypatch, tmp_path, agent_args=args)


def test_agent_argv_insecure_uses_the_token(monkeypatch, tmp_path) -> None:
    argv = _agent_argvs(monkeypatch, tmp_path, agent_args=["--insecure"])
    cl, gw = argv["client"], argv["gateway"]
    assert cl[cl.index("--token") + 1] == "t0k"
    assert gw[gw.index("--client") + 1] == f"{A.UE_AGENT}=t0k"
    assert "--key" not in cl and "--key" not in gw
    with pytest.raises(ValueError, match="agent_args"):
        _agent_argvs(monkeypatch, tmp_path, client_args=["--insecure"])


def test_agent_argv_defaults_and_bad_role(monkeypatch, tmp_path) -> None:
    from dchlab.testbed import TestbedConfig
    from dchlab.testbed.schemes import agent

    argv = _agent_argvs(monkeypatch, tmp_path)
    assert argv["client"][-2:] == ["--stats-json", str(tmp_path / "client.json")]
    assert argv["gateway"][-2:] == ["--stats-json", str(tmp_path / "gateway.json")]
    with pytest.raises(ValueError, match="'proxy'"):
        agent.agent_argv(
            "proxy", TestbedConfig(), policy="x", token="t", llc_mbit=1, stats_json=tmp_path
        )


def test_shell_options_reach_the_config() -> None:
    import argparse

    from dchlab.commands import shell

    p = argparse.ArgumentParser()
    shell.add_testbed_args(p)
    args = p.parse_args(
        ["--agent-arg=--probe-interval-ms", "--agent-arg=250", "--gateway-arg=--reorder",
         "--gateway-arg", "off", "--client-arg=--reorder-timeout-ms", "--client-arg=50"]
    )  # fmt: skip
    cfg = shell.config_from_args(args)
    assert cfg.agent_args == ["--probe-interval-ms", "250"]
    assert list(cfg.gateway_args) == ["--reorder", "off"]
    assert list(cfg.client_args) == ["--reorder-timeout-ms", "50"]
    assert cfg.describe()["gateway_args"] == ["--reorder", "off"]
    assert "--gateway-arg" in p.format_help() and "--client-arg" in p.format_help()


def test_run_spec_passes_per_role_flags_to_the_testbed() -> None:
    from dchlab.workloads import api

    spec = api.RunSpec(
        scheme="dchannel", hbc="embb", llc="urllc", gateway_args=("--reorder", "off")
    )
    cfg = api.testbed_config(spec, "site0")
    assert list(cfg.gateway_args) == ["--reorder", "off"]
    assert list(cfg.client_args) == [] and cfg.agent_args == []
    assert api.RunSpec(scheme="all-hbc", hbc="embb", llc="urllc").client_args == ()


def test_run_spec_passes_a_stratified_offset_to_the_testbed() -> None:
    from dchlab.testbed import channels as ch
    from dchlab.workloads import api

    spec = api.RunSpec(scheme="dchannel", hbc="MM-S", llc="urllc", offset_fraction=0.5)
    cfg = api.testbed_config(spec, "site0")
    assert cfg.offset_fraction == 0.5 and cfg.describe()["offset_fraction"] == 0.5
    # what Testbed._check_inputs computes: half the trace, whatever the paired seed
    assert ch.trace_offset_ms(cfg.hbc, cfg.seed, cfg.offset_fraction) == ch.trace_offset_ms(
        "MM-S", 12345, 0.5
    )
    assert api.testbed_config(api.RunSpec("dchannel", "MM-S", "urllc"), "x").offset_fraction is None


def test_chanemu_argv_keeps_the_oracle_and_the_pcap_together(monkeypatch, tmp_path) -> None:
    """Both --oracle and --pcap set: a list named for the pcap once replaced the
    oracle's arguments, so an agent run with `--hbc-owd-oracle auto` and a capture
    waited for an oracle file the HBC emulator was never told to write."""
    from dchlab.testbed.links import chanemu_argv

    oracle, pcap = tmp_path / "hbc.oracle", tmp_path / "pcaps" / "hbc"
    argv = chanemu_argv(
        Path("/bin/chanemu"), "urllc", ns_a="p-ue", dev_a="hbc", ns_b="p-gw", dev_b="hbc",
        seed=7, offset_ms=1234, stats=tmp_path / "chanemu-hbc.json",
        oracle_file=oracle, pcap_prefix=pcap,
    )  # fmt: skip
    assert argv == [
        "/bin/chanemu", "--profile", "urllc", "--ns-a", "p-ue", "--dev-a", "hbc",
        "--ns-b", "p-gw", "--dev-b", "hbc", "--seed", "7", "--offset-ms", "1234",
        "--stats", str(tmp_path / "chanemu-hbc.json"),
        "--oracle", str(oracle), "--pcap", str(pcap),
    ]  # fmt: skip
    plain = chanemu_argv(
        Path("/bin/chanemu"), "urllc", ns_a="a", dev_a="llc", ns_b="b", dev_b="llc",
        seed=1, offset_ms=0, stats=tmp_path / "s.json",
    )  # fmt: skip
    assert "--oracle" not in plain and "--pcap" not in plain
    # and the agents, run in the same testbed, point their oracle flag at that file
    agents = _agent_argvs(
        monkeypatch, tmp_path, oracle_file=oracle, agent_args=["--hbc-owd-oracle", "auto"]
    )
    assert all(cmd[-2:] == ["--hbc-owd-oracle", str(oracle)] for cmd in agents.values())


def test_host_table_numbers_origins_then_extra_hosts(tmp_path) -> None:
    from dchlab.testbed.hosts import host_table

    origins = [{"host": "www.a.test"}, {"host": "cdn.b.test"}]
    (tmp_path / "manifest.json").write_text(json.dumps({"origins": origins}))
    assert host_table(tmp_path, ["x.test", "CDN.B.TEST"]) == {
        "server.test": "198.19.128.1",
        "www.a.test": "198.19.128.2",
        "cdn.b.test": "198.19.128.3",
        "x.test": "198.19.128.4",
    }
    # an explicit mapping keeps its addresses; the origins skip the names it gives
    table = host_table(tmp_path, {"WWW.A.TEST": "198.19.200.7"})
    assert table == {
        "server.test": "198.19.128.1",
        "cdn.b.test": "198.19.128.2",
        "www.a.test": "198.19.200.7",
    }
    with pytest.raises(TestbedError, match=r"outside 198\.19\.128\.0/17"):
        host_table(None, {"a.test": "10.0.0.1"})
    with pytest.raises(TestbedError, match="origins"):
        host_table(tmp_path / "no-such-corpus", None)


def test_server_argvs(tmp_path) -> None:
    from dchlab.testbed.servers import dnsmasq_argv, webreplay_argv

    dns = dnsmasq_argv(tmp_path / "hosts", tmp_path)
    assert dns[dns.index("--addn-hosts") + 1] == str(tmp_path / "hosts")
    assert dns[dns.index("--listen-address") + 1] == A.DNS_SERVER
    wr = webreplay_argv(
        Path("/bin/webreplay"), hosts_file=tmp_path / "hosts", ca_cert=tmp_path / "ca.pem",
        ca_key=tmp_path / "ca.key", run_dir=tmp_path, corpus=tmp_path / "c",
        extra=["--cdn-hit-ratio", "0.9"],
    )  # fmt: skip
    assert wr == [
        "/bin/webreplay", "--hosts", str(tmp_path / "hosts"), "--ca-cert", str(tmp_path / "ca.pem"),
        "--ca-key", str(tmp_path / "ca.key"), "--access-log", str(tmp_path / "access.log"),
        "--grace-ms", "0", "--corpus", str(tmp_path / "c"), "--cdn-hit-ratio", "0.9",
    ]  # fmt: skip
    bare = webreplay_argv(
        Path("/bin/webreplay"), hosts_file=tmp_path / "hosts", ca_cert=tmp_path / "ca.pem",
        ca_key=tmp_path / "ca.key", run_dir=tmp_path, corpus=None, extra=[],
    )  # fmt: skip
    assert "--corpus" not in bare and bare[-2:] == ["--grace-ms", "0"]


def test_channel_plan_offsets() -> None:
    from dchlab.testbed import TestbedConfig
    from dchlab.testbed.links import plan_channels

    fixed = plan_channels(TestbedConfig(hbc="fixed:40ms/200mbit", llc="urllc"))
    assert fixed.channels == {"hbc": "fixed:40ms/200mbit", "llc": "urllc"}
    assert fixed.offsets == {"hbc": 0, "llc": 0, "ideal": 0}  # no trace, no offset
    cfg = TestbedConfig(hbc="MM-S", llc="urllc", seed=3, offset_fraction=0.5)
    plan = plan_channels(cfg)
    assert plan.offsets["hbc"] == ch.trace_offset_ms(plan.channels["hbc"], 3, 0.5) > 0
    assert plan.offsets["ideal"] == plan.offsets["hbc"]  # the HBC's capacity trace
    # a trace seed draws the traces; the seed alone still picks the offset
    assert (
        plan_channels(TestbedConfig(hbc="MM-S", seed=3, trace_seed=9)).channels["hbc"]
        == (plan_channels(TestbedConfig(hbc="MM-S", seed=4, trace_seed=9)).channels["hbc"])
    )


def test_ue_base_env_points_every_tls_stack_at_the_ca(tmp_path) -> None:
    from dchlab.testbed.ue import CA_VARIABLES, base_env

    env = base_env(tmp_path / "ca.pem", prefix="dtb1", scheme="asap", run_dir=tmp_path, ue_netns="dtb1-ue")  # fmt: skip
    assert {env[v] for v in CA_VARIABLES} == {str(tmp_path / "ca.pem")}
    assert "SSL_CERT_FILE" in CA_VARIABLES and "NODE_EXTRA_CA_CERTS" in CA_VARIABLES
    assert (env["DCH_PREFIX"], env["DCH_SCHEME"], env["DCH_NETNS_UE"]) == (
        "dtb1",
        "asap",
        "dtb1-ue",
    )
    assert env["DCH_RUN_DIR"] == str(tmp_path)


class _OpenTestbed:
    """What signals.py reads of an open testbed."""

    def __init__(self) -> None:
        self.prefix = "dtbsig0"
        self.failure: str | None = None
        self.closing = False


def _wait_for_signal() -> None:
    for _ in range(100):  # the handler runs in the main thread at its next bytecode
        time.sleep(0.01)


def test_signals_interrupt_hold_during_teardown_and_restore() -> None:
    from dchlab.testbed import TestbedInterrupted, signals

    before = signal.getsignal(signal.SIGTERM)
    # Python's own SIGINT handler, whatever the runner inherited: a suite started as a
    # background job (nohup, `cmd &`) has SIGINT ignored, which holding() keeps (below).
    before_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    tb = _OpenTestbed()
    assert signals.install(tb)
    try:
        with pytest.raises(TestbedInterrupted, match="testbed dtbsig0 interrupted by SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for_signal()
        # a daemon died: the wake-up raises its failure, not an interruption
        tb.failure = "link-hbc exited unexpectedly"
        with pytest.raises(TestbedError, match="link-hbc exited") as e:
            signals.wake_main()
            _wait_for_signal()
        assert not isinstance(e.value, TestbedInterrupted)
        tb.failure = None
        # while it tears down, SIGTERM and SIGINT wait until the teardown is done
        tb.closing = True
        with signals.holding():
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for_signal()
        with pytest.raises(TestbedInterrupted, match="SIGTERM during teardown"):
            signals.raise_held()
        with signals.holding():
            os.kill(os.getpid(), signal.SIGINT)
            _wait_for_signal()
        with pytest.raises(KeyboardInterrupt):
            signals.raise_held()
        signals.raise_held()  # nothing held any more
    finally:
        signals.uninstall(tb)
        signal.signal(signal.SIGINT, before_int)
    assert signal.getsignal(signal.SIGTERM) is before


def test_signals_holding_keeps_an_ignored_sigint_ignored() -> None:
    """A background job (SIGINT ignored on entry) is not made interruptible by a
    teardown: holding() leaves SIG_IGN in place and holds nothing (signals.py)."""
    from dchlab.testbed import signals

    before_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with signals.holding():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            _wait_for_signal()
        signals.raise_held()  # nothing was held: no KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before_int)
