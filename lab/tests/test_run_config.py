"""One typed run: RunConfig → TestbedConfig in one function, and the workload kinds as
registered plug-ins (a new kind is its own file and one registration)."""

from __future__ import annotations

import textwrap
from dataclasses import FrozenInstanceError, fields
from pathlib import Path
from typing import Any

import pytest

from dchlab import run_config
from dchlab.experiments import workload_kinds
from dchlab.experiments.campaign import CampaignError, Workload, load_campaign
from dchlab.experiments.campaign_check import Validator
from dchlab.experiments.runner import annotate, cell_config, execute_group, plan
from dchlab.run_config import RunConfig, paired_seed
from dchlab.testbed import TestbedConfig
from dchlab.workloads.pool import TestbedPool


def test_testbed_config_pairs_the_seed_and_carries_every_run_field() -> None:
    run = RunConfig(
        "dchannel", "MM-S", "urllc", seed=7, trial=3, offset_fraction=0.25, trace_seed=9,
        cc="bbr", server_delay_ms=5.0, agent_args=("--a",), client_args=("--c",),
        gateway_args=("--g",), decision_logs=True, webreplay_args=("--w",), protocol="h3",
        devices=3, shared_hbc=True, llc_share="token-bucket",
    )  # fmt: skip
    other = RunConfig("all-hbc", "MM-S", "urllc", seed=7, trial=3)
    cfg = run_config.testbed_config(run, "site0", "/corpus")
    # the seed depends on (seed, item, trial), never on the scheme: paired runs
    assert cfg.seed == run_config.testbed_config(other, "site0").seed == paired_seed(7, "site0", 3)
    assert run_config.testbed_config(run, "site1").seed != cfg.seed
    assert run_config.testbed_config(run, None).seed == 7  # `dch shell`: the seed as given
    described = cfg.describe()
    assert described == {
        "scheme": "dchannel", "hbc": "MM-S", "llc": "urllc", "cc": "bbr",
        "seed": paired_seed(7, "site0", 3), "offset_fraction": 0.25, "trace_seed": 9,
        "server_delay_ms": 5.0, "corpus": "/corpus", "webreplay_args": ["--w"], "protocol": "h3",
        "agent_args": ["--a"], "client_args": ["--c"], "gateway_args": ["--g"],
        "decision_logs": True, "devices": 3, "shared_hbc": True, "llc_share": "token-bucket",
    }  # fmt: skip
    # one device (the default): the stats describe the run exactly as before devices existed
    one = set(run_config.testbed_config(other, None).describe())
    assert not {"devices", "shared_hbc", "llc_share"} & one
    with pytest.raises(FrozenInstanceError):  # handed to the testbed unchanged
        cfg.scheme = "mptcp"  # type: ignore[misc]
    # every field of the testbed's configuration is either described or a file location
    names = {f.name for f in fields(TestbedConfig)}
    assert names - set(described) == {"hosts", "stats_path", "keep_logs", "pcap_dir"}


CAMPAIGN = """
name: t-echo
schemes: [all-hbc, dchannel]
conditions: [{name: c1, hbc: "fixed:40ms/200mbit", llc: urllc, agent_args: [--x, "1"]}]
workload: {kind: echo, words: [a, b], timeout_s: 5}
trials: 2
seed: 4
"""


class Echo(workload_kinds.WorkloadKind):
    """A test-only workload kind: each item is a word, measured as its length."""

    name = "echo"
    fields = frozenset({"words"})
    item_is_page = True

    def parse(self, v: Validator, d: dict[str, Any], timeout_s: float) -> Workload:
        return Workload(kind=self.name, profiles=tuple(d["words"]), timeout_s=timeout_s)

    def items(self, wl: Workload) -> list[str]:
        return list(wl.profiles)

    def group_items(self, wl: Workload, item: str) -> list[str] | None:
        return [item, item + "#1"] if item == "b" else None

    def measure(
        self, run: RunConfig, wl: Workload, items: list[str], pool: TestbedPool
    ) -> list[dict[str, Any]]:
        return [{"valid": True, "plt_ms": float(len(it)), "_run": run} for it in items]


@pytest.fixture
def echo_kind():
    workload_kinds.workload_kinds()  # load the built-in kinds first
    workload_kinds.register(Echo)
    yield
    del workload_kinds._REGISTRY["echo"]


def test_built_in_workload_kinds_are_registered() -> None:
    assert set(workload_kinds.workload_kinds()) == {
        "pageload", "curl-phases", "bulk", "app", "session", "realtime",
    }  # fmt: skip


def test_a_registered_kind_is_parsed_planned_and_measured(tmp_path: Path, echo_kind) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    c = load_campaign(path, check_channels=False)
    assert c.workload.profiles == ("a", "b") and c.workload.timeout_s == 5.0
    groups, total = plan(c, set())
    # a: one cell per scheme and trial; b: two cells (its group) per scheme and trial
    assert total == 2 * 2 * (1 + 2)
    assert sorted({tuple(g.items) for g in groups}) == [("a",), ("b", "b#1")]
    g = next(g for g in groups if g.items == ["b", "b#1"] and g.scheme.label == "dchannel")
    with TestbedPool() as pool:
        rows = annotate(c, g, execute_group(c, g, pool))
    assert [r["plt_ms"] for r in rows] == [1.0, 3.0]
    assert [r["page"] for r in rows] == ["b", "b#1"]  # item_is_page
    assert all("corpus" not in r for r in rows)  # corpus_column is off
    run = rows[0]["_run"]
    assert run == cell_config(c, g)
    assert (run.scheme, run.seed, run.trial, run.agent_args) == ("dchannel", 4, g.trial, ("--x", "1"))  # fmt: skip
    assert rows[0]["agent_args"] == ["--x", "1"] and rows[0]["workload"] == "echo"


def test_an_unknown_field_of_a_kind_is_refused(tmp_path: Path, echo_kind) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN).replace("words:", "sizes:"))
    with pytest.raises(CampaignError, match=r"workload\.sizes: unknown field"):
        load_campaign(path, check_channels=False)
