"""TestbedConfig: everything that defines one testbed run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from dchlab.testbed import llc_share


@dataclass(frozen=True)
class TestbedConfig:
    """What to build. All fields have the defaults of `dch shell`. Frozen: derived from a
    run's RunConfig (dchlab.run_config.testbed_config) and handed to the testbed as is.

    scheme: what runs on ue/gw — an agent policy (`dchannel`, `dchannel:alpha=0.5`,
        `all-hbc`, `all-llc`, `pkt-size:750`, `pkt-control`, `pkt-uplink`, `pkt-state`,
        `asap`, `realtime` (WebRTC-aware, docs/agent.md)), `hbc-only`/`llc-only` (plain
        routing, no agent), `mptcp` or `ideal`.
        `dchlab.testbed.known_schemes()` lists them.
    hbc, llc: channel specs: a preset (`urllc`, `embb`, scenario names such as `MM-D`
        with optional `+loss=..` modifiers), a profile TOML path, or
        `fixed:<rtt>ms/<rate>mbit`.
    cc: TCP congestion control in every namespace: `cubic` (default, as in the
        paper) or `bbr`.
    seed: chooses the trace start offset (same seed → same offset for every scheme),
        draws the synthesized scenarios' traces (MM-S ... LB-D: a realization per
        seed) and seeds the emulators' random loss.
    trace_seed: if set, the synthesized scenarios are drawn with this seed instead
        of `seed`, so runs with different seeds replay the same traces (a campaign's
        latin offsets, dchlab.experiments.offsets).
    offset_fraction: if set, the trace start offset is this fraction of the trace's
        period instead of the seed's (a campaign's stratified offsets,
        dchlab.experiments.offsets); the seed still seeds random loss.
    server_delay_ms: extra one-way delay on the gw↔srv path (like `mm-delay`; the RTT
        grows by twice this), emulated by a third chanemu link; 0 = a plain veth.
    corpus: a page corpus directory (docs/formats.md): every origin of its manifest
        gets an address in srv and a DNS record, and webreplay serves the corpus.
    webreplay_args: extra webreplay flags, e.g. the CDN model of a campaign's `cdn:`
        block (`--cdn-delays-ms edge=0,parent=10,origin=50 --cdn-hit-ratio ...`,
        docs/webreplay.md), after the scheme's own.
    protocol: the page-load protocol, h2 | h3 | recorded (dchlab.protocol): under h3
        webreplay also serves every origin over HTTP/3 on UDP 443 and Chromium is
        forced onto QUIC for every host.
    hosts: extra host names (each gets the next service address) or an explicit
        {name: address} mapping (addresses must lie in 198.19.128.0/17).
    agent_args: extra arguments appended to both `dchannel client` and
        `dchannel gateway` (e.g. ["--reorder", "off"]).
    client_args, gateway_args: extra arguments for `dchannel client` only or
        `dchannel gateway` only, appended after agent_args (the agents reject a flag
        given twice, so put a flag either in agent_args or per role), e.g.
        gateway_args=["--reorder", "off"] keeps the reorder buffer at the client only.
    decision_logs: run both agents with `--decision-log` and `--arrival-log` (files
        in the run dir, paths in stats["agents"][role]["logs"]) and, at teardown, add
        the reward-estimation error (Fig. 11, dchlab.testbed.reward_error) to the
        stats: stats["agents"][role]["reward_error_ms"] (|error| samples of the packets
        that role sent: client = uplink, gateway = downlink) and
        stats["reward_error"] (p50/p90/p99 per direction). Copy the raw logs out
        with keep_logs.
    stats_path: if set, the run's stats JSON is written there at teardown.
    keep_logs: keep the run directory (logs, stats, generated files) after exit.
    devices: how many devices (ue namespaces, each with its own client agent) the
        one gateway serves (docs/testbed.md "N devices"). 1 (default) builds the
        single-device topology; N > 1 builds ue1 ... ueN sharing ONE emulated LLC
        (one queue per direction) through an "llc cell" namespace, and needs an
        agent scheme. The programs of run_ue/popen_ue run on ue1, the measured one.
    shared_hbc: with devices > 1, the devices also share one HBC (an "hbc cell" like
        the LLC's) instead of each having its own emulated HBC link.
    llc_share: how the devices share the LLC (dchlab.testbed.llc_share,
        docs/llc_sharing.md): none (default: today's agents, unchanged), token-bucket
        (a per-device share at the gateway and each client, excess on the HBC), probe
        (clients learn the shared queue from probes) or priority (the LLC emulator
        serves control packets first).
    pcap_dir: if set, every emulated link captures what crosses it into this
        directory (created if missing): `<link>-uplink.pcap` (ue→gw) and
        `<link>-downlink.pcap` (gw→ue) for hbc, llc (and srvpath: gw→srv is its
        uplink), raw IP, stamped when each packet left the emulator
        (docs/chanemu.md). The files stay after the run.
    """

    __test__ = False

    scheme: str = "dchannel"
    hbc: str = "fixed:40ms/200mbit"
    llc: str = "urllc"
    cc: str = "cubic"
    seed: int = 1
    offset_fraction: float | None = None
    trace_seed: int | None = None
    server_delay_ms: float = 0.0
    corpus: Path | str | None = None
    hosts: Sequence[str] | Mapping[str, str] | None = None
    webreplay_args: Sequence[str] = ()
    protocol: str = "h2"
    agent_args: list[str] = field(default_factory=list)
    client_args: Sequence[str] = ()
    gateway_args: Sequence[str] = ()
    decision_logs: bool = False
    stats_path: Path | str | None = None
    keep_logs: bool = False
    pcap_dir: Path | str | None = None
    devices: int = 1
    shared_hbc: bool = False
    llc_share: str = "none"

    def __post_init__(self) -> None:
        llc_share.check(self.llc_share)
        if isinstance(self.devices, bool) or not isinstance(self.devices, int):
            raise ValueError(f"devices: expected an integer, got {self.devices!r}")
        if not 1 <= self.devices <= MAX_DEVICES:
            raise ValueError(f"devices: expected 1 to {MAX_DEVICES}, got {self.devices}")
        if self.shared_hbc and self.devices == 1:
            raise ValueError("shared_hbc: needs devices > 1 (one device has its HBC alone)")

    def describe(self) -> dict[str, object]:
        """The configuration as plain JSON-able values (for stats and results rows):
        every field except where the run's files go and the extra host names."""
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name in _NOT_DESCRIBED:
                continue
            if f.name in _DESCRIBED_IF_SET and getattr(self, f.name) == f.default:
                continue  # a one-device run's stats stay as they were
            value = getattr(self, f.name)
            if f.name == "corpus":
                value = str(value) if value else None
            elif isinstance(value, (list, tuple)):
                value = list(value)
            out[f.name] = value
        return out


#: Fields describe() leaves out: where logs, stats and captures go, and extra hosts.
_NOT_DESCRIBED = frozenset({"hosts", "stats_path", "keep_logs", "pcap_dir"})
#: Fields describe() gives only when they differ from their default.
_DESCRIBED_IF_SET = frozenset({"devices", "shared_hbc", "llc_share"})
#: The most devices a testbed builds (each gets addresses 198.18.x.(1+i), x.255 kept free).
MAX_DEVICES = 64
