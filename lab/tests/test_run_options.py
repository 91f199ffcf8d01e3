"""The testbed options are written once (dchlab.run_options) for `dch shell` and the
workload commands, and reach the RunSpec/TestbedConfig the same way."""

from __future__ import annotations

import argparse

from dchlab import cli
from dchlab.commands import shell
from dchlab.run_options import run_configs
from dchlab.workloads import measure

TESTBED = {"scheme", "hbc", "llc", "cc", "seed", "server_delay_ms", "agent_arg", "client_arg", "gateway_arg"}  # fmt: skip


def _sub(command: str) -> argparse.ArgumentParser:
    sub = cli.build_parser([command])._subparsers._group_actions[0]  # type: ignore[union-attr]
    return sub.choices[command]  # type: ignore[no-any-return,attr-defined]


def _defaults(p: argparse.ArgumentParser) -> dict[str, object]:
    return {a.dest: a.default for a in p._actions if a.dest in TESTBED}


def test_shell_and_workloads_offer_the_same_testbed_options() -> None:
    ref = _defaults(_sub("shell"))
    assert set(ref) == TESTBED
    for command in ("pageload", "curl-phases", "bulk", "app"):
        assert _defaults(_sub(command)) == ref, command


def test_workload_flags_reach_every_runspec_and_the_testbed() -> None:
    p = _sub("curl-phases")
    args = p.parse_args(
        ["--scheme", "all-hbc, dchannel", "--seed", "7", "--agent-arg=--probe-interval-ms",
         "--agent-arg=250", "--gateway-arg=--reorder", "--gateway-arg=off"]
    )  # fmt: skip
    specs = run_configs(args, trial=2)
    assert [s.scheme for s in specs] == ["all-hbc", "dchannel"]
    assert all(s.gateway_args == ("--reorder", "off") and s.trial == 2 for s in specs)
    cfgs = [measure.testbed_config(s, "url") for s in specs]
    assert cfgs[0].seed == cfgs[1].seed != 7  # the paired seed: same for every scheme
    assert list(cfgs[1].gateway_args) == ["--reorder", "off"] and cfgs[1].client_args == []
    assert cfgs[1].agent_args == ["--probe-interval-ms", "250"]
    sh = _sub("shell").parse_args(["--client-arg=--reorder", "--client-arg=off", "--", "true"])
    assert list(shell.config_from_args(sh).client_args) == ["--reorder", "off"]


def test_speed_index_flag_reaches_the_runspec_and_is_off_by_default() -> None:
    for command in ("pageload", "session"):
        on = run_configs(_sub(command).parse_args(["--speed-index", "--scheme", "all-hbc"]), 0)
        off = run_configs(_sub(command).parse_args(["--scheme", "all-hbc"]), 0)
        assert on[0].speed_index is True, command
        assert off[0].speed_index is None, command  # $DCH_SPEED_INDEX decides
    assert run_configs(_sub("bulk").parse_args(["--scheme", "all-hbc"]), 0)[0].speed_index is None
