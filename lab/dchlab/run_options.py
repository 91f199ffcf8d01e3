"""The command-line options that choose a testbed run, written once.

`dch shell` and the workload commands (`dch pageload|curl-phases|bulk|app`) add them
with `add_testbed_args` and turn them into frozen `RunConfig`s with `run_configs` (a
campaign cell makes its RunConfig in experiments/runner.cell_config; either becomes the
testbed's configuration in dchlab.run_config.testbed_config).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from dchlab import protocol
from dchlab.run_config import RunConfig
from dchlab.testbed import llc_share
from dchlab.traces.faults import Fault, parse_burst, parse_outage, with_faults
from dchlab.workloads.bgusers import clients, think


def add_testbed_args(p: argparse.ArgumentParser, *, several_schemes: bool = False) -> None:
    """--scheme, --hbc, --llc, --cc, --seed, --server-delay-ms, --protocol and the
    agents' extra arguments. `several_schemes`: --scheme takes a comma-separated list (workloads)."""
    what = (
        "comma-separated schemes, e.g. all-hbc,dchannel,mptcp"
        if several_schemes
        else "what runs on ue/gw"
    )
    p.add_argument(
        "--scheme",
        default="dchannel",
        help=f"{what} (default dchannel; `dch shell --list` lists all)",
    )
    p.add_argument(
        "--hbc",
        default="fixed:40ms/200mbit",
        metavar="CH",
        help="high-bandwidth channel: preset, profile .toml, or fixed:<rtt>ms/<rate>mbit (default %(default)s)",
    )
    p.add_argument(
        "--llc",
        default="urllc",
        metavar="CH",
        help="low-latency channel (default %(default)s = 5 ms RTT, 2 Mbit/s)",
    )
    p.add_argument(
        "--cc",
        default="cubic",
        choices=["cubic", "bbr"],
        help="TCP congestion control in every namespace (default cubic)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="trace start offset and emulator randomness; every scheme gets the same "
        "offset for a seed (paired runs; default 1)",
    )
    p.add_argument(
        "--server-delay-ms",
        type=float,
        default=0.0,
        metavar="X",
        help="extra one-way delay between gw and srv (default 0)",
    )
    p.add_argument(
        "--protocol",
        default=protocol.DEFAULT,
        choices=protocol.PROTOCOLS,
        help="page-load protocol: h2 = TLS over TCP as the corpus records each origin's "
        "ALPN, h3 = HTTP/3 over QUIC for every origin from the first request, recorded = "
        "each origin as its corpus entry says (no corpus records QUIC: as h2); default "
        "%(default)s (docs/webreplay.md)",
    )
    p.add_argument(
        "--llc-share",
        default="none",
        choices=llc_share.RULES,
        help="how the devices share the LLC (docs/llc_sharing.md): none = today's agents; "
        "token-bucket = a per-device share at the gateway and each client, the excess on "
        "the HBC; probe = clients learn the shared queue from their LLC probes; priority "
        "= the LLC emulator serves control packets first (default %(default)s)",
    )
    p.add_argument("--agent-arg", action="append", default=[], metavar="ARG", help="extra argument for both agents (repeatable), e.g. --agent-arg=--reorder --agent-arg=off")  # fmt: skip
    p.add_argument("--client-arg", action="append", default=[], metavar="ARG", help="extra argument for the client agent on ue only, after the --agent-arg ones (repeatable), e.g. --client-arg=--reorder --client-arg=off")  # fmt: skip
    p.add_argument("--gateway-arg", action="append", default=[], metavar="ARG", help="extra argument for the gateway agent on gw only, after the --agent-arg ones (repeatable); --gateway-arg=--reorder --gateway-arg=off keeps the reorder buffer at the client only. Give a value that starts with - as --X-arg=VALUE; a flag may reach an agent once (not in --agent-arg and per role too)")  # fmt: skip


def run_config(args: argparse.Namespace, scheme: str, trial: int) -> RunConfig:
    """The RunConfig of the command line for one scheme and `trial`."""
    return RunConfig(
        scheme=scheme,
        hbc=args.hbc,
        llc=args.llc,
        seed=args.seed,
        trial=trial,
        cc=args.cc,
        server_delay_ms=args.server_delay_ms,
        agent_args=tuple(args.agent_arg),
        client_args=tuple(args.client_arg),
        gateway_args=tuple(args.gateway_arg),
        # --speed-index (pageload, session); without it $DCH_SPEED_INDEX decides
        speed_index=True if getattr(args, "speed_index", False) else None,
        protocol=args.protocol,
        llc_share=getattr(args, "llc_share", "none"),
        devices=getattr(args, "devices", 1),
        shared_hbc=getattr(args, "shared_hbc", False),
        bg_think=getattr(args, "bg_think", think.DEFAULT),
        bg_client=getattr(args, "bg_client", clients.DEFAULT),
    )


