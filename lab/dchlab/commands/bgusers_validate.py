"""`dch bgusers-validate`: the background users' bytes and packet sizes per channel against Chromium's.

For each page (and trial): one Chromium load and one load by each --bg-client (the
background users' HTTP-level clients, dchlab.workloads.bgusers) in fresh single-device
testbeds with the same seed, under one scheme; prints per client, channel and direction
the bytes and mean packet sizes of both, summed over the pages, and whether the client
is within 10 % of Chromium (issue 41). Exit status 0 when every metric of every client
agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json

from dchlab import run_options
from dchlab.commands import add_command
from dchlab.workloads import cli_common
from dchlab.workloads.bgusers import clients


def cmd_bgusers_validate(args: argparse.Namespace) -> int:
    from dchlab.pages import open_corpus
    from dchlab.workloads.bgusers import validate

    corpus = open_corpus(args.corpus)
    names = cli_common.chosen_pages(corpus, args.pages, [p.name for p in corpus.pages], None)
    spec = run_options.run_config(args, args.scheme, trial=0)
    by_client = validate.run_clients(spec, corpus, list(names), args.trials, args.bg_clients)
    if args.json:  # one client: its result as before; several: {client: result}
        print(json.dumps(by_client[args.bg_clients[0]] if len(by_client) == 1 else by_client))
    for client, res in by_client.items():
        if args.json:
            break
        print(f"{client}: {res['pairs']} valid pairs; invalid: {res['invalid'] or 'none'}")
        print(f"{'metric':32} {'chromium':>12} {client:>12} {'diff':>8}")
        for m in res["metrics"]:
            mark = "ok" if m["within"] else "OUTSIDE 10%"
            print(
                f"{m['metric']:32} {m['chromium']:12.1f} {m['replay']:12.1f} {m['diff']:+8.1%} {mark}"
            )
    ok = [r["pairs"] and all(m["within"] for m in r["metrics"]) for r in by_client.values()]
    return 0 if all(ok) else 1


def client_list(text: str) -> tuple[str, ...]:
    """argparse type of --bg-client here: one client or several, comma-separated."""
    try:
        return tuple(clients.check(c.strip(), "--bg-client") for c in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_run_args(p: argparse.ArgumentParser) -> None:
    """The testbed options and --corpus of the bgusers commands."""
    run_options.add_testbed_args(p)
    cli_common.add_corpus_arg(
        p, synthetic="synthetic[:SEED[:PAGES]]", default=" = seed 1, 20 pages"
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_bgusers_validate)
    add_run_args(p)
    p.add_argument(
        "--pages", default="5", help="first K pages, or comma-separated page names (default 5)"
    )
    p.add_argument("--trials", type=int, default=1, help="loads per page and client (default 1)")
    p.add_argument("--json", action="store_true", help="the result as one JSON object")
    p.add_argument("--bg-client", dest="bg_clients", type=client_list, default=clients.DEFAULT, metavar="CLIENT[,CLIENT]",
                   help=f"the clients to validate, comma-separated, of {', '.join(clients.CLIENTS)} "
                   "(default %(default)s): each against the same Chromium loads")  # fmt: skip
