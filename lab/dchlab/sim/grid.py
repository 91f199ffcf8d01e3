"""Runs `llcsim` (crates/llcsim) over a grid of cells and gathers the results.

A cell is (users, capacity, rule, seed): one `llcsim` process simulating one shared
LLC. Cells are independent, so the grid shards over them: on Ray (`workers` > 0: a
local Ray of that many CPUs, one cell per task; the traces travel with the task, so
a cluster node needs only the binary) or one after another in this process (workers
= 0: tests, small grids). One cell is never split, since all of its users share one
queue; a 10k-user cell is one single-threaded `llcsim` run.

Results: one row per cell (configuration + the cell's summary) and one per page load
of each user (configuration + llcsim's page columns), written as parquet.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dchlab import paths

#: Rules llcsim knows (crates/llcsim/src/cell.rs `Rule`): (a) and (b) of issue 41.
RULES = ("none", "share")


@dataclass(frozen=True)
class Cell:
    """One simulated cell of the grid."""

    users: int
    capacity_mbit: float
    rule: str
    seed: int


@dataclass(frozen=True)
class SimOptions:
    """What every cell of a grid shares (llcsim's flags of the same names)."""

    policy: str = "dchannel"
    hbc_owd_ms: float = 10.0
    llc_owd_ms: float = 2.5
    duration_s: float = 60.0
    think_s: float = 30.0
    overhead: int = 44
    limit_bytes: int = 1_200_000


def grid(
    users: Sequence[int], capacities: Sequence[float], rules: Sequence[str], seeds: Sequence[int]
) -> list[Cell]:
    """Every combination, largest cells first (they take longest: start them first)."""
    for r in rules:
        if r not in RULES:
            raise ValueError(f"rule {r!r}: expected one of {', '.join(RULES)}")
    for n in users:
        if n < 1:
            raise ValueError(f"users {n}: expected at least 1")
    cells = [Cell(n, c, r, s) for n in users for c in capacities for r in rules for s in seeds]
    return sorted(cells, key=lambda c: -c.users)


def argv(binary: Path, traces: Path, cell: Cell, opts: SimOptions, pages_out: Path) -> list[str]:
    """The llcsim command line of one cell."""
    return [
        str(binary),
        "--traces",
        str(traces),
        "--users",
        str(cell.users),
        "--capacity-mbit",
        str(cell.capacity_mbit),
        "--rule",
        cell.rule,
        "--seed",
        str(cell.seed),
        "--policy",
        opts.policy,
        "--hbc-owd-ms",
        str(opts.hbc_owd_ms),
        "--llc-owd-ms",
        str(opts.llc_owd_ms),
        "--duration-s",
        str(opts.duration_s),
        "--think-s",
        str(opts.think_s),
        "--overhead",
        str(opts.overhead),
        "--limit-bytes",
        str(opts.limit_bytes),
        "--pages-out",
        str(pages_out),
    ]


def _number(v: str) -> int | float | str | None:
    if v == "":
        return None
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def run_cell(
    binary: str, traces: dict[str, bytes], cell: Cell, opts: SimOptions
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs llcsim on one cell with the traces given as {file name: content}: the cell's
    row and its page rows. Self-contained (no shared files), so it can run on any node
    that has the binary."""
    with tempfile.TemporaryDirectory(prefix="llcsim-") as tmp:
        tdir = Path(tmp) / "traces"
        tdir.mkdir()
        for name, data in traces.items():
            (tdir / name).write_bytes(data)
        pages_out = Path(tmp) / "pages.csv"
        proc = subprocess.run(
            argv(Path(binary), tdir, cell, opts, pages_out),
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"llcsim failed on {cell}: {proc.stderr.strip()}")
        report = json.loads(proc.stdout)
        with pages_out.open(newline="") as f:
            pages = [{k: _number(v) for k, v in r.items()} for r in csv.DictReader(f)]
    key = asdict(cell)
    row = {**key, **asdict(opts), **report["summary"], "wall_s": report["wall_s"]}
    return row, [{**key, **p} for p in pages]


def read_traces(directory: Path) -> dict[str, bytes]:
    """The trace files (`*.csv`) of a directory, by name."""
    files = sorted(directory.glob("*.csv"))
    if not files:
        raise ValueError(f"{directory}: no *.csv trace in it (make them with `dch sim traces`)")
    return {f.name: f.read_bytes() for f in files}


def run(
    cells: Sequence[Cell],
    traces_dir: Path,
    opts: SimOptions,
    workers: int,
    on_done: Callable[[Cell, dict[str, Any]], None] = lambda c, r: None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Runs every cell (see the module docs): the cell rows and the page rows;
    `on_done(cell, row)` after each cell."""
    binary = str(paths.binary("llcsim"))
    traces = read_traces(traces_dir)
    results: Iterable[tuple[Cell, tuple[dict[str, Any], list[dict[str, Any]]]]]
    if workers <= 0:
        results = ((c, run_cell(binary, traces, c, opts)) for c in cells)
    else:
        results = _on_ray(binary, traces, cells, opts, workers)
    cell_rows: list[dict[str, Any]] = []
    page_rows: list[dict[str, Any]] = []
    for cell, (row, pages) in results:
        cell_rows.append(row)
        page_rows.extend(pages)
        on_done(cell, row)
    return cell_rows, page_rows


def _on_ray(
    binary: str, traces: dict[str, bytes], cells: Sequence[Cell], opts: SimOptions, workers: int
) -> Iterable[tuple[Cell, tuple[dict[str, Any], list[dict[str, Any]]]]]:
    """The cells as Ray tasks on a local Ray of `workers` CPUs, yielded as they finish."""
    from dchlab.experiments.ray_backend import import_ray

    ray = import_ray()
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", str(paths.repo_root() / "lab"))}
    ray.init(
        num_cpus=workers,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    pending: dict[Any, Cell] = {}
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        traces_ref = ray.put(traces)
        pending = {task.remote(binary, traces_ref, c, opts): c for c in cells}
        while pending:
            # a timeout, so that Ctrl-C (handled between calls) can interrupt the wait
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)
    finally:
        # interrupted or failed: stop the cells still running before Ray goes
        for ref in pending:
            ray.cancel(ref, force=True)
        ray.shutdown()


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """`rows` as one parquet file (columns from the rows' keys)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
