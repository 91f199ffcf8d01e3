"""`dch demo`: run a small page-load comparison (all-hbc, dchannel, all-llc) and write the report.

Run experiments/demo.yaml: real Chromium page loads of generated pages over an emulated
eMBB (40 ms, 200 Mbit/s) + URLLC (5 ms, 2 Mbit/s) pair, paired across schemes; print the
PLT and gain tables with 95% CIs and the report path. Takes a few minutes; finished
loads are reused when run again at the same code revision (use --fresh to measure
again).

Runs experiments/demo.yaml (all-hbc vs dchannel vs all-llc, generated pages, eMBB
40 ms / 200 Mbit/s + URLLC 5 ms / 2 Mbit/s) through the same runner as `dch run`,
prints the summary tables and writes the HTML report. Before starting it checks what
the testbed needs and, if something is missing, says what and how to get it instead
of printing numbers it did not measure.
"""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import replace
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from dchlab.commands import add_command
from dchlab.experiments import analysis as an
from dchlab.experiments import publish, scorecard, store
from dchlab.experiments.campaign import Campaign, load_campaign
from dchlab.experiments.report import build_report
from dchlab.experiments.runner import WorkloadUnavailable, run_campaign
from dchlab.experiments.summary import summarize
from dchlab.paths import repo_root, target_dir


def missing_prerequisites() -> list[str]:
    """What the real page loads need and this machine lacks (empty when ready)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces): run as root")
    for name in ("chanemu", "dchannel", "webreplay"):
        if not (target_dir() / "release" / name).exists():
            missing.append(f"binary {name}: `cargo build --release -p {name}` (or `./dch setup`)")
    if not (os.path.exists("/usr/lib/chromium/chromium") or shutil.which("chromium")):
        missing.append("chromium: apt-get install chromium")
    for tool, pkg in (("dnsmasq", "dnsmasq-base"), ("certutil", "libnss3-tools"), ("curl", "curl")):
        if not shutil.which(tool):
            missing.append(f"{tool}: apt-get install {pkg}")
    return missing


#: The terminal the demo's table must fit without wrapping.
TERMINAL_COLUMNS = 80


def summary_table(c: Campaign, rows: list[dict[str, Any]]) -> RichTable:
    """One row per scheme: mean PLT, paired gain against all-hbc (in % over ms, two
    lines of one cell), bytes on the LLC. Fits TERMINAL_COLUMNS: compact borders, the
    explanation in the caption."""
    cond = c.conditions[0].name
    base = c.analysis.get("baseline", "all-hbc")
    m = an.means(rows, ["plt_ms"])
    gains = an.paired_gains(rows, baseline=base)
    t = RichTable(
        "scheme",
        "PLT ms [CI]",
        "gain % / ms [CI]",
        "LLC %",
        "loads (inv.)",
        title=f"Page load time, {c.conditions[0].hbc} + {c.conditions[0].llc}",
        title_justify="left",
        caption=f"Gain against {base}, paired per page and trial; 95% CI over pages.\n"
        "LLC %: the share of bytes carried on the LLC.",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        show_edge=False,
    )
    for sch in c.schemes:
        mean = m.get((cond, sch.label, "plt_ms"))
        g = gains.get((cond, sch.label))
        llc = an.llc_bytes_pct(
            r
            for r in an.latest_per_cell(rows)
            if an.arm_of(r) == sch.label and an.is_valid(r, "plt_ms")
        )
        t.add_row(
            sch.label,
            mean.value.fmt(0) if mean else "—",
            f"{g.gain_pct.fmt(1, '%')}\n{g.gain_ms.fmt(0, ' ms')}"
            if g
            else ("baseline" if sch.label == base else "—"),
            "—" if llc != llc else f"{llc:.1f}",
            f"{mean.loads} ({mean.invalid})" if mean else "0",
        )
    return t


def cmd_demo(args: argparse.Namespace) -> int:
    console = Console()
    c = load_campaign(repo_root() / "experiments" / "demo.yaml")
    if args.quick:
        c = c.quick()
    if args.trials:
        c = replace(c, trials=args.trials)
    if args.pages:
        c = replace(c, workload=replace(c.workload, pages=args.pages))
    missing = missing_prerequisites()
    if missing:
        console.print(
            "[bold red]dch demo cannot measure page loads on this machine yet[/]; missing:"
        )
        for m in missing:
            console.print(f"  - {m}")
        console.print(
            "Nothing was measured, so no numbers are shown. `./dch doctor` checks everything."
        )
        return 3
    console.print(
        f"[bold]dch demo[/]: {len(c.schemes)} schemes ({', '.join(s.label for s in c.schemes)}) × "
        f"{c.workload.pages} generated pages × {c.trials} trial(s); "
        f"HBC {c.conditions[0].hbc}, LLC {c.conditions[0].llc}. Each load is a fresh testbed "
        "and a fresh Chromium."
    )
    try:
        s = run_campaign(c, store_path=args.store, fresh=args.fresh)
    except WorkloadUnavailable as e:
        console.print(f"[red]dch demo: {e}[/]")
        return 3
    rows = store.load_rows(c.name, store=args.store)
    rev = store.code_revision()[0]
    rows = [r for r in rows if r.get("code_rev") == rev] or rows
    summary = summarize(c, rows)
    console.print(summary_table(c, rows))
    console.print(
        f"{summary.loads} loads ({summary.invalid} invalid, excluded), {summary.failed} failed runs; "
        f"this run: {s.measured} measured, {s.skipped} reused from the store, {s.seconds:.0f} s"
    )
    if s.errors:
        for err in s.errors[:3]:
            console.print(f"  [red]failed[/] {err}")
    out = demo_report(args.store, args.output)
    console.print(f"report: {out}")
    console.print(
        f"results: {store.resolve_path(args.store)} (query with `dch results --campaign demo`)"
    )
    return 0 if summary.loads and not s.failed else 1


def demo_report(store_path: str | None, output: str | None) -> Any:
    """The demo's report: this run's campaign beside the scorecard of the published
    reproduction (results/published), without the campaigns this store has not run."""
    db = publish.published_store()
    try:
        scores = scorecard.store_scorecard(db)
    finally:
        shutil.rmtree(db.parent, ignore_errors=True)
    return build_report(
        store_path,
        output,
        [repo_root() / "experiments" / "demo.yaml"],
        scores=scores,
        featured=["demo"],
        only_run=True,
        scores_source="results/published/ (every campaign: ./dch report --published)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, __doc__, cmd_demo)
    p.add_argument(
        "--quick", action="store_true", help="the campaign's quick subset (2 pages, 1 trial)"
    )
    p.add_argument("--trials", type=int, help="trials per page (default from demo.yaml)")
    p.add_argument("--pages", type=int, help="number of generated pages (default from demo.yaml)")
    p.add_argument(
        "--fresh", action="store_true", help="measure again even if the store has the cells"
    )
    p.add_argument("--store", help="results store (default $DCH_RESULTS or results/dch.duckdb)")
    p.add_argument("-o", "--output", help="report file (default reports/index.html)")
