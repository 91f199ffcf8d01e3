"""`dch traces`: synthesize the paper's 5G scenarios, import, inspect and plot traces.

Print Table 1 statistics of trace files and profiles; convert real traces.

Subcommands:
  list                             built-in channels, scenarios, spec modifiers
  synth NAME [--seed N] -o DIR     scenario trace files + channel profile
  stats FILE... [--json]           span, RTT min/p50/p98/mean/CV, mean up/down; for a
                                   CellReplay directory per direction: base delay,
                                   light/heavy PDO rates, size offsets
  plot FILE -o x.png               RTT and capacity over time (CellReplay: per direction)
  import ping|csv|mahimahi ...     real traces -> *.rtt.csv / *.cap.csv / Mahimahi
  fit [--data DIR]                 refit the RTT time structure to real ping runs
  derive-cellreplay -o DIR         a CellReplay-format stand-in (and its Mahimahi-model
                                   profile) from a Mahimahi link trace and ping runs
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dchlab.commands import add_command
from dchlab.errors import UserError

log = logging.getLogger("dch.traces")


def _friendly(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Bad input -> UserError (printed by cli.main, exit 2). TraceFormatError already is
    one; channel specs, numpy and the csv reader refuse a bad file with a plain
    ValueError, and a missing file is an OSError, which are the user's to fix too."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except UserError:
            raise
        except (ValueError, OSError) as e:
            raise UserError(str(e)) from e

    return run


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def cmd_list(args: argparse.Namespace) -> int:
    """`dch traces list`: list built-in channels, the six scenarios and the spec modifiers.

    List the channel names `--hbc/--llc` and campaigns accept, with Table 1 targets.
    """
    from dchlab.traces.profiles import BUILTINS, FIXED_SYNTAX
    from dchlab.traces.scenarios import DRX_PRESETS, SCENARIOS

    print("built-in channels (chanemu):")
    for name, fixed in BUILTINS.items():
        print(f"  {name:6} = {fixed}")
    print(f"  {FIXED_SYNTAX}")
    print("  cellreplay:DIR  (a CellReplay trace directory; docs/traces.md)")
    print("scenarios (paper Table 1 targets; synthesized per seed):")
    print("  name  span  RTT min  p50  p98   mean    CV  up/down Mbit/s  DRX (inactivity/wake ms)")
    for sc in SCENARIOS.values():
        drx = DRX_PRESETS[sc.band]
        print(
            f"  {sc.name}  {sc.span_min:4.0f}  {sc.rtt_min:7.0f}  {sc.rtt_p50:3.0f}  {sc.rtt_p98:3.0f}"
            f"  {sc.rtt_mean:5.2f}  {sc.rtt_cv:4.2f}  {sc.up_mbit:6.0f}/{sc.down_mbit:<7.0f}"
            f"  {drx['inactivity_ms']}/{drx['wake_period_ms']}   {sc.description}"
        )
    print(
        "modifiers: +loss=P +rtt=MS +cov=C [+resample=MS] +queue=N|unlimited +drx=mmwave|lowband|none"
    )
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    """`dch traces synth`: write a Table 1 scenario's traces and channel profile.

    Synthesize scenario NAME (RTT timeline at 15 ms + per-second capacity, matching the
    paper's Table 1 statistics) into DIR: NAME.rtt.csv, NAME.cap.csv, profile.toml
    (drop-tail 800 packets, DRX preset of the band) and source.json. Deterministic per
    seed.
    """
    from dchlab.traces.scenario_files import write_scenario
    from dchlab.traces.stats import file_stats

    out = Path(args.output)
    profile = write_scenario(args.name, args.seed, out)
    print(f"wrote {out}/ (profile {profile.name}, seed {args.seed})")
    _print_table([file_stats(profile, args.seed)])
    return 0


TABLE1_HEADINGS = ["span(min)", "RTT min", "p50", "p98", "mean", "CV", "up Mbit/s", "down Mbit/s"]


def _print_table(
    rows: list[dict[str, Any]],
    keys: list[str] | None = None,
    headings: list[str] | None = None,
) -> None:
    """Rows as a table: "file", then `keys` (default: Table 1's) under `headings`."""
    from dchlab.traces.stats import COLUMNS

    keys = keys or COLUMNS
    head = ["file", *(headings or TABLE1_HEADINGS)]
    table = [head]
    for r in rows:
        table.append([r["file"]] + [_fmt(r[k], 3 if k == "rtt_cv" else 2) for k in keys])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells))


