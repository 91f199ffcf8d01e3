"""The results store: one DuckDB file, one row per measured load/transfer.

Every row carries its outcome (PLT, phase times, bytes per channel, ...) and its
full provenance (code revision, scheme and parameters, channel profiles, trace
offset, page, trial, seed, Chromium and kernel versions, host, time), so a number
in a report can always be traced back to how it was made.

The table `results` has the columns of the row's types (dchlab.workloads.rows: the
run's configuration, each workload's outcome, the provenance), created with the table
and added to a store made before one existed; numbers are DOUBLE, booleans BOOLEAN,
strings VARCHAR, nested values (dicts, lists) JSON text. A key outside those types (a
test's marker) still adds a column of its value's type the first time it appears. Several processes may append (the campaign runner, `dch pageload`): DuckDB
allows one writer at a time, so every call opens a short-lived connection and
retries while another process holds the lock.

Location: `--store PATH`, else `$DCH_RESULTS`, else `results/dch.duckdb`.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import logging
import os
import platform
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from dchlab.errors import UserError
from dchlab.paths import repo_root
from dchlab.workloads.rows import column_types

log = logging.getLogger(__name__)

TABLE = "results"

#: The first columns of the table, in this order; their types, and those of every other
#: typed column, come from the row's types (dchlab.workloads.rows.column_types).
CORE_ORDER = (
    "row_id", "ts", "campaign", "cell", "condition", "arm", "item", "quick", "workload",
    "scheme", "scheme_name", "scheme_params", "agent_args", "hbc", "llc", "profiles", "cc",
    "seed", "trial", "trace_offset_ms", "page", "plt_ms", "valid", "invalid_reason",
    # Validity against the corpus' record (dchlab.workloads.validity): failed requests,
    # those outside the page's expected-missing set, and the size of that set.
    "resources_failed", "resources_failed_unexpected", "missing_expected",
    "error", "code_rev", "code_dirty", "chromium_version", "kernel_version", "hostname",
)  # fmt: skip
#: Every typed column and its SQL type: the core first, then the rest of the row's types.
COLUMNS: dict[str, str] = {name: column_types()[name] for name in CORE_ORDER}
COLUMNS.update(column_types())
#: The core columns with their types (kept for callers of the store).
CORE_COLUMNS: dict[str, str] = {name: COLUMNS[name] for name in CORE_ORDER}

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StoreError(UserError, RuntimeError):
    """A row that does not fit the store (bad key, type clash)."""


def default_path() -> Path:
    env = os.environ.get("DCH_RESULTS")
    return Path(env) if env else repo_root() / "results" / "dch.duckdb"


def resolve_path(store: str | os.PathLike[str] | None) -> Path:
    return Path(store) if store else default_path()


# ---------------------------------------------------------------- provenance


@functools.cache
def code_revision() -> tuple[str, bool]:
    """(`git rev-parse HEAD`, working tree dirty?) of the repository; ("unknown", True) without git.

    Dirty means a tracked file outside results/ differs from HEAD: untracked files (a
    log, a scratch script, a venv symlink) do not change what the committed code
    measures, nor does results/ — the lab's own output: `dch run --publish` rewrites
    results/published/*.parquet, which marked every later campaign of a queue dirty."""
    root = repo_root()
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        if rev.returncode != 0:
            return "unknown", True
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=20,
        )
        return rev.stdout.strip(), bool(status.stdout.strip()) or status.returncode != 0
    except (OSError, subprocess.SubprocessError):
        return "unknown", True


@functools.cache
def chromium_version() -> str | None:
    """`chromium --version`, or None when Chromium is not installed."""
    for path in ("/usr/lib/chromium/chromium", "/usr/bin/chromium"):
        if Path(path).exists():
            try:
                out = subprocess.run(
                    [path, "--version"], capture_output=True, text=True, timeout=20
                ).stdout.strip()
                return out or None
            except (OSError, subprocess.SubprocessError):
                return None
    return None


@functools.cache
def host_provenance() -> dict[str, Any]:
    rev, dirty = code_revision()
    return {
        "code_rev": rev,
        "code_dirty": dirty,
        "chromium_version": chromium_version(),
        "kernel_version": platform.release(),
        "hostname": socket.gethostname(),
    }


def parse_scheme(scheme: str) -> tuple[str, dict[str, Any]]:
    """`dchannel:alpha=0.5` -> ("dchannel", {"alpha": 0.5}); `pkt-size:300` -> ("pkt-size", {"arg": 300})."""
    name, _, rest = scheme.partition(":")
    params: dict[str, Any] = {}
    if rest:
        for part in rest.split(","):
            key, eq, value = part.partition("=")
            if not eq:
                key, value = "arg", part
            params[key.strip()] = _number_or_str(value.strip())
    return name, params


def _number_or_str(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def with_provenance(row: dict[str, Any], campaign: str | None) -> dict[str, Any]:
    """A copy of `row` with the provenance columns filled in (row values win)."""
    out: dict[str, Any] = dict(host_provenance())
    out["row_id"] = uuid.uuid4().hex
    out["ts"] = _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
    out["campaign"] = campaign
    # How busy the machine was when the row was stored: a campaign that shared the
    # machine with other work can be told apart (and filtered) afterwards.
    out["host_load1"] = os.getloadavg()[0]
    out["host_cpus"] = os.cpu_count()
    scheme = row.get("scheme")
    if isinstance(scheme, str):
        name, params = parse_scheme(scheme)
        out["scheme_name"] = name
        out["scheme_params"] = params
    if "profiles" not in row and ("hbc" in row or "llc" in row):
        out["profiles"] = {"hbc": row.get("hbc"), "llc": row.get("llc")}
    out.update({k: v for k, v in row.items() if not (v is None and k in out)})
    if campaign is not None:
        out["campaign"] = campaign
    return out


# ---------------------------------------------------------------- connection


@contextmanager
def connect(
    store: str | os.PathLike[str] | None = None, read_only: bool = False, wait_s: float = 120.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the store, retrying while another process holds the write lock."""
    path = resolve_path(store)
    if read_only and not path.exists():
        raise FileNotFoundError(f"results store {path} does not exist yet (run a campaign first)")
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.IOException as e:
            if "lock" not in str(e).lower() or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    try:
        yield con
    finally:
        con.close()


def _ensure_table(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    cols = ", ".join(f'"{k}" {t}' for k, t in COLUMNS.items())
    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({cols})")
    have = existing_columns(con)
    # Stores made before a typed column existed get it (NULL in their old rows), so
    # queries over old and new rows see the same columns.
    lower = {c.lower() for c in have}
    for k, t in COLUMNS.items():
        if k.lower() not in lower:
            con.execute(f'ALTER TABLE {TABLE} ADD COLUMN "{k}" {t}')
            have[k] = t
    return have


def existing_columns(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    got = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position",
        [TABLE],
    ).fetchall()
    return {str(name): str(kind) for name, kind in got}


def _sql_type(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int | float):
        return "DOUBLE"
    if isinstance(value, _dt.datetime):
        return "TIMESTAMP"
    return "VARCHAR"


def _coerce(value: Any, kind: str, column: str) -> Any:
    if value is None:
        return None
    if kind == "VARCHAR":
        if isinstance(value, str):
            return value
        return json.dumps(value, sort_keys=True, default=str)
    if kind == "BOOLEAN":
        if isinstance(value, bool):
            return value
        raise StoreError(f"column {column!r} is BOOLEAN, got {type(value).__name__} {value!r}")
    if kind in ("DOUBLE", "BIGINT", "INTEGER", "FLOAT"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StoreError(f"column {column!r} is {kind}, got {type(value).__name__} {value!r}")
        if kind in ("BIGINT", "INTEGER") and isinstance(value, float):
            if not value.is_integer():
                raise StoreError(f"column {column!r} is {kind}, got non-integer {value!r}")
            return int(value)
        return value
    return value


def append_rows(
    rows: Sequence[dict[str, Any]],
    campaign: str | None = None,
    store: str | os.PathLike[str] | None = None,
) -> int:
    """Append measurement rows with provenance; returns how many were written.

    Keys must be identifiers ([A-Za-z_][A-Za-z0-9_]*); nested values are stored as
    JSON text. A key seen for the first time adds a column.
    """
    if not rows:
        return 0
    full = [with_provenance(r, campaign) for r in rows]
    for r in full:
        for key in r:
            if not _NAME_RE.match(key):
                raise StoreError(f"row key {key!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    with connect(store) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            cols = _ensure_table(con)
            lower = {c.lower(): c for c in cols}
            for r in full:
                for key, value in r.items():
                    if key.lower() in lower or value is None:
                        continue
                    kind = _sql_type(value)
                    con.execute(f'ALTER TABLE {TABLE} ADD COLUMN "{key}" {kind}')
                    cols[key] = kind
                    lower[key.lower()] = key
            names = list(cols)
            values = [[_coerce(_get_ci(r, name), cols[name], name) for name in names] for r in full]
            placeholders = ", ".join("?" for _ in names)
            quoted = ", ".join(f'"{n}"' for n in names)
            con.executemany(f"INSERT INTO {TABLE} ({quoted}) VALUES ({placeholders})", values)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return len(full)


def _get_ci(row: dict[str, Any], name: str) -> Any:
    if name in row:
        return row[name]
    low = name.lower()
    for k, v in row.items():
        if k.lower() == low:
            return v
    return None


# ---------------------------------------------------------------- reading


def query(
    sql: str, params: Sequence[Any] = (), store: str | os.PathLike[str] | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run read-only SQL against the store: (column names, rows)."""
    with connect(store, read_only=True) as con:
        cur = con.execute(sql, list(params))
        names = [d[0] for d in cur.description or []]
        return names, cur.fetchall()


def has_table(store: str | os.PathLike[str] | None = None) -> bool:
    path = resolve_path(store)
    if not path.exists():
        return False
    with connect(store, read_only=True) as con:
        return bool(existing_columns(con))


def load_rows(
    campaign: str | None = None,
    store: str | os.PathLike[str] | None = None,
    where: str | None = None,
    params: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    """All rows (of one campaign), JSON columns left as text, oldest first."""
    if not has_table(store):
        return []
    clauses, args = [], list(params)
    if campaign is not None:
        clauses.append("campaign = ?")
        args.append(campaign)
    if where:
        clauses.append(f"({where})")
    sql = f"SELECT * FROM {TABLE}"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY ts, row_id"
    names, got = query(sql, args, store)
    return [dict(zip(names, r, strict=True)) for r in got]


def done_cells(
    campaign: str, revision: str | None = None, store: str | os.PathLike[str] | None = None
) -> set[str]:
    """Cells of `campaign` (at `revision`, if given) with a finished measurement.

    A row whose `error` is set records a failure of the runner or the testbed, not
    a measurement, so its cell counts as not done and is retried on the next run.
    (An *invalid* load — failed resources, timeout — is a measurement and counts.)
    """
    if not has_table(store):
        return set()
    sql = f"SELECT DISTINCT cell FROM {TABLE} WHERE campaign = ? AND cell IS NOT NULL AND error IS NULL"
    args: list[Any] = [campaign]
    if revision is not None:
        sql += " AND code_rev = ?"
        args.append(revision)
    _, got = query(sql, args, store)
    return {str(r[0]) for r in got}


def reruns_of(
    campaign: str, store: str | os.PathLike[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Rows of the campaigns stored as reruns of `campaign` (`dch run --name`), by name."""
    if not has_table(store):
        return {}
    with connect(store, read_only=True) as con:
        if "rerun_of" not in existing_columns(con):
            return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for r in load_rows(store=store, where="rerun_of = ?", params=[campaign]):
        out.setdefault(str(r["campaign"]), []).append(r)
    return out


def campaigns(store: str | os.PathLike[str] | None = None) -> list[str]:
    if not has_table(store):
        return []
    _, got = query(
        f"SELECT DISTINCT campaign FROM {TABLE} WHERE campaign IS NOT NULL ORDER BY 1", (), store
    )
    return [str(r[0]) for r in got]


def decode_json(value: Any) -> Any:
    """Inverse of the JSON encoding of nested values (returns non-JSON text unchanged)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def iter_json_column(rows: Iterable[dict[str, Any]], column: str) -> Iterator[Any]:
    for r in rows:
        yield decode_json(r.get(column))
