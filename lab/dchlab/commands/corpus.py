"""`dch corpus`: inspect, import and generate page corpora (docs/pages.md)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from dchlab.pages.corpus import CorpusError, summary, verify_bodies


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
    from dchlab.pages import open_corpus

    corpus = open_corpus(args.corpus)
    if args.verify:
        problems = verify_bodies(corpus)
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        if problems:
            return 1
    _print_summary(corpus, args.json)
    return 0


def _probe(corpus, pages: list[str] | None = None):  # type: ignore[no-untyped-def]
    """Set each page's `missing` to the failed requests of a real Chromium load over a local
    webreplay (what static analysis of HTML/CSS cannot see: script-made requests, CSS
    rules that match nothing); details go to <corpus>/probe.json."""
    from rich.progress import Progress

    from dchlab.pages.corpus import save
    from dchlab.workloads.localreplay import LocalReplay

    names = pages or [p.name for p in corpus.pages]
    details = {}
    with LocalReplay(corpus) as lr, Progress(transient=True) as prog:
        task = prog.add_task("probing pages", total=len(names))
        for name in names:
            page = corpus.page(name)
            res = lr.load(page.entry_url)
            before = page.missing
            page.missing = int(res.get("resources_failed") or 0)
            details[name] = {
                "missing_before_probe": before,
                "missing": page.missing,
                "failed_urls": res.get("failed_urls", []),
                "valid": res.get("valid"),
                "invalid_reason": res.get("invalid_reason"),
                "plt_ms": res.get("plt_ms"),
                "resources_loaded": res.get("resources_loaded"),
            }
            prog.advance(task)
    save(corpus)
    (corpus.root / "probe.json").write_text(json.dumps(details, indent=1) + "\n")
    return corpus


def cmd_probe(args: argparse.Namespace) -> int:
    from dchlab.pages.corpus import load

    corpus = load(args.corpus)
    pages = args.pages.split(",") if args.pages else None
    _print_summary(_probe(corpus, pages), args.json)
    return 0


def cmd_import_tp5n(args: argparse.Namespace) -> int:
    from dchlab.pages.tp5n import import_tp5n

    sites = args.sites.split(",") if args.sites else None
    corpus, _ = import_tp5n(Path(args.src), Path(args.out), sites)
    if args.probe:
        corpus = _probe(corpus)
    _print_summary(corpus, args.json)
    return 0


def cmd_import_warc(args: argparse.Namespace) -> int:
    from dchlab.pages.warc import import_warc

    files: list[Path] = []
    for s in args.src:
        p = Path(s)
        files += sorted(p.glob("*.warc*")) if p.is_dir() else [p]
    if not files:
        raise CorpusError(f"no WARC files in {' '.join(args.src)}")
    corpus, _ = import_warc(files, Path(args.out))
    if args.probe:
        corpus = _probe(corpus)
    _print_summary(corpus, args.json)
    return 0


def cmd_import_har(args: argparse.Namespace) -> int:
    from dchlab.pages.har import import_har

    files: list[Path] = []
    for s in args.src:
        p = Path(s)
        files += sorted(p.glob("*.har")) if p.is_dir() else [p]
    if not files:
        raise CorpusError(f"no HAR files in {' '.join(args.src)}")
    corpus, _ = import_har(files, Path(args.out))
    if args.probe:
        corpus = _probe(corpus)
    _print_summary(corpus, args.json)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from dchlab.pages.generator import generate

    corpus = generate(Path(args.out), args.seed, args.pages)
    _print_summary(corpus, args.json)
    return 0


def _guard(func):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except CorpusError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

    return run


PROBE_HELP = (
    "load every page once in headless Chromium over a local webreplay (private network "
    "namespace, no channels; needs root) and set its `missing` to the requests that failed "
    "— including script-made ones static analysis cannot see; details in probe.json"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "corpus",
        help="page corpora: info, import (tp5n saved trees, WARC, HAR), probe, generate",
        description=(
            "Page corpora for `dch pageload` (format: docs/formats.md, guide: docs/pages.md). "
            "A corpus is a directory with manifest.json and bodies/, or `synthetic[:SEED]` "
            "for the built-in generated corpus."
        ),
    )
    ps = p.add_subparsers(dest="corpus_cmd", metavar="SUBCOMMAND", required=True)

    info = ps.add_parser("info", help="validate a corpus and list its pages")
    info.add_argument("corpus", help="corpus directory or synthetic[:SEED[:PAGES]]")
    info.add_argument("--verify", action="store_true", help="also hash every body")
    info.add_argument("--json", action="store_true", help="one JSON object per page")
    info.set_defaults(func=_guard(cmd_info))

    tp = ps.add_parser(
        "import-tp5n",
        help="import a saved-page tree (tp5n layout: <site>/<host>/<path>)",
        description=(
            "Import saved pages: one folder per page, one folder per original host inside; "
            "relative cross-host references become https://<host>/... URLs, `@` in saved "
            "names becomes `?`, missing subresources are counted per page."
        ),
    )
    tp.add_argument("src", help="tree root, e.g. ../shared/data/pages/tp5n")
    tp.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    tp.add_argument("--sites", help="comma-separated site folders (default: all)")
    tp.add_argument("--json", action="store_true", help="one JSON object per page")
    tp.add_argument("--probe", action="store_true", help=PROBE_HELP)
    tp.set_defaults(func=_guard(cmd_import_tp5n))

    wa = ps.add_parser("import-warc", help="import WARC captures (one page per file)")
    wa.add_argument("src", nargs="+", help="WARC files or directories of them")
    wa.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    wa.add_argument("--json", action="store_true", help="one JSON object per page")
    wa.add_argument("--probe", action="store_true", help=PROBE_HELP)
    wa.set_defaults(func=_guard(cmd_import_warc))

    ha = ps.add_parser("import-har", help="import HAR captures saved with content")
    ha.add_argument("src", nargs="+", help="HAR files or directories of them")
    ha.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    ha.add_argument("--json", action="store_true", help="one JSON object per page")
    ha.add_argument("--probe", action="store_true", help=PROBE_HELP)
    ha.set_defaults(func=_guard(cmd_import_har))

    pr = ps.add_parser(
        "probe",
        help="count each page's missing requests with a real Chromium load (root)",
        description=PROBE_HELP,
    )
    pr.add_argument("corpus", help="corpus directory (its manifest is updated)")
    pr.add_argument("--pages", help="comma-separated page names (default: all)")
    pr.add_argument("--json", action="store_true", help="one JSON object per page")
    pr.set_defaults(func=_guard(cmd_probe))

    ge = ps.add_parser(
        "generate",
        help="generate a synthetic corpus from HTTP Archive statistics",
        description=(
            "Generate pages with Web Almanac statistics (median ~70 requests / ~2 MB, "
            "p90 ~180 / ~6 MB, 5-20 origins, dependency chains >= 3 deep). "
            "Deterministic per seed."
        ),
    )
    ge.add_argument("-o", "--out", required=True, help="corpus directory to write (replaced)")
    ge.add_argument("--seed", type=int, default=1, help="RNG seed (default 1)")
    ge.add_argument("--pages", type=int, default=20, help="number of pages (default 20)")
    ge.add_argument("--json", action="store_true", help="one JSON object per page")
    ge.set_defaults(func=_guard(cmd_generate))