def cmd_stats(args: argparse.Namespace) -> int:
    """`dch traces stats`: print Table 1 columns for trace files or profiles.

    For each FILE (*.rtt.csv, *.cap.csv, profile .toml, Mahimahi trace or ping output)
    print span (min), RTT min/p50/p98/mean/CV (ms) and mean up/down (Mbit/s). For a
    CellReplay trace directory, a row per direction: span, base delay min/p50/p98/mean
    (one-way ms), light PDOs per train, light and heavy PDO rates (Mbit/s) and the
    size offset at 100 and 1400 bytes (rules: dchlab.traces.cellreplay_stats).
    """
    from dchlab.traces import cellreplay_stats
    from dchlab.traces.cellreplay import is_cellreplay_dir
    from dchlab.traces.stats import file_stats

    rows, cr_rows = [], []
    for f in args.files:
        path = Path(f)
        if path.is_dir():
            if not is_cellreplay_dir(path):
                raise UserError(
                    f"{path}: a directory, but not a CellReplay trace directory (expected "
                    "up-delay-light-pdo or down-delay-light-pdo in it)"
                )
            cr_rows += cellreplay_stats.dir_stats(path)
        else:
            rows.append(file_stats(path, args.seed))
    if args.json:
        json.dump(rows + cr_rows, sys.stdout, indent=2)
        print()
        return 0
    if rows:
        _print_table(rows)
    if cr_rows:
        if rows:
            print()
        _print_table(cr_rows, cellreplay_stats.COLUMNS, cellreplay_stats.HEADINGS)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """`dch traces plot`: plot RTT and capacity over time.

    Draw RTT (ms) and capacity (Mbit/s) over time from a trace file or profile; for a
    CellReplay trace directory, per direction its base delay, heavy PDO rate per second
    and light trains' PDO rates over time, and its size offsets.
    """
    from dchlab.traces.cellreplay import is_cellreplay_dir
    from dchlab.traces.cellreplay_plot import plot_cellreplay
    from dchlab.traces.plot import plot_file

    path = Path(args.file)
    if is_cellreplay_dir(path):
        plot_cellreplay(path, Path(args.output), seconds=args.seconds)
    else:
        plot_file(path, Path(args.output), seconds=args.seconds, seed=args.seed)
    print(f"wrote {args.output}")
    return 0


def cmd_import_ping(args: argparse.Namespace) -> int:
    """`dch traces import ping`: Linux ping output -> RTT timeline.

    Linux ping output -> t_ms,rtt_ms. Uses [epoch] timestamps (ping -D) when present
    (send time = receive time - rtt), else icmp_seq x interval. Lost pings leave a gap
    that the timeline interpolates across.
    """
    from dchlab.traces.ping import parse_ping
    from dchlab.traces.timeline import write_rtt

    r = parse_ping(Path(args.file), interval_s=args.interval)
    write_rtt(Path(args.output), r.timeline)
    print(
        f"wrote {args.output}: {r.replies} samples, {r.lost} lost, {r.duplicates} duplicates; "
        + "; ".join(r.notes)
    )
    return 0


def cmd_import_csv(args: argparse.Namespace) -> int:
    """`dch traces import csv`: per-second throughput CSV -> capacity series.

    Per-second throughput CSV (e.g. the Raca et al. 5G dataset) ->
    t_s,up_mbit,down_mbit. Rows are binned by their Timestamp second (duplicates
    averaged, gaps up to --max-gap seconds filled with the previous value); rows of
    other network modes are dropped and the remaining stretches joined.
    """
    from dchlab.traces.capacity import write_capacity
    from dchlab.traces.throughput_csv import import_throughput_csv

    r = import_throughput_csv(
        Path(args.file),
        mode=args.mode,
        down_col=args.down_col,
        up_col=args.up_col,
        unit=args.unit,
        max_gap_s=args.max_gap,
    )
    write_capacity(Path(args.output), r.series)
    print(f"wrote {args.output}: {len(r.series)} s; " + "; ".join(r.notes))
    return 0


