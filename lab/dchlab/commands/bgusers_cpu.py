"""`dch bgusers-cpu`: the CPU that N devices with background users cost this machine.

For each N of --devices: a fresh N-device testbed under --scheme, background users on
ue2..ueN (dchlab.workloads.bgusers) for --seconds, and the cores used by the run's
emulators, agents, users and servers, with the time to build the testbed and start the
users (dchlab.workloads.bgusers.cpu). The measured device stays idle.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from dchlab import run_options
from dchlab.commands import add_command
from dchlab.commands.bgusers_validate import add_run_args


def cmd_bgusers_cpu(args: argparse.Namespace) -> int:
    from dchlab.pages import open_corpus
    from dchlab.run_config import testbed_config
    from dchlab.workloads.bgusers import background, cpu

    corpus = open_corpus(args.corpus)
    pages = tuple(p.name for p in corpus.pages)
    users = background.Users(corpus, pages, args.bg_think, args.seed, client=args.bg_client)
    for n in (int(x) for x in args.device_counts.split(",")):
        run = run_options.run_config(args, args.scheme, trial=0)
        cfg = testbed_config(run, None, corpus.root)
        res = cpu.measure(replace(cfg, devices=n), users, args.seconds)
        print(json.dumps(res), flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_bgusers_cpu)
    add_run_args(p)
    p.add_argument(
        "--devices",
        dest="device_counts",
        metavar="N,...",
        default="1,2,4,8,16",
        help="comma-separated N (default %(default)s)",
    )
    p.add_argument("--seconds", type=float, default=30.0, help="measuring window (default 30)")
    p.add_argument("--bg-think", default="exp:30", type=run_options.bg_think_value,
                   help="background users' think time (default exp:30)")  # fmt: skip
    run_options.add_bg_client_arg(p)
