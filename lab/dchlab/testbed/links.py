"""The emulated links: one chanemu per link between two namespaces (docs/chanemu.md).

`chanemu_argv` is the command line of one emulator, a pure function of what the
link needs (tested without namespaces); the testbed spawns it.
"""

from __future__ import annotations

from pathlib import Path


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