def cmd_import_mahimahi(args: argparse.Namespace) -> int:
    """`dch traces import mahimahi`: Mahimahi link traces <-> capacity series.

    read: Mahimahi traces (--down, optional --up) -> per-second capacity series. write:
    capacity series -> OUT.up and OUT.down Mahimahi traces (1500-byte delivery
    opportunities; loop period = series length).
    """
    import numpy as np

    from dchlab.traces.capacity import CapacitySeries, read_capacity, write_capacity
    from dchlab.traces.mahimahi import (
        opportunities_to_rate,
        rate_to_opportunities,
        read_mahimahi,
        write_mahimahi,
    )

    if args.direction == "read":
        if not args.down:
            raise SystemExit("dch traces import mahimahi read: --down FILE is required")
        down = opportunities_to_rate(read_mahimahi(Path(args.down)))
        up = opportunities_to_rate(read_mahimahi(Path(args.up))) if args.up else np.zeros(len(down))
        n = max(len(up), len(down))
        up = np.pad(up, (0, n - len(up)))
        down = np.pad(down, (0, n - len(down)))
        write_capacity(Path(args.output), CapacitySeries(up, down))
        print(
            f"wrote {args.output}: {n} s, mean up {up.mean():.2f} / down {down.mean():.2f} Mbit/s"
        )
    else:
        cap = read_capacity(Path(args.capacity))
        stem = Path(args.output)
        for col, ext in (("up_mbit", "up"), ("down_mbit", "down")):
            ts = rate_to_opportunities(cap.column(col))
            path = stem.with_name(f"{stem.name}.{ext}")
            write_mahimahi(path, ts)
            print(f"wrote {path}: {len(ts)} delivery opportunities over {len(cap)} s")
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    """`dch traces fit`: refit the RTT time structure to real ping runs.

    Compare the synthesizer's RTT time structure (autocorrelation at 0.2-1 s, excursions
    above p90) with real ping runs (default: the IMC'23 driving data), optionally rerun
    the grid search, and compare its capacity model (CV, log-ACF at 1-30 s) with real 5G
    throughput (Raca et al.).
    """
    from dchlab.paths import shared_data
    from dchlab.traces import fit

    data = Path(args.data) if args.data else None
    if data is None:
        shared = shared_data()
        if shared is None:
            raise SystemExit("no shared data: pass --data DIR with ping runs (*.out)")
        data = shared / "traces" / "imc23-driving-rtt"
    report = fit.fit_report(data, grid=args.grid)
    raca = Path(args.capacity_data) if args.capacity_data else data.parent / "raca-5g"
    if raca.is_dir():
        report["capacity"] = fit.capacity_report(raca)
    print(json.dumps(report, indent=2))
    if args.plot:
        fit.plot_report(report, Path(args.plot))
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def cmd_derive_cellreplay(args: argparse.Namespace) -> int:
    """`dch traces derive-cellreplay`: a CellReplay-format stand-in from traces we have.

    Derive a CellReplay trace directory from a Mahimahi cellular link trace pair (the
    heavy PDOs) and ping runs (the base delay; light trains: the first N heavy
    opportunities after each sample), plus mahimahi-model.toml, the Mahimahi model of
    the same recording (base delay as the RTT timeline, heavy PDOs as the link). A
    derived stand-in, not CellReplay's measurement (rules: docs/traces.md).
    Defaults: TMobile-LTE-short and the IMC'23 T-Mobile driving pings of the shared data.
    """
    from dchlab.paths import shared_data
    from dchlab.traces.cellreplay_derive import derive
    from dchlab.traces.cellreplay_stats import COLUMNS, HEADINGS, dir_stats

    shared = shared_data()

    def default(given: str | None, rel: str) -> Path:
        if given:
            return Path(given)
        if shared is None:
            raise UserError(f"no shared data: pass the {rel} file(s) explicitly")
        return shared / "traces" / rel

    d = derive(
        default(args.up, "mahimahi/TMobile-LTE-short.up"),
        default(args.down, "mahimahi/TMobile-LTE-short.down"),
        default(args.pings, "imc23-driving-rtt/tmobile"),
        Path(args.output),
        step_ms=args.step_ms,
        train=args.train,
    )
    print(
        f"wrote {d.out}/ (CellReplay files, mahimahi-model.toml, base.rtt.csv, SOURCE.json): "
        f"period {d.period_ms} ms, {d.samples} trains from {len(d.ping_files)} ping runs"
    )
    _print_table(dir_stats(d.out), COLUMNS, HEADINGS)
    return 0


IMPORT_DOC = """`dch traces import`: convert ping output, throughput CSVs and Mahimahi traces.

Import real traces into the formats chanemu reads (docs/formats.md).
"""


