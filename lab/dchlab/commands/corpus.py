"""`dch corpus`: page corpora: info, import (tp5n saved trees, WARC, HAR), probe, generate.

Page corpora for `dch pageload` (format: docs/formats.md, guide: docs/pages.md). A
corpus is a directory with manifest.json and bodies/, or `synthetic[:SEED]` for the
built-in generated corpus.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

from dchlab.commands import add_command
from dchlab.pages.corpus import CorpusError, summary, tier_mix, verify_bodies
from dchlab.pages.litter import litter_reason
from dchlab.workloads.probe import probe_corpus

log = logging.getLogger(__name__)


def _capture_files(srcs: list[str], pattern: str) -> list[Path]:
    """Capture files named on the command line or found in directories; litter such as
    macOS `._x.warc.gz` AppleDouble files is skipped with a warning."""
    files: list[Path] = []
    for s in srcs:
        p = Path(s)
        for f in sorted(p.glob(pattern)) if p.is_dir() else [p]:
            why = litter_reason(f.name)
            if why is not None:
                log.warning("skipped %s: %s", f, why)
            else:
                files.append(f)
    return files


def _print_summary(corpus, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    rows = summary(corpus)
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{corpus.name} — {corpus.source}")
    for col in ("page", "requests", "MB", "origins", "missing", "entry URL"):
        t.add_column(col, justify="right" if col not in ("page", "entry URL") else "left")
    for r in rows:
        t.add_row(
            r["page"],
            str(r["requests"]),
            f"{r['bytes'] / 1e6:.2f}",
            str(r["origins"]),
            str(r["missing"]),
            r["entry_url"],
        )
    con = Console()
    con.print(t)
    if rows:
        con.print(
            f"{len(rows)} pages, {len(corpus.objects)} objects, {len(corpus.origins)} origins; "
            f"median {statistics.median(r['requests'] for r in rows):.0f} requests, "
            f"{statistics.median(r['bytes'] for r in rows) / 1e6:.2f} MB per page"
        )


def cmd_info(args: argparse.Namespace) -> int:
    """`dch corpus info`: validate a corpus and list its pages."""
    from dchlab.pages import open_corpus

    corpus = open_corpus(args.corpus)
    if args.verify:
        # load() already refused what webreplay's parsers would (host names, headers);
        # --verify also hashes every body and asks webreplay itself.
        problems = verify_bodies(corpus) + replay_check(corpus)
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        if problems:
            return 1
    _print_summary(corpus, args.json)
    _print_tiers(corpus, args)
    return 0


def _print_tiers(corpus, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    """The CDN tier mix: objects and bytes per tier, from the recorded headers or (the
    rest) from the hit ratio webreplay would apply with --cdn-hit-ratio/--cdn-seed."""
    from dchlab.pages.cdn import parse_hit_ratio

    ratio = parse_hit_ratio(args.cdn_hit_ratio) if args.cdn_hit_ratio else None
    rows = tier_mix(corpus, ratio, args.cdn_seed)
    if args.json:
        print(json.dumps({"tier_mix": rows}))
        return
    from rich.console import Console
    from rich.table import Table

    total_n = sum(r["objects"] for r in rows) or 1
    total_b = sum(r["bytes"] for r in rows) or 1
    t = Table(title="CDN tiers (docs/formats.md)")
    for col in ("source", "tier", "objects", "%", "MB", "% bytes"):
        t.add_column(col, justify="left" if col in ("source", "tier") else "right")
    for r in rows:
        t.add_row(
            r["source"],
            r["tier"],
            str(r["objects"]),
            f"{100 * r['objects'] / total_n:.1f}",
            f"{r['bytes'] / 1e6:.2f}",
            f"{100 * r['bytes'] / total_b:.1f}",
        )
    Console().print(t)


def replay_check(corpus) -> list[str]:  # type: ignore[no-untyped-def]
    """`webreplay --check` over the corpus and a hosts file of its origins (the parsers a
    testbed start would run); [] when it accepts both, or when webreplay is not built
    (then a warning: the Python checks stand alone)."""
    import subprocess
    import tempfile

    from dchlab.paths import binary

    try:
        exe = binary("webreplay")
    except FileNotFoundError as e:
        log.warning("not asking webreplay (%s)", e)
        return []
    with tempfile.TemporaryDirectory(prefix="dch-verify-") as tmp:
        hosts = Path(tmp) / "hosts"
        # Addresses do not matter to the parser; one per origin, as the testbed gives.
        hosts.write_text(
            "".join(
                f"198.19.{128 + i // 250}.{1 + i % 250} {o.host}\n"
                for i, o in enumerate(corpus.origins)
            )
            or "198.19.128.1 server.test\n"
        )
        p = subprocess.run(
            [str(exe), "--check", "--hosts", str(hosts), "--corpus", str(corpus.root)],
            capture_output=True,
            text=True,
        )
    if p.returncode == 0:
        return []
    if "unexpected argument '--check'" in p.stderr:
        log.warning("%s predates --check; rebuild it (cargo build --release -p webreplay)", exe)
        return []
    msg = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return [f"webreplay refuses {corpus.root}: {msg.removeprefix('webreplay: error: ')}"]


def cmd_probe(args: argparse.Namespace) -> int:
    from dchlab.pages.corpus import load

    corpus = load(args.corpus)
    pages = args.pages.split(",") if args.pages else None
    _print_summary(probe_corpus(corpus, pages), args.json)
    return 0


def cmd_import_tp5n(args: argparse.Namespace) -> int:
    """`dch corpus import-tp5n`: import a saved-page tree (tp5n layout: <site>/<host>/<path>).

    Import saved pages: one folder per page, one folder per original host inside;
    relative cross-host references become https://<host>/... URLs, `@` in saved names
    becomes `?`, missing subresources are counted per page.
    """
    from dchlab.pages.tp5n import import_tp5n

    sites = args.sites.split(",") if args.sites else None
    corpus, _ = import_tp5n(Path(args.src), Path(args.out), sites)
    if corpus.skipped:
        print(
            f"skipped {sum(corpus.skipped.values())} entries: "
            + ", ".join(f"{n} {why}" for why, n in corpus.skipped.items())
            + " (warnings above name them)",
            file=sys.stderr,
        )
    if args.probe:
        corpus = probe_corpus(corpus)
    _print_summary(corpus, args.json)
    return 0


def _import_captures(args: argparse.Namespace, kind: str, pattern: str, importer: Any) -> int:
    files = _capture_files(args.src, pattern)
    if not files:
        raise CorpusError(f"no {kind} files in {' '.join(args.src)}")
    corpus, _ = importer(files, Path(args.out))
    if args.probe:
        corpus = probe_corpus(corpus)
    _print_summary(corpus, args.json)
    return 0


def cmd_import_warc(args: argparse.Namespace) -> int:
    """`dch corpus import-warc`: import WARC captures (one page per file)."""
    from dchlab.pages.warc import import_warc

    return _import_captures(args, "WARC", "*.warc*", import_warc)


def cmd_import_har(args: argparse.Namespace) -> int:
    """`dch corpus import-har`: import HAR captures saved with content."""
    from dchlab.pages.har import import_har

    return _import_captures(args, "HAR", "*.har", import_har)


def cmd_generate(args: argparse.Namespace) -> int:
    """`dch corpus generate`: generate a synthetic corpus from HTTP Archive statistics.

    Generate pages with Web Almanac statistics (median ~70 requests / ~2 MB, p90 ~180 /
    ~6 MB, 5-20 origins, dependency chains >= 3 deep). Deterministic per seed.
    """
    from dchlab.pages.generator import generate

    corpus = generate(Path(args.out), args.seed, args.pages)
    _print_summary(corpus, args.json)
    return 0


PROBE_HELP = (
    "load every page once in headless Chromium over a local webreplay (private network "
    "namespace, no channels; needs root) and record the requests that failed as the page's "
    "`missing_urls` (replacing the importer's static analysis) — including script-made "
    "ones static analysis cannot see; loads failing only those are valid; details in "
    "probe.json"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, None)
    ps = p.add_subparsers(dest="corpus_cmd", metavar="SUBCOMMAND", required=True)

    info = add_command(ps, cmd_info.__doc__, cmd_info)
    info.add_argument("corpus", help="corpus directory or synthetic[:SEED[:PAGES]]")
    info.add_argument(
        "--verify",
        action="store_true",
        help="also hash every body and ask webreplay (--check) whether it can serve the corpus",
    )
    info.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per page, then one {"tier_mix": [...]}',
    )
    info.add_argument(
        "--cdn-hit-ratio",
        metavar="edge=P,parent=P",
        help="show the tiers webreplay would draw for objects without recorded CDN headers "
        "(default: list them as source ratio, tier unset)",
    )
    info.add_argument(
        "--cdn-seed", type=int, default=1, help="seed of that draw (webreplay --cdn-seed)"
    )

    tp = add_command(ps, cmd_import_tp5n.__doc__, cmd_import_tp5n)
    tp.add_argument("src", help="tree root, e.g. ../shared/data/pages/tp5n")
    tp.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    tp.add_argument("--sites", help="comma-separated site folders (default: all)")
    tp.add_argument("--json", action="store_true", help="one JSON object per page")
    tp.add_argument("--probe", action="store_true", help=PROBE_HELP)

    wa = add_command(ps, cmd_import_warc.__doc__, cmd_import_warc)
    wa.add_argument("src", nargs="+", help="WARC files or directories of them")
    wa.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    wa.add_argument("--json", action="store_true", help="one JSON object per page")
    wa.add_argument("--probe", action="store_true", help=PROBE_HELP)

    ha = add_command(ps, cmd_import_har.__doc__, cmd_import_har)
    ha.add_argument("src", nargs="+", help="HAR files or directories of them")
    ha.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    ha.add_argument("--json", action="store_true", help="one JSON object per page")
    ha.add_argument("--probe", action="store_true", help=PROBE_HELP)

    pr = ps.add_parser(
        "probe",
        help="count each page's missing requests with a real Chromium load (root)",
        description=PROBE_HELP,
    )
    pr.add_argument("corpus", help="corpus directory (its manifest is updated)")
    pr.add_argument("--pages", help="comma-separated page names (default: all)")
    pr.add_argument("--json", action="store_true", help="one JSON object per page")
    pr.set_defaults(func=cmd_probe)

    ge = add_command(ps, cmd_generate.__doc__, cmd_generate)
    ge.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    ge.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    ge.add_argument("--pages", type=int, default=20, help="number of pages (default 20)")
    ge.add_argument("--json", action="store_true", help="one JSON object per page")
