"""`dch app`: interaction response time of app-like workloads (social, shopping, news).

Run app interactions (launch, search, item) of app profiles in Chromium on ue, once per
interaction, trial and scheme, each trial a fresh testbed and a cold app. The app's
single-page client sends the interaction's API and image requests in dependency order;
IRT = input event -> end screen painted. search and item run after a launch in the same
session (warm connections). For an item and trial every scheme sees the same trace
offset (paired). A trial with an unanswered request is invalid. See docs/apps.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dchlab.commands import add_command
from dchlab.workloads.cli_common import add_browser_args, fmt_ms, load_line, paired_runs, run_jobs


def _show(row: dict[str, Any]) -> str:
    return load_line(
        row,
        f"IRT {fmt_ms(row.get('irt_ms'))} ms, {row.get('requests_answered')}/{row.get('requests')} "
        f"requests, HBC {row.get('bytes_hbc')} B, LLC {row.get('bytes_llc')} B",
    )


def _list() -> int:
    from dchlab.apps.compile import cached_corpus, shell_url
    from dchlab.apps.profile import builtin_profiles, load_profile

    for name in builtin_profiles():
        p = load_profile(name)
        print(f"{name}: {p.description}")
        print(f"  origins: {', '.join(f'{r}={h}' for r, h in p.origins.items())}")
        # The compiled corpus, e.g. for `dch shell --corpus DIR` and a browser on ue.
        print(f"  corpus: {cached_corpus(p).root} (app shell {shell_url(p)})")
        for iname, it in p.interactions.items():
            json_n = sum(r.kind == "json" for r in it.requests)
            kb = sum(r.size for r in it.requests) / 1000
            think = sum(r.think_ms for r in it.requests if r.kind == "json")
            print(
                f"  {iname:<7} {len(it.requests):>3} requests ({json_n} JSON), {kb:.0f} KB, "
                f"dependency depth {it.depth()}, JSON think time total {think:.0f} ms"
            )
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    from dchlab.apps.profile import INTERACTIONS, load_profile
    from dchlab.apps.run import app

    if args.list:
        return _list()
    profiles = [load_profile(x.strip()) for x in args.profile.split(",") if x.strip()]
    inters = [x.strip() for x in args.interaction.split(",") if x.strip()]
    bad = [i for i in inters if i not in INTERACTIONS]
    if bad or not inters:
        print(
            f"error: --interaction: unknown {', '.join(bad) or '(none)'}: expected "
            f"{', '.join(INTERACTIONS)}",
            file=sys.stderr,
        )
        return 2
    if args.trials < 1:
        print("error: --trials must be >= 1", file=sys.stderr)
        return 2
    items = [(p, inter) for p in profiles for inter in inters]
    jobs = []
    for (p, inter), trial, spec in paired_runs(args, items):
        label = f"{spec.scheme} {p.name}/{inter} #{trial}"
        jobs.append((label, lambda s=spec, p=p, i=inter: [app(s, p, i, args.timeout)]))
    return run_jobs(jobs, args, _show)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_app)
    p.add_argument(
        "--profile",
        default="social",
        help="comma-separated app profiles: social, shopping, news, or profile file paths "
        "(default social)",
    )
    p.add_argument(
        "--interaction",
        default="launch",
        help="comma-separated interactions: launch, search, item (default launch)",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="describe the built-in profiles and their compiled corpora, and exit",
    )
    add_browser_args(p, timeout_per="interaction")
