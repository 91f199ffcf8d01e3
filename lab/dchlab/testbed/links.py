"""The emulated links: one chanemu per link between two namespaces (docs/chanemu.md).

`plan_channels` resolves the configuration's channel specs and trace offsets,
`chanemu_argv` is the command line of one emulator (a pure function of what the link
needs, tested without namespaces), `start_links` spawns the scheme's links and the
gw-srv path (N > 1 devices: dchlab.testbed.devices.start_links).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dchlab.testbed import addressing as A
from dchlab.testbed import channels as ch
from dchlab.testbed import llc_share
from dchlab.testbed.errors import TestbedError

if TYPE_CHECKING:
    from dchlab.testbed.config import TestbedConfig
    from dchlab.testbed.core import Testbed


@dataclass(frozen=True)
class ChannelPlan:
    """channels: {"hbc", "llc": resolved profile (chanemu --profile)}; offsets: trace
    start offset (ms) per link name (hbc, llc, ideal)."""

    channels: dict[str, str]
    offsets: dict[str, int]


def plan_channels(cfg: TestbedConfig) -> ChannelPlan:
    """Resolve both channels (the trace seed chooses the traces) and their start
    offsets (the seed, or cfg.offset_fraction of the period)."""
    tseed = cfg.seed if cfg.trace_seed is None else cfg.trace_seed
    channels = {
        "hbc": ch.resolve_channel(cfg.hbc, tseed),
        "llc": ch.resolve_channel(cfg.llc, tseed),
    }
    offsets = {
        x: ch.trace_offset_ms(channels[x], cfg.seed, cfg.offset_fraction) for x in ("hbc", "llc")
    }
    # The ideal link has one offset: the HBC's (its capacity trace), unless only the
    # LLC (its delay trace) is trace-driven.
    offsets["ideal"] = offsets["hbc"] or offsets["llc"]
    return ChannelPlan(channels, offsets)


def chanemu_argv(
    exe: Path,
    profile: str,
    *,
    ns_a: str,
    dev_a: str,
    ns_b: str,
    dev_b: str,
    seed: int,
    offset_ms: int,
    stats: Path,
    oracle_file: Path | None = None,
    pcap_prefix: Path | None = None,
) -> list[str]:
    """The argv of one chanemu between `dev_a` in namespace `ns_a` and `dev_b` in
    `ns_b`. `oracle_file`: where it publishes its true delay (`--oracle`, the HBC's
    when an agent asks for it); `pcap_prefix`: capture into `<prefix>-uplink.pcap`
    and `<prefix>-downlink.pcap` (`--pcap`). Both may be given together."""
    argv = [str(exe), "--profile", profile, "--ns-a", ns_a, "--dev-a", dev_a,
            "--ns-b", ns_b, "--dev-b", dev_b, "--seed", str(seed),
            "--offset-ms", str(offset_ms), "--stats", str(stats)]  # fmt: skip
    if oracle_file is not None:
        argv += ["--oracle", str(oracle_file)]
    if pcap_prefix is not None:
        argv += ["--pcap", str(pcap_prefix)]
    return argv


def start_links(tb: Testbed, exe: Path, links: dict[str, str]) -> list[str]:
    """Spawn a chanemu per scheme link ({name: profile}, ue↔gw) and the gw-srv path
    (a chanemu with cfg.server_delay_ms, else a plain veth). Returns the emulators'
    daemon names, to wait for."""
    cfg = tb.cfg
    for name, profile in links.items():
        if name not in A.LINKS:
            raise TestbedError(f"scheme {cfg.scheme}: unknown link {name!r}")
        off = tb.offsets.get(name, tb.offset_ms)
        spawn_chanemu(tb, exe, name, profile, ("ue", name), ("gw", name), off)
    return [*(f"link-{n}" for n in links), *start_server_path(tb, exe)]


def start_server_path(tb: Testbed, exe: Path) -> list[str]:
    """The gw-srv path: a chanemu with cfg.server_delay_ms (its daemon name returned,
    to wait for), else a plain veth (nothing to wait for)."""
    if tb.cfg.server_delay_ms > 0:
        path = tb.run_dir / "srvpath.toml"
        prof = ch.write_profile(ch.server_path_profile(tb.cfg.server_delay_ms), path)
        spawn_chanemu(tb, exe, "srvpath", str(prof), ("gw", "srv0"), ("srv", "gw0"), 0)
        return ["link-srvpath"]
    tb.ip("gw", ["link", "add", "srv0", "type", "veth", "peer", "name", "gw0", "netns", tb.netns["srv"]], "create gw-srv veth")  # fmt: skip
    return []


def spawn_chanemu(
    tb: Testbed, exe: Path, name: str, profile: str, a: tuple[str, str], b: tuple[str, str],
    offset: int, *, seed: int | None = None,
) -> None:  # fmt: skip
    """One emulator `link-<name>` between (role, device) `a` and `b`, its stats declared
    (stats["links"][name]); `seed`: its randomness (default cfg.seed)."""
    stats = tb.expect_stats("links", name, f"chanemu-{name}.json")
    pcap_prefix = None
    if tb.cfg.pcap_dir:
        pcap_dir = Path(tb.cfg.pcap_dir).resolve()
        pcap_dir.mkdir(parents=True, exist_ok=True)
        pcap_prefix = pcap_dir / name  # <name>-uplink.pcap, <name>-downlink.pcap
    argv = chanemu_argv(
        exe, profile, ns_a=tb.netns[a[0]], dev_a=a[1], ns_b=tb.netns[b[0]], dev_b=b[1],
        seed=tb.cfg.seed if seed is None else seed, offset_ms=offset, stats=stats,
        oracle_file=tb.oracle_file if name == "hbc" else None, pcap_prefix=pcap_prefix,
    )  # fmt: skip
    argv += llc_share.chanemu_args(tb.cfg.llc_share, name)
    tb.spawn(f"link-{name}", argv)
