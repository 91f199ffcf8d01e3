"""`dch sim`: a URLLC cell shared by many users, in simulation (issue 41, item 5).

Capture one user's page loads in the testbed (the agents' decision logs: every inner
packet, both directions), turn them into traces, measure one user's LLC demand, then
replay N users through the real steering core into one shared LLC (`llcsim`,
crates/llcsim) over a grid of cells, sharded over Ray. docs/llc_sharing.md
("Beyond one machine") has the method, the numbers and what the simulation leaves out.

Subcommands:
  capture --pages A,B -o DIR     page loads under dchannel with decision logs (DIR/PAGE/)
  traces DIR -o TRACES           decision logs -> per-page traces (TRACES/PAGE.csv)
  demand TRACES [--think-s T]    one user's LLC demand: per load, per second, bursts
  run TRACES --users ... -o DIR  the grid -> DIR/cells.parquet, DIR/pages.parquet
  capacity DIR/cells.parquet     users per cell before the LLC's p95 wait exceeds X
  compare TRACES PAGES           per page: the testbed's LLC share of packets vs llcsim's
  vs-testbed ROWS --grid DIR     the N-device testbed's rows vs llcsim at the same C, N, rule
  compare-testbed ROWS --grid DIR ...  the same per background load (think time), with CIs
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
from pathlib import Path

from dchlab.commands import add_command
from dchlab.errors import UserError

log = logging.getLogger("dch.sim")


def _csv_list(kind: type, text: str) -> list:  # type: ignore[type-arg]
    try:
        return [kind(v) for v in text.split(",") if v.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected comma-separated {kind.__name__}s"
        ) from e


def cmd_capture(args: argparse.Namespace) -> int:
    """`dch sim capture --pages A,B -o DIR`: record one user's page loads for the simulator.

    Runs `dch pageload` once per page (Chromium, dchannel, the given channels) with both
    agents writing their decision logs into DIR/PAGE/uplink.csv (client) and
    DIR/PAGE/downlink.csv (gateway); the page-load row goes to DIR/PAGE/row.json.
    """
    out = Path(args.output)
    dch = Path(__file__).resolve().parents[3] / "dch"
    failed = []
    for page in args.pages:
        d = out / page
        d.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(dch), "pageload", "--corpus", args.corpus, "--pages", page,
            "--scheme", args.scheme, "--hbc", args.hbc, "--llc", args.llc,
            "--seed", str(args.seed), "--no-store", "--json",
            "--client-arg=--decision-log", f"--client-arg={d / 'uplink.csv'}",
            "--gateway-arg=--decision-log", f"--gateway-arg={d / 'downlink.csv'}",
        ]  # fmt: skip
        log.info("capturing %s", page)
        with (d / "row.json").open("w") as row:
            if subprocess.run(cmd, stdout=row, check=False).returncode != 0:
                failed.append(page)
    if failed:
        raise UserError(f"page loads failed: {', '.join(failed)} (see their row.json)")
    return 0


def cmd_traces(args: argparse.Namespace) -> int:
    """`dch sim traces DIR -o TRACES`: decision logs of captured page loads -> traces.

    Every DIR/PAGE/ holding uplink.csv and downlink.csv becomes TRACES/PAGE.csv
    (dchlab/sim/logs.py has the format).
    """
    from dchlab.sim import logs

    src, out = Path(args.captures), Path(args.output)
    pages = sorted(
        p for p in src.iterdir() if (p / "uplink.csv").exists() and (p / "downlink.csv").exists()
    )
    if not pages:
        raise UserError(f"{src}: no PAGE/ with uplink.csv and downlink.csv (run `dch sim capture`)")
    out.mkdir(parents=True, exist_ok=True)
    for p in pages:
        n, skipped = logs.convert(p, out / f"{p.name}.csv")
        print(
            f"{p.name}: {n} packets" + (f" ({skipped} without a flow left out)" if skipped else "")
        )
    return 0


def cmd_demand(args: argparse.Namespace) -> int:
    """`dch sim demand TRACES`: one user's LLC demand from its page-load traces.

    Per page load: LLC kbit (wire bytes, both directions), span, peak LLC rate over 10 and
    100 ms windows; then the mean per load, per second of browsing (think times of mean
    --think-s), and the users a cell of each --capacity-mbit carries by the fluid bound.
    """
    from dchlab.sim import capacity, demand, logs

    files = sorted(Path(args.traces).glob("*.csv"))
    if not files:
        raise UserError(f"{args.traces}: no *.csv trace in it (make them with `dch sim traces`)")
    pages = [demand.page_demand(f.stem, logs.read_trace(f)) for f in files]
    rate = demand.browsing_rate_bps(pages, args.think_s)
    n = len(pages)
    up = sum(p.llc_bits_up for p in pages) / n / (sum(p.span_s for p in pages) / n + args.think_s)
    busier = max(up, rate - up)
    result = {
        "pages": [p.__dict__ for p in pages],
        "mean_llc_kbit_per_load": sum(p.llc_bits for p in pages) / n / 1e3,
        "mean_span_s": sum(p.span_s for p in pages) / n,
        "think_s": args.think_s,
        "browsing_llc_kbit_s": rate / 1e3,
        "browsing_llc_kbit_s_busier_direction": busier / 1e3,
        "max_peak_10ms_mbit": max(p.peak_10ms_mbit for p in pages),
        "max_peak_100ms_mbit": max(p.peak_100ms_mbit for p in pages),
        "fluid_users": {str(c): capacity.fluid_users(c * 1e6, busier) for c in args.capacity_mbit},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{'page':24} {'span s':>7} {'pkts':>6} {'llc':>5} {'LLC kbit':>9} {'peak10ms':>9} {'peak100ms':>9}"
    )
    for p in pages:
        print(
            f"{p.page:24} {p.span_s:7.2f} {p.pkts:6} {p.llc_pkts:5} {p.llc_bits / 1e3:9.1f}"
            f" {p.peak_10ms_mbit:9.2f} {p.peak_100ms_mbit:9.2f}"
        )
    print(
        f"mean per load: {result['mean_llc_kbit_per_load']:.1f} kbit on the LLC over {result['mean_span_s']:.2f} s"
    )
    print(
        f"per second of browsing (think {args.think_s} s, exponential): {rate / 1e3:.2f} kbit/s"
        f" ({busier / 1e3:.2f} kbit/s on the busier direction)"
    )
    for c, u in result["fluid_users"].items():
        print(f"  C = {c} Mbit/s per direction: at most {u:.0f} browsing users (fluid bound)")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """`dch sim run TRACES --users N,... --capacity-mbit C,... -o DIR`: simulate a grid of cells.

    Every (users, capacity, rule, seed) is one `llcsim` run: N users browsing the traces
    (uniform start offsets in [0, think), exponential think times), each packet steered
    by the real core, LLC packets queued in one shared queue per direction. Cells run on
    a local Ray of --workers CPUs (0: in this process). Writes DIR/cells.parquet (one row
    per cell) and DIR/pages.parquet (one row per page load).
    """
    from rich.console import Console

    from dchlab.progress import bar
    from dchlab.sim import grid

    try:
        cells = grid.grid(args.users, args.capacity_mbit, args.rules, args.seeds)
        opts = grid.SimOptions(
            policy=args.policy,
            hbc_owd_ms=args.hbc_owd_ms,
            llc_owd_ms=args.llc_owd_ms,
            duration_s=args.duration_s,
            think_s=args.think_s,
        )
        console = Console(stderr=True)
        with bar(console, status=True) as progress:
            task = progress.add_task("sim", total=len(cells), status="")

            def done(cell: grid.Cell, row: dict) -> None:  # type: ignore[type-arg]
                status = f"N={cell.users} C={cell.capacity_mbit} {cell.rule}: p95 {row['wait_p95_ms']} ms"
                progress.update(task, advance=1, status=status)

            cell_rows, page_rows = grid.run(cells, Path(args.traces), opts, args.workers, done)
    except (ValueError, FileNotFoundError) as e:
        raise UserError(str(e)) from e
    out = Path(args.output)
    grid.write_parquet(cell_rows, out / "cells.parquet")
    grid.write_parquet(page_rows, out / "pages.parquet")
    print(
        f"{len(cell_rows)} cells, {len(page_rows)} page loads -> {out}/cells.parquet, {out}/pages.parquet"
    )
    return 0


def cmd_capacity(args: argparse.Namespace) -> int:
    """`dch sim capacity CELLS`: users per cell before the shared LLC's p95 wait exceeds X.

    From a grid's cells.parquet: per (capacity, rule), the largest N (every smaller N of
    the grid within too) whose cell-wide LLC queueing delay p95, averaged over seeds, is
    within --threshold-ms. Default: the grid's HBC-LLC one-way gap (hbc_owd_ms -
    llc_owd_ms, 7.5 ms for MM-S and urllc): an LLC packet that waits longer arrives
    later than it would have on the HBC, so the LLC no longer pays off for it.
    """
    import pyarrow.parquet as pq

    from dchlab.sim import capacity

    rows = pq.read_table(args.cells).to_pylist()
    if not rows:
        raise UserError(f"{args.cells}: no cells")
    threshold = args.threshold_ms
    if threshold is None:
        gaps = {r["hbc_owd_ms"] - r["llc_owd_ms"] for r in rows}
        if len(gaps) != 1:
            raise UserError(
                f"{args.cells}: cells with different delays {sorted(gaps)}; give --threshold-ms"
            )
        threshold = gaps.pop()
    groups: dict[tuple[int, float, str], list[float]] = {}
    for r in rows:
        p95 = r["wait_p95_ms"]
        groups.setdefault((r["users"], r["capacity_mbit"], r["rule"]), []).append(
            float("inf") if p95 is None else p95
        )
    mean = [
        {"users": u, "capacity_mbit": c, "rule": rule, "wait_p95_ms": sum(v) / len(v)}
        for (u, c, rule), v in groups.items()
    ]
    knees = capacity.knee(mean, threshold)
    largest: dict[tuple[float, str], int] = {}
    for users, c, rule in groups:
        largest[(c, rule)] = max(largest.get((c, rule), 0), users)
    print(f"users per cell with LLC queueing p95 <= {threshold:g} ms (grid points only):")
    for (c, rule), n in sorted(knees.items()):
        # the grid's largest N still within: the cell carries at least that many
        at_least = ">= " if n == largest[(c, rule)] else ""
        print(
            f"  C = {c:g} Mbit/s, rule {rule}: {at_least}{n} users ({at_least}{n / c:.3g} per Mbit/s)"
        )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """`dch sim compare TRACES PAGES`: the testbed's LLC share of packets against llcsim's, per page.

    TRACES: the captured traces (their `channel` is what the testbed's agents chose);
    PAGES: a grid's pages.parquet (e.g. one user, the capture's C, rule none, long
    --duration-s so that every page is replayed many times). Prints, per page, the
    captured fraction of packets on the LLC and the simulated mean over its loads. With
    --captures (the `dch sim capture` directory), also the testbed's LLC link delay
    (p50, p99 per direction, from each PAGE/row.json, minus --base-ms) beside llcsim's
    mean wait p50 and p99: the link's delay includes the packet's own transmission,
    llcsim's wait does not.
    """
    import pyarrow.parquet as pq

    from dchlab.sim import logs

    sim: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for r in pq.read_table(args.pages).to_pylist():
        sim.setdefault(r["page"], []).append(r)
    files = sorted(Path(args.traces).glob("*.csv"))
    if not files:
        raise UserError(f"{args.traces}: no *.csv trace in it")
    print(f"{'page':24} {'testbed':>8} {'llcsim':>8} {'loads':>6}")
    diffs = []
    for f in files:
        packets = logs.read_trace(f)
        captured = sum(p.channel == "llc" for p in packets) / max(1, len(packets))
        got = [float(r["llc_frac"]) for r in sim.get(f.stem, [])]
        mean = sum(got) / len(got) if got else float("nan")
        if got:
            diffs.append(abs(mean - captured))
        print(f"{f.stem:24} {captured:8.3f} {mean:8.3f} {len(got):6}")
    if diffs:
        print(
            f"mean |difference| {sum(diffs) / len(diffs):.3f}, max {max(diffs):.3f} ({len(diffs)} pages)"
        )
    if args.captures:
        _compare_delays(Path(args.captures), [f.stem for f in files], sim, args.base_ms)
    return 0


def _mean_of(rows: list[dict], key: str) -> float:  # type: ignore[type-arg]
    values = [float(r[key]) for r in rows if r[key] is not None]
    return sum(values) / len(values) if values else float("nan")


def _compare_delays(
    captures: Path,
    pages: list[str],
    sim: dict[str, list[dict]],  # type: ignore[type-arg]
    base_ms: float,
) -> None:
    """The testbed's LLC link delay beyond the base against llcsim's wait (cmd_compare)."""
    print(
        f"LLC delay beyond {base_ms:g} ms (testbed link, incl. own transmission) vs llcsim wait, ms:"
    )
    print(
        f"{'page':24} {'up p50':>7} {'up p99':>7} {'dn p50':>7} {'dn p99':>7} {'sim p50':>8} {'sim p99':>8}"
    )
    for page in pages:
        row_file = captures / page / "row.json"
        try:
            lines = row_file.read_text().splitlines()
            links = json.loads(lines[-1])["stats"]["links"]["llc"]
        except (OSError, IndexError, ValueError, KeyError, TypeError):
            print(f"{page:24} (no page-load row with link stats in {row_file})")
            continue
        up, down = links["uplink"]["delay_ms"], links["downlink"]["delay_ms"]
        rows = sim.get(page, [])
        print(
            f"{page:24} {up['p50'] - base_ms:7.2f} {up['p99'] - base_ms:7.2f}"
            f" {down['p50'] - base_ms:7.2f} {down['p99'] - base_ms:7.2f}"
            f" {_mean_of(rows, 'wait_p50_ms'):8.2f} {_mean_of(rows, 'wait_p99_ms'):8.2f}"
        )


def cmd_vs_testbed(args: argparse.Namespace) -> int:
    """`dch sim vs-testbed ROWS --grid DIR`: the N-device testbed against llcsim at the same C, N, rule.

    ROWS: the testbed study's parquet (experiments/urllc_share.yaml's rows); DIR: a grid
    with cells.parquet and pages.parquet. Per (C, N, rule) both have: the measured
    device's (testbed) or the users' (llcsim) share of packets on the LLC, and the
    LLC's delay beyond --base-ms (testbed: the shared link's p50 / p99, mean of up and
    down, with the packet's own transmission) or wait (llcsim: the cell's p50 / p99).
    dchlab/sim/testbed_compare.py says which rules match. Rows of one rule that differ in
    their background load (urllc_share-partial): `dch sim compare-testbed`.
    """
    import pyarrow.parquet as pq

    from dchlab.sim import testbed_compare as tc

    grid_dir = Path(args.grid)
    try:
        rows = pq.read_table(args.rows).to_pylist()
        sim = tc.sim_points(
            pq.read_table(grid_dir / "cells.parquet").to_pylist(),
            pq.read_table(grid_dir / "pages.parquet").to_pylist(),
        )
    except (OSError, ValueError) as e:
        raise UserError(f"{e} (ROWS: a results parquet; --grid: a `dch sim run` directory)") from e
    bed = tc.testbed_points(rows, args.base_ms)
    if not bed:
        raise UserError(f"{args.rows}: no dchannel row of a rule llcsim simulates")
    print(f"{'C':>4} {'N':>3} {'rule':5} | {'testbed: LLC share':>18} {'p50':>5} {'p99':>5} {'rows':>4}"
          f" | {'llcsim: LLC share':>17} {'p50':>5} {'p99':>5} {'loads':>5}")  # fmt: skip
    for key in sorted(bed):
        b, s = bed[key], sim.get(key)
        left = f"{key[0]:4g} {key[1]:3} {key[2]:5} | {b.llc_frac:18.2f} {b.delay_p50_ms:5.2f} {b.delay_p99_ms:5.2f} {b.rows:4}"
        right = (
            f" | {s.llc_frac:17.2f} {s.delay_p50_ms:5.2f} {s.delay_p99_ms:5.2f} {s.rows:5}"
            if s
            else " | (not in the grid)"
        )
        print(left + right)
    return 0


def cmd_compare_testbed(args: argparse.Namespace) -> int:
    """`dch sim compare-testbed ROWS --grid DIR [--grid DIR2]`: the testbed per background load against llcsim.

    ROWS: the N-device testbed's rows (e.g. results/published/urllc_share-partial.parquet);
    each --grid: a `dch sim run` directory (cells.parquet, pages.parquet) of one mean
    think time. Per (C, N, background load) of --scenario's dchannel rows: the measured
    device's share of packets on the LLC and the shared LLC link's delay p50 / p99
    beyond --base-ms (release - arrival, so with the packet's own transmission: the
    `testbed tx ms` column is the mean packet's), as the mean over the loads with a 95 %
    bootstrap CI; llcsim's mean llc_frac over its users' page loads and the cell-wide
    queueing wait p50 / p95 / p99 (means over seeds) under --rule (the testbed's rows
    of the same rule: none, or token-bucket for llcsim's share), at the grid whose
    think time is the load's (exp:30 -> 30 s, fixed:0 -> 0 s; a lone device and idle
    background devices -> N = 1 of the grid with the longest think); and llcsim minus
    the testbed. --sim-only adds the grid's N that the testbed lacks (testbed side "-").
    The grids model --scenario's channels (their hbc_owd_ms / llc_owd_ms); the rows of
    other scenarios are left out. dchlab/sim/testbed_compare.py has the rules.
    """
    import pyarrow.parquet as pq

    from dchlab.sim import testbed_compare as tc

    grids: dict[str, dict[tuple[float, int], tc.SimPoint]] = {}
    think: dict[str, float] = {}
    try:
        rows = pq.read_table(args.rows).to_pylist()
        # a grid is named by its directory's name in the table, or its path if not unique
        unique = len({Path(g).name for g in args.grid}) == len(args.grid)
        for g in args.grid:
            name = Path(g).name if unique else g
            cells = pq.read_table(Path(g) / "cells.parquet").to_pylist()
            thinks = {float(c["think_s"]) for c in cells}
            if len(thinks) != 1:
                raise UserError(
                    f"{g}/cells.parquet: think_s {sorted(thinks)}; expected one per grid"
                )
            think[name] = thinks.pop()
            pages = pq.read_table(Path(g) / "pages.parquet").to_pylist()
            grids[name] = tc.sim_by_point(cells, pages, args.rule)
        bed = tc.testbed_by_load(rows, args.scenario, args.base_ms, args.rule)
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{e} (ROWS: a results parquet; --grid: a `dch sim run` directory)") from e
    if not bed:
        raise UserError(f"{args.rows}: no dchannel row of scenario {args.scenario}")
    try:
        head, cells_out = tc.table(tc.compare(bed, grids, think, args.sim_only))
    except ValueError as e:
        raise UserError(f"{args.rows}: {e}") from e
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---:" if i < 2 else "---" for i in range(len(head))) + "|")
        for line in cells_out:
            print("| " + " | ".join(line) + " |")
        return 0
    widths = [max(len(h), *(len(line[i]) for line in cells_out)) for i, h in enumerate(head)]
    for line in [head, *cells_out]:
        print("  ".join(v.rjust(w) for v, w in zip(line, widths, strict=True)).rstrip())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from dchlab.sim.grid import SimOptions

    p = add_command(sub, __doc__, None)
    s = p.add_subparsers(dest="sim_command", metavar="SUBCOMMAND", required=True)

    c = add_command(s, cmd_capture.__doc__, cmd_capture)
    c.add_argument(
        "--pages",
        type=lambda v: _csv_list(str, v),
        required=True,
        help="comma-separated page names",
    )
    c.add_argument("-o", "--output", required=True, metavar="DIR")
    c.add_argument("--corpus", default="tp5n", help="page corpus (default tp5n)")
    c.add_argument("--scheme", default="dchannel", help="scheme (default dchannel)")
    c.add_argument("--hbc", default="MM-S", help="HBC channel (default MM-S)")
    c.add_argument("--llc", default="urllc", help="LLC channel (default urllc)")
    c.add_argument("--seed", type=int, default=1, help="testbed seed (default 1)")

    t = add_command(s, cmd_traces.__doc__, cmd_traces)
    t.add_argument("captures", metavar="DIR", help="a `dch sim capture` directory")
    t.add_argument("-o", "--output", required=True, metavar="TRACES")

    d = add_command(s, cmd_demand.__doc__, cmd_demand)
    d.add_argument("traces", metavar="TRACES", help="directory of traces (`dch sim traces`)")
    d.add_argument(
        "--think-s", type=float, default=30.0, help="mean think time between loads, s (default 30)"
    )
    d.add_argument(
        "--capacity-mbit", type=lambda v: _csv_list(float, v), default=[10.0, 100.0],
        help="cell capacities for the fluid bound, Mbit/s (default 10,100)",
    )  # fmt: skip
    d.add_argument("--json", action="store_true", help="one JSON object")

    r = add_command(s, cmd_run.__doc__, cmd_run)
    r.add_argument("traces", metavar="TRACES", help="directory of traces (`dch sim traces`)")
    r.add_argument(
        "--users", type=lambda v: _csv_list(int, v), required=True, help="e.g. 1,10,100,1000,10000"
    )
    r.add_argument(
        "--capacity-mbit",
        type=lambda v: _csv_list(float, v),
        default=[10.0, 100.0],
        help="default 10,100",
    )
    r.add_argument(
        "--rules",
        type=lambda v: _csv_list(str, v),
        default=["none", "share"],
        help="none = (a), share = (b); default both",
    )
    r.add_argument("--seeds", type=lambda v: _csv_list(int, v), default=[1], help="default 1")
    defaults = SimOptions()
    r.add_argument("--policy", default=defaults.policy, help="steering policy (default dchannel)")
    r.add_argument(
        "--hbc-owd-ms",
        type=float,
        default=defaults.hbc_owd_ms,
        help="HBC one-way delay the agents assume (default 10: MM-S)",
    )
    r.add_argument(
        "--llc-owd-ms",
        type=float,
        default=defaults.llc_owd_ms,
        help="LLC one-way delay (default 2.5: urllc)",
    )
    r.add_argument(
        "--duration-s",
        type=float,
        default=defaults.duration_s,
        help="pages start within this many s (default 60)",
    )
    r.add_argument(
        "--think-s", type=float, default=defaults.think_s, help="mean think time, s (default 30)"
    )
    r.add_argument(
        "--workers", type=int, default=2, help="Ray CPUs (default 2; 0: no Ray, in this process)"
    )
    r.add_argument("-o", "--output", required=True, metavar="DIR")

    k = add_command(s, cmd_capacity.__doc__, cmd_capacity)
    k.add_argument("cells", metavar="CELLS", help="a grid's cells.parquet")
    k.add_argument(
        "--threshold-ms",
        type=float,
        default=None,
        help="p95 wait limit, ms (default: the grid's hbc_owd_ms - llc_owd_ms)",
    )

    m = add_command(s, cmd_compare.__doc__, cmd_compare)
    m.add_argument("traces", metavar="TRACES", help="the captured traces")
    m.add_argument("pages", metavar="PAGES", help="a grid's pages.parquet")
    m.add_argument(
        "--captures", metavar="DIR", help="the `dch sim capture` directory (link delays)"
    )
    m.add_argument(
        "--base-ms", type=float, default=2.5, help="the LLC's one-way base delay (default 2.5)"
    )

    v = add_command(s, cmd_vs_testbed.__doc__, cmd_vs_testbed)
    v.add_argument("rows", metavar="ROWS", help="the testbed study's results parquet")
    v.add_argument("--grid", required=True, metavar="DIR", help="a `dch sim run` output directory")
    v.add_argument(
        "--base-ms", type=float, default=2.5, help="the LLC's one-way base delay (default 2.5)"
    )

    ct = add_command(s, cmd_compare_testbed.__doc__, cmd_compare_testbed)
    ct.add_argument("rows", metavar="ROWS", help="the N-device testbed's results parquet")
    ct.add_argument(
        "--grid", action="append", required=True, metavar="DIR",
        help="a `dch sim run` directory; once per think time (e.g. 30 s and 0 s)",
    )  # fmt: skip
    ct.add_argument("--scenario", default="MM-S", help="the testbed's HBC scenario (default MM-S)")
    ct.add_argument("--rule", default="none", help="llcsim's rule (default none)")
    ct.add_argument(
        "--base-ms", type=float, default=2.5, help="the LLC's one-way base delay (default 2.5)"
    )
    ct.add_argument("--markdown", action="store_true", help="a markdown table")
    ct.add_argument(
        "--sim-only", action="store_true",
        help="also the grid's other N (e.g. 8, 16) at the testbed's C and background loads",
    )  # fmt: skip