def register(sub: argparse._SubParsersAction) -> None:
    from dchlab.traces import throughput_csv as csv_in
    from dchlab.traces.scenarios import SCENARIOS

    p = add_command(sub, __doc__, None)
    tsub = p.add_subparsers(dest="traces_command", metavar="SUBCOMMAND", required=True)

    add_command(tsub, cmd_list.__doc__, _friendly(cmd_list))

    s = add_command(tsub, cmd_synth.__doc__, _friendly(cmd_synth))
    s.add_argument("name", choices=list(SCENARIOS), metavar="NAME", help=" | ".join(SCENARIOS))
    s.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory")

    st = add_command(tsub, cmd_stats.__doc__, _friendly(cmd_stats))
    st.add_argument(
        "files", nargs="+", metavar="FILE", help="trace file, profile or CellReplay directory"
    )
    st.add_argument("--json", action="store_true", help="machine-readable output (a JSON list)")
    st.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)

    pl = add_command(tsub, cmd_plot.__doc__, _friendly(cmd_plot))
    pl.add_argument(
        "file",
        metavar="FILE",
        help="*.rtt.csv, *.cap.csv, profile .toml, Mahimahi trace, ping output, CellReplay directory",
    )
    pl.add_argument("-o", "--output", required=True, metavar="PNG")
    pl.add_argument("--seconds", type=float, default=None, help="plot only the first N seconds")
    pl.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)

    im = add_command(tsub, IMPORT_DOC, None)
    isub = im.add_subparsers(dest="import_kind", metavar="KIND", required=True)
    ip = add_command(isub, cmd_import_ping.__doc__, _friendly(cmd_import_ping))
    ip.add_argument("file", metavar="PING_OUTPUT")
    ip.add_argument("-o", "--output", required=True, metavar="FILE.rtt.csv")
    ip.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="ping -i interval (default: from the summary line, else 1 s)",
    )
    ic = add_command(isub, cmd_import_csv.__doc__, _friendly(cmd_import_csv))
    ic.add_argument("file", metavar="CSV")
    ic.add_argument("-o", "--output", required=True, metavar="FILE.cap.csv")
    ic.add_argument(
        "--mode",
        default=csv_in.DEFAULT_MODE,
        help="NetworkMode filter: 5G, 4G (LTE), 3G, all, or a raw value (default %(default)s)",
    )
    ic.add_argument(
        "--down-col", default=csv_in.DEFAULT_DOWN_COL, help="downlink column (default %(default)s)"
    )
    ic.add_argument(
        "--up-col", default=csv_in.DEFAULT_UP_COL, help="uplink column (default %(default)s)"
    )
    ic.add_argument(
        "--unit",
        default=csv_in.DEFAULT_UNIT,
        choices=list(csv_in.UNITS),
        help="unit of the rate columns (default %(default)s)",
    )
    ic.add_argument(
        "--max-gap",
        type=int,
        default=csv_in.DEFAULT_MAX_GAP_S,
        help="longest gap (s) filled with the previous value (default %(default)s)",
    )
    im_m = add_command(isub, cmd_import_mahimahi.__doc__, _friendly(cmd_import_mahimahi))
    im_m.add_argument("direction", choices=["read", "write"])
    im_m.add_argument("--down", metavar="FILE", help="read: downlink Mahimahi trace")
    im_m.add_argument(
        "--up", metavar="FILE", help="read: uplink Mahimahi trace (default: 0 Mbit/s)"
    )
    im_m.add_argument("--capacity", metavar="FILE.cap.csv", help="write: the capacity series")
    im_m.add_argument(
        "-o",
        "--output",
        required=True,
        help="read: FILE.cap.csv; write: OUT (writes OUT.up, OUT.down)",
    )

    f = add_command(tsub, cmd_fit.__doc__, _friendly(cmd_fit))
    f.add_argument(
        "--data",
        metavar="DIR",
        help="directory of ping outputs (*.out), searched recursively "
        "(default: the IMC'23 driving runs, traces/imc23-driving-rtt of the shared data)",
    )
    f.add_argument(
        "--capacity-data",
        metavar="DIR",
        help="Raca et al. 5G dataset root for the capacity check (default: raca-5g beside --data)",
    )
    f.add_argument("--grid", action="store_true", help="also run the grid search (about 5 minutes)")

    from dchlab.traces.cellreplay_derive import DEFAULT_STEP_MS, DEFAULT_TRAIN

    dc = add_command(tsub, cmd_derive_cellreplay.__doc__, _friendly(cmd_derive_cellreplay))
    dc.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory")
    dc.add_argument("--up", metavar="FILE", help="uplink Mahimahi trace (default: TMobile-LTE-short.up of the shared data)")  # fmt: skip
    dc.add_argument("--down", metavar="FILE", help="downlink Mahimahi trace (default: TMobile-LTE-short.down)")  # fmt: skip
    dc.add_argument("--pings", metavar="DIR", help="ping outputs (*.out, searched recursively; default: the IMC'23 T-Mobile driving runs)")  # fmt: skip
    dc.add_argument("--step-ms", type=int, default=DEFAULT_STEP_MS, help="base-delay sample spacing (default %(default)s)")  # fmt: skip
    dc.add_argument("--train", type=int, default=DEFAULT_TRAIN, help="light PDOs per train (default %(default)s)")  # fmt: skip
    f.add_argument("--plot", metavar="PNG", help="draw the comparison (ACF, excursions) to PNG")
