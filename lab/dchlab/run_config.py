"""RunConfig: one measurement's configuration, typed and written once.

A RunConfig is built once — from the command line (dchlab.run_options.run_configs,
`dch shell`) or from a campaign cell (dchlab.experiments.runner.cell_config) — and
handed unchanged to the workload, which derives the testbed's configuration from it
with `testbed_config` (the only place a RunConfig becomes a TestbedConfig) and the
row's configuration columns with `config_columns` (dchlab.workloads.rows).

Paired runs: `testbed_config(item=...)` applies the paired seed (a function of seed,
item and trial, never of the scheme), so every scheme of a (page, trial) sees the same
trace offset.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dchlab import protocol
from dchlab.testbed.config import TestbedConfig
from dchlab.workloads.bgusers import clients, think


@dataclass(frozen=True)
class RunConfig:
    """What one measurement runs under (see TestbedConfig for the testbed's fields).

    trial: the repetition index (with seed and item it chooses the trace offset).
    speed_index: record a screencast for Speed Index and atf_ms (costs the PLT ~6%);
        None: $DCH_SPEED_INDEX decides (command lines; a campaign always decides).
    """

    scheme: str
    hbc: str
    llc: str
    seed: int = 1
    trial: int = 0
    # the trace start as a fraction of its period (stratified campaigns); None: from seed
    offset_fraction: float | None = None
    # synthesize the scenario traces with this seed (one realization for every load, a
    # latin campaign); None: with the per-(page, trial) testbed seed
    trace_seed: int | None = None
    cc: str = "cubic"
    server_delay_ms: float = 0.0
    agent_args: tuple[str, ...] = ()  # both agents
    client_args: tuple[str, ...] = ()  # `dchannel client` only, after agent_args
    gateway_args: tuple[str, ...] = ()  # `dchannel gateway` only, after agent_args
    decision_logs: bool = False  # agents' decision/arrival logs -> reward error (Fig. 11)
    # webreplay flags, e.g. a campaign's CDN model (dchlab.pages.cdn.CdnSpec.webreplay_args)
    webreplay_args: tuple[str, ...] = ()
    speed_index: bool | None = None
    # devices sharing the one LLC (1: the single-device testbed; ue1 is measured) and
    # whether they share one HBC too (TestbedConfig.devices, shared_hbc)
    devices: int = 1
    shared_hbc: bool = False
    # how the devices share the LLC: none | token-bucket | probe | priority
    # (TestbedConfig.llc_share, dchlab.testbed.llc_share)
    llc_share: str = "none"
    # with devices > 1: the background users' think time between pages
    # (dchlab.workloads.bgusers.think), or `idle` (devices 2..N start no user at all)
    bg_think: str = think.DEFAULT
    # with devices > 1: the background users' client, rust | python
    # (dchlab.workloads.bgusers.background.CLIENTS)
    bg_client: str = clients.DEFAULT
    # page-load protocol: h2 (TCP, today's behaviour), h3 (QUIC for every origin) or
    # recorded (dchlab.protocol); a scheme that cannot carry it is refused here
    protocol: str = "h2"

    def __post_init__(self) -> None:
        if self.bg_think != "idle":
            think.parse(self.bg_think, "bg_think")
        clients.check(self.bg_client, "bg_client")
        protocol.check(self.protocol, "protocol")
        protocol.refuse(self.scheme, self.protocol, "protocol")


def paired_seed(seed: int, item: str, trial: int) -> int:
    """Testbed seed for (seed, page/URL, trial): independent of the scheme (paired runs)."""
    h = hashlib.sha256(f"{seed}\x00{item}\x00{trial}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def testbed_config(
    run: RunConfig,
    item: str | None,
    corpus: Path | str | None = None,
    *,
    hosts: Sequence[str] | Mapping[str, str] | None = None,
    stats_path: Path | str | None = None,
    keep_logs: bool = False,
    pcap_dir: Path | str | None = None,
) -> TestbedConfig:
    """The testbed of `run` measuring `item` (its seed paired over the schemes; None: the
    seed as given, `dch shell`). The keyword arguments are the testbed's own options that
    no result depends on (where logs, stats and captures go) and the served corpus."""
    return TestbedConfig(
        scheme=run.scheme,
        hbc=run.hbc,
        llc=run.llc,
        cc=run.cc,
        seed=run.seed if item is None else paired_seed(run.seed, item, run.trial),
        offset_fraction=run.offset_fraction,
        trace_seed=run.trace_seed,
        server_delay_ms=run.server_delay_ms,
        corpus=corpus,
        hosts=hosts,
        agent_args=list(run.agent_args),
        client_args=list(run.client_args),
        gateway_args=list(run.gateway_args),
        decision_logs=run.decision_logs,
        webreplay_args=list(run.webreplay_args),
        protocol=run.protocol,
        stats_path=stats_path,
        keep_logs=keep_logs,
        pcap_dir=pcap_dir,
        devices=run.devices,
        shared_hbc=run.shared_hbc,
        llc_share=run.llc_share,
    )


testbed_config.__test__ = False  # type: ignore[attr-defined]  # not a test when imported into one
