"""The servers in srv: dnsmasq (the run's DNS, on its service address) and webreplay
(HTTPS/HTTP for the corpus and /bytes/N on every service address; docs/webreplay.md).

Their command lines are pure functions; `Servers` starts them and remembers what they
were started for, so a testbed prepared ahead keeps its servers when the real
configuration asks for the same ones (and replaces them otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dchlab import protocol
from dchlab.testbed import addressing as A

if TYPE_CHECKING:
    from dchlab.testbed.core import Testbed

NAMES = ("dnsmasq", "webreplay")


def dnsmasq_argv(hosts_file: Path, run_dir: Path) -> list[str]:
    """dnsmasq answering for `hosts_file` only, on the DNS service address."""
    return ["dnsmasq", "-k", "-C", "/dev/null", "--no-resolv", "--no-hosts",
            "--addn-hosts", str(hosts_file), "--listen-address", A.DNS_SERVER,
            "--bind-interfaces", "--user=root", "--pid-file=" + str(run_dir / "dnsmasq.pid"),
            "--log-facility=-", "--log-queries", "--local-ttl=60"]  # fmt: skip


def webreplay_argv(
    exe: Path,
    *,
    hosts_file: Path,
    ca_cert: Path,
    ca_key: Path,
    run_dir: Path,
    corpus: Path | None,
    extra: Sequence[str],
) -> list[str]:
    """webreplay for the hosts file, certificates from the testbed CA, the corpus if
    any, then `extra` (the scheme's arguments, the protocol's, then the configuration's)."""
    wr = [str(exe), "--hosts", str(hosts_file), "--ca-cert", str(ca_cert),
          "--ca-key", str(ca_key), "--access-log", str(run_dir / "access.log"),
          "--grace-ms", "0"]  # fmt: skip
    if corpus is not None:
        wr += ["--corpus", str(corpus)]
    return [*wr, *extra]


class Servers:
    """dnsmasq and webreplay of one testbed; `key` is what the running ones were
    started for (None: not started)."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None

    @staticmethod
    def config_key(tb: Testbed, exe: Path) -> tuple[object, ...]:
        """What the servers depend on: a prepared testbed's servers are kept if equal."""
        return (str(exe), str(_corpus(tb) or ""), tuple(sorted(tb.hosts.items())), _extra(tb))

    def ensure(self, tb: Testbed, exe: Path) -> None:
        """Start them unless the running ones were started for the same configuration."""
        if self.key != self.config_key(tb, exe):
            self.start(tb, exe)

    def start(self, tb: Testbed, exe: Path) -> None:
        """Start both in srv (replacing those a prepared testbed started)."""
        for name in NAMES:
            tb.stop_daemon(name)
        hosts_file = tb.run_dir / "hosts"
        hosts_file.write_text("".join(f"{ip} {h}\n" for h, ip in tb.hosts.items()))
        tb.spawn("dnsmasq", dnsmasq_argv(hosts_file, tb.run_dir), ns="srv",
                 ready="started, version", ready_exact=False)  # fmt: skip
        if tb.cfg.protocol == "h3":  # webreplay writes it at exit (_quic_stats_args)
            tb.expect_stats("servers", QUIC_STATS_KEY, QUIC_STATS_FILE)
        argv = webreplay_argv(
            exe, hosts_file=hosts_file, ca_cert=tb.ca_cert, ca_key=tb.ca_key,
            run_dir=tb.run_dir, corpus=_corpus(tb), extra=_extra(tb),
        )  # fmt: skip
        tb.spawn("webreplay", argv, ns="srv")
        self.key = self.config_key(tb, exe)


def _corpus(tb: Testbed) -> Path | None:
    return Path(tb.cfg.corpus).resolve() if tb.cfg.corpus else None


def _extra(tb: Testbed) -> tuple[str, ...]:
    return (
        *tb.scheme.webreplay_args(tb),
        *protocol.webreplay_args(tb.cfg.protocol),
        *_quic_stats_args(tb),
        *tb.cfg.webreplay_args,
    )


#: Where webreplay writes its QUIC connections' loss recovery at exit (h3 only), and the
#: stats() key it lands under (read by dchlab.workloads.measure.quic_counters).
QUIC_STATS_FILE = "webreplay.quic.json"
QUIC_STATS_KEY = "webreplay_quic"


def _quic_stats_args(tb: Testbed) -> tuple[str, ...]:
    if tb.cfg.protocol != "h3":
        return ()
    return ("--quic-stats-json", str(tb.run_dir / QUIC_STATS_FILE))
