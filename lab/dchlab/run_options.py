"""The command-line options that choose a testbed run, written once.

`dch shell` and the workload commands (`dch pageload|curl-phases|bulk|app`) add them
with `add_testbed_args`; the workload commands turn them into frozen `RunSpec`s with
`run_specs` (a campaign cell makes its RunSpec in experiments/runner.make_spec; the
paired seed is applied to either in workloads/measure.testbed_config).
"""

from __future__ import annotations

import argparse

from dchlab.workloads.measure import RunSpec


def add_testbed_args(p: argparse.ArgumentParser, *, several_schemes: bool = False) -> None:
    """--scheme, --hbc, --llc, --cc, --seed, --server-delay-ms and the agents' extra
    arguments. `several_schemes`: --scheme takes a comma-separated list (workloads)."""
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
    p.add_argument("--agent-arg", action="append", default=[], metavar="ARG", help="extra argument for both agents (repeatable), e.g. --agent-arg=--reorder --agent-arg=off")  # fmt: skip
    p.add_argument("--client-arg", action="append", default=[], metavar="ARG", help="extra argument for the client agent on ue only, after the --agent-arg ones (repeatable), e.g. --client-arg=--reorder --client-arg=off")  # fmt: skip
    p.add_argument("--gateway-arg", action="append", default=[], metavar="ARG", help="extra argument for the gateway agent on gw only, after the --agent-arg ones (repeatable); --gateway-arg=--reorder --gateway-arg=off keeps the reorder buffer at the client only. Give a value that starts with - as --X-arg=VALUE; a flag may reach an agent once (not in --agent-arg and per role too)")  # fmt: skip


def run_specs(args: argparse.Namespace, trial: int) -> list[RunSpec]:
    """One RunSpec per scheme of --scheme (comma-separated), for `trial`."""
    return [
        RunSpec(
            scheme=s.strip(),
            hbc=args.hbc,
            llc=args.llc,
            seed=args.seed,
            trial=trial,
            cc=args.cc,
            server_delay_ms=args.server_delay_ms,
            agent_args=tuple(args.agent_arg),
            client_args=tuple(args.client_arg),
            gateway_args=tuple(args.gateway_arg),
        )
        for s in args.scheme.split(",")
        if s.strip()
    ]
