"""`dch shell`: run a command on the device of an emulated dual-channel network.

Build the namespaces ue (device), gw (gateway) and srv (DNS + web server answering
server.test on 80/443 with GET /bytes/N), the HBC and LLC as emulated links between ue
and gw, and the chosen scheme; run CMD on ue; remove everything. Inside: $DCH_CA is the
testbed CA; curl trusts it via CURL_CA_BUNDLE. With --devices N: ue1 ... ueN share one
LLC link; CMD runs on ue1 and dch prints how to enter the others.

Exit status: the command's own; 125 when the testbed itself failed (a step, a
crashed emulator/agent/server); 143 after SIGTERM/SIGHUP. SIGINT goes to the
command (Ctrl-C at a terminal reaches it directly; a SIGINT sent to dch is forwarded),
and when it exits the testbed is removed as after a normal exit.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
from dataclasses import replace

from dchlab import run_options
from dchlab.commands import add_command
from dchlab.run_config import testbed_config
from dchlab.testbed import (
    Testbed,
    TestbedConfig,
    TestbedError,
    TestbedInterrupted,
    known_channels,
    known_schemes,
)

log = logging.getLogger(__name__)


def add_testbed_args(p: argparse.ArgumentParser) -> None:
    """The testbed options (dchlab.run_options) and the shell's own --corpus/--host."""
    run_options.add_testbed_args(p)
    run_options.add_fault_args(p)
    p.add_argument(
        "--corpus",
        help="page corpus directory: its origins get addresses and DNS records, webreplay serves it",
    )
    p.add_argument("--host", action="append", default=[], metavar="NAME", help="extra host name for DNS and webreplay (repeatable; next free address in 198.19.128.0/17)")  # fmt: skip
    p.add_argument("--devices", type=int, default=1, metavar="N", help="N devices ue1..ueN, each with its own client agent and HBC, sharing one LLC link and queue; CMD runs on ue1 (default 1; docs/testbed.md)")  # fmt: skip
    p.add_argument("--shared-hbc", action="store_true", help="with --devices N > 1: the devices share one HBC link too")  # fmt: skip


def config_from_args(args: argparse.Namespace) -> TestbedConfig:
    """The testbed of `dch shell`: the run of the command line (with its channel faults),
    unpaired (the seed as given), with the shell's own options."""
    hbc, llc = run_options.faulty_channels(args)
    run = replace(
        run_options.run_config(args, args.scheme, trial=0),
        hbc=hbc,
        llc=llc,
        devices=getattr(args, "devices", 1),
        shared_hbc=getattr(args, "shared_hbc", False),
    )
    return testbed_config(
        run,
        None,
        args.corpus,
        hosts=list(args.host) or None,
        stats_path=getattr(args, "stats", None),
        keep_logs=getattr(args, "keep_logs", False),
        pcap_dir=getattr(args, "pcap", None),
    )


def _run_foreground(tb: Testbed, cmd: list[str]) -> int:
    """Run CMD on ue like system(3) runs a child: SIGINT is the command's to handle.

    At a terminal, Ctrl-C already reaches CMD (same process group), so dch ignores it;
    otherwise a SIGINT sent to dch is forwarded to CMD. Either way the testbed is torn
    down when CMD exits — an interactive shell survives a Ctrl-C that stops a ping.
    """
    tty = sys.stdin.isatty()
    procs: list[subprocess.Popen[bytes]] = []
    # A SIGINT that comes while CMD is being started (no process to forward it to
    # yet) is held and delivered once CMD exists: dropping it would let CMD run to
    # its end and dch exit 0 as if never interrupted.
    pending: list[int] = []

    def on_sigint(signum: int, frame: object) -> None:
        if tty:
            return
        if not procs:
            pending.append(signum)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        procs.append(tb.popen_ue(cmd))
        if pending:
            procs[0].send_signal(signal.SIGINT)
        rc = procs[0].wait()
    finally:
        signal.signal(signal.SIGINT, old)
    if tb.failure:
        raise TestbedError(tb.failure)
    return rc


def _print_devices(tb: Testbed) -> None:
    """With several devices: where CMD runs, and how to enter the others."""
    n = tb.cfg.devices
    print(f"dch shell: {n} devices share one LLC; this is ue1 ({tb.netns['ue']}). "
          f"Enter ueK (K = 2..{n}) from another terminal with: "
          f"ip netns exec {tb.prefix}-ueK env DCH_CA={tb.ca_cert} "
          f"CURL_CA_BUNDLE={tb.ca_cert} bash", file=sys.stderr)  # fmt: skip


def cmd_shell(args: argparse.Namespace) -> int:
    if args.list:
        print("schemes:")
        for name, help_ in known_schemes().items():
            print(f"  {name:22} {help_}")
        print(
            "channels: "
            + ", ".join(known_channels())
            + ", fixed:<rtt>ms/<rate>mbit, or a profile .toml"
        )
        return 0
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        cmd = ["bash", "-i"] if sys.stdin.isatty() else ["sh"]
    try:
        cfg = config_from_args(args)
    except ValueError as exc:
        print(f"dch shell: {exc}", file=sys.stderr)
        return 2
    try:
        with Testbed(cfg) as tb:
            if args.keep_logs:
                print(f"dch shell: run {tb.prefix}, logs in {tb.run_dir}", file=sys.stderr)
            if cfg.devices > 1:
                _print_devices(tb)
            rc = _run_foreground(tb, cmd)
        line = tb.scheme.summary(tb.stats())
        if line:
            print(f"dch shell: {line}", file=sys.stderr)
        if rc < 0:  # killed by a signal: shell convention
            rc = 128 - rc
        return rc
    except TestbedInterrupted as exc:
        print(f"dch shell: {exc}; testbed removed", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("dch shell: interrupted; testbed removed", file=sys.stderr)
        return 130


EXAMPLES = """examples:
  dch shell --scheme all-llc -- curl -so /dev/null -w '%{time_total}\\n' https://server.test/bytes/100000
  dch shell --llc-outage 5s-7s --hbc-loss-burst 10s-12s:0.2:down -- curl -so /dev/null https://server.test/bytes/20000000"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_shell, epilog=EXAMPLES)
    add_testbed_args(p)
    p.add_argument(
        "--stats", metavar="FILE", help="write per-agent / per-channel counters (JSON) at exit"
    )
    p.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the run directory (daemon logs, stats) after exit",
    )
    p.add_argument(
        "--pcap",
        metavar="DIR",
        help="capture every emulated link into DIR: <link>-uplink.pcap (ue→gw) and <link>-downlink.pcap (gw→ue), raw IP, for Wireshark",
    )
    p.add_argument(
        "--list", action="store_true", help="list schemes and channel presets, then exit"
    )
    p.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        metavar="-- CMD [ARG...]",
        help="command to run on ue (default: a shell)",
    )