def bg_think_value(text: str) -> str:
    """argparse type of --bg-think: a think-time spec (dchlab.workloads.bgusers.think) or idle."""
    if text != "idle":
        try:
            think.parse(text, "--bg-think")
        except ValueError as exc:  # argparse shows this message, not "invalid value"
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_device_args(p: argparse.ArgumentParser) -> None:
    """--devices and --shared-hbc of a workload command: ue1 is measured, every other
    device runs a background user (dchlab.workloads.bgusers)."""
    p.add_argument("--devices", type=int, default=1, metavar="N", help="N devices ue1..ueN sharing one LLC link and queue (each with its own client agent and HBC): the workload runs on ue1, ue2..ueN replay page loads of the corpus as background users with 3GPP2 think times (default 1; docs/testbed.md)")  # fmt: skip
    p.add_argument("--shared-hbc", action="store_true", help="with --devices N > 1: the devices share one HBC link too")  # fmt: skip
    p.add_argument("--bg-think", default=think.DEFAULT, type=bg_think_value, metavar="SPEC", help="with --devices N > 1: the background users' think time between pages, exp:MEAN_S, lognormal:MEDIAN_S,SIGMA or fixed:S, or `idle` (no background user: N-1 idle devices); default %(default)s (3GPP2 C.R1002-0 §4.1.1)")  # fmt: skip
    add_bg_client_arg(p)


def add_bg_client_arg(p: argparse.ArgumentParser) -> None:
    """--bg-client: which client the background users run (docs/bgusers.md)."""
    p.add_argument("--bg-client", choices=clients.CLIENTS, default=clients.DEFAULT, help="with --devices N > 1: the background users' client: rust (crates/bguser, Chromium's ClientHello, HTTP/2 settings and DNS; within 10 %% of Chromium per channel, docs/bgusers.md) or python (httpx); default %(default)s")  # fmt: skip


def run_configs(args: argparse.Namespace, trial: int) -> list[RunConfig]:
    """One RunConfig per scheme of --scheme (comma-separated), for `trial`."""
    return [run_config(args, s.strip(), trial) for s in args.scheme.split(",") if s.strip()]


def _fault_value(parse: Callable[[str], Fault]) -> Callable[[str], Fault]:
    def convert(text: str) -> Fault:
        try:
            return parse(text)
        except ValueError as exc:  # argparse shows this message, not "invalid value"
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def _repeat_ms(text: str) -> float:
    try:
        return parse_outage(f"0ms-{text}").to_ms
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a period like 10s or 500ms, got {text!r}"
        ) from None


def add_fault_args(p: argparse.ArgumentParser) -> None:
    """--hbc-outage/--llc-outage, --hbc-loss-burst/--llc-loss-burst, --fault-repeat:
    channel faults on top of --hbc/--llc (chanemu's fault stage, docs/formats.md)."""
    g = p.add_argument_group(
        "channel faults",
        "Times are run time of the link's emulator (it starts with the testbed), windows "
        "FROM-TO are half-open, e.g. 2s-4s or 1500ms-2s; the direction is up (ue→gw), down "
        "(gw→ue) or both (default). A dead link loses what is sent into it and what is on "
        "it; it does not hold packets. Each option is repeatable; a link's windows of one "
        "kind must not overlap.",
    )
    for link in ("hbc", "llc"):
        g.add_argument(f"--{link}-outage", action="append", default=[], type=_fault_value(parse_outage), metavar="FROM-TO[:DIR]", help=f"the {link.upper()} is down from FROM to TO, e.g. 2s-4s or 2s-4s:down")  # fmt: skip
        g.add_argument(f"--{link}-loss-burst", action="append", default=[], type=_fault_value(parse_burst), metavar="FROM-TO:P[:DIR]", help=f"the {link.upper()} loses each packet with probability P from FROM to TO, e.g. 2s-4s:0.3")  # fmt: skip
    g.add_argument("--fault-repeat", type=_repeat_ms, metavar="PERIOD", help="start every link's fault schedule over every PERIOD (e.g. 10s); every window must end within it")  # fmt: skip


def faulty_channels(args: argparse.Namespace) -> tuple[str, str]:
    """--hbc and --llc with the fault options applied: unchanged specs without faults,
    else profile files with a `faults` table (same traces and start offset)."""
    repeat = getattr(args, "fault_repeat", None)
    out = []
    for link in ("hbc", "llc"):
        faults = [*getattr(args, f"{link}_outage", []), *getattr(args, f"{link}_loss_burst", [])]
        out.append(with_faults(getattr(args, link), args.seed, faults, repeat))
    return out[0], out[1]
