"""`dch curl-phases`: DNS, TCP connect, TLS, transfer and total time of a curl fetch (Table 2).

Fetch URL with curl on ue in a fresh testbed per scheme and trial, and break the time
down from curl -w: DNS = time_namelookup, TCP = time_connect - time_namelookup, TLS =
time_appconnect - time_connect, transfer = time_total - time_appconnect, total =
time_total (ms). With `--protocol h3` the fetch is HTTP/3 with the `h3get` client: the
connect phase is the QUIC handshake (TCP and TLS in one round trip), TLS is 0.
"""

from __future__ import annotations

import argparse
from typing import Any

from dchlab.commands import add_command
from dchlab.run_options import run_configs
from dchlab.workloads.cli_common import add_common, fmt_ms, run_jobs


def _show(row: dict[str, Any]) -> str:
    if not row["valid"]:
        return (
            f"{row['scheme']:<14} trial {row['trial']}  [red]invalid: {row['invalid_reason']}[/red]"
        )
    connect = "QUIC" if row.get("protocol") == "h3" else "TCP"
    return (
        f"{row['scheme']:<14} trial {row['trial']}  DNS {fmt_ms(row['dns_ms'])}  "
        f"{connect} {fmt_ms(row['connect_ms'])}  TLS {fmt_ms(row['tls_ms'])}  "
        f"transfer {fmt_ms(row['transfer_ms'])}  total {fmt_ms(row['total_ms'])} ms"
    )


def cmd_curl_phases(args: argparse.Namespace) -> int:
    from dchlab.workloads.api import curl_phases

    jobs = []
    for trial in range(args.trials):
        for spec in run_configs(args, trial):
            jobs.append((f"{spec.scheme} #{trial}", lambda s=spec: [curl_phases(s, args.url)]))
    return run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    from dchlab.workloads.api import DEFAULT_CURL_URL

    p = add_command(sub, __doc__, cmd_curl_phases)
    p.add_argument("url", nargs="?", default=DEFAULT_CURL_URL, help=f"default {DEFAULT_CURL_URL}")
    add_common(p)
