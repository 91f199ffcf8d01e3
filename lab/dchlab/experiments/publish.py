"""Published results: finished (and partial) campaigns as Parquet files in the repository.

A campaign can take longer than one sitting and outlive the machine it ran on, so
what it measured is committed as data: `results/published/<campaign>.parquet`, one
row per measurement (the latest finished row of each cell: no failed runs, no quick
subsets) with every provenance column the store has. From there:

- `dch report --published` builds the HTML report from these files alone (a fresh
  clone runs nothing), through a throw-away DuckDB store (`published_store`);
- `dch run` treats a published cell as done (`published_cells`), at any code revision,
  and `dch run --publish` re-exports the campaign — the published rows plus the new
  ones — so a campaign resumes on any machine from the repository.

Exports are atomic (written beside the file, then renamed): an interrupted export
leaves the previous file whole.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import duckdb

from dchlab.errors import UserError
from dchlab.experiments import store
from dchlab.paths import repo_root

log = logging.getLogger(__name__)


class PublishError(UserError, RuntimeError):
    """A published file cannot be written or read (names the file and why)."""


def published_dir() -> Path:
    """`results/published/` of the repository, or $DCH_PUBLISHED."""
    env = os.environ.get("DCH_PUBLISHED")
    return Path(env) if env else repo_root() / "results" / "published"


def published_path(campaign: str, directory: Path | None = None) -> Path:
    return (directory or published_dir()) / f"{campaign}.parquet"


def published_files(directory: Path | None = None) -> list[Path]:
    d = directory or published_dir()
    return sorted(d.glob("*.parquet")) if d.is_dir() else []


# The published row of a cell: its latest finished measurement. A failed run (`error`
# set) is not a measurement; a quick subset is not the campaign. Rows without a cell
# (`dch pageload --campaign NAME`, ad-hoc runs) are each their own measurement: all kept.
_LATEST_PER_CELL = """
SELECT * EXCLUDE (_rank) FROM (
    SELECT *, row_number() OVER (
        PARTITION BY coalesce(cell, row_id) ORDER BY ts DESC, row_id DESC
    ) AS _rank
    FROM {source}
    WHERE campaign = ? AND error IS NULL AND coalesce(quick, false) = false
) WHERE _rank = 1
ORDER BY condition, item, trial, arm, page, scheme, ts
"""


def export(
    campaign: str,
    store_path: str | os.PathLike[str] | None = None,
    out: Path | None = None,
    as_name: str | None = None,
) -> tuple[Path, int]:
    """Write `campaign`'s measurements from the store to its published file.

    Rows already published but missing from the store (measured on another machine)
    are kept: the file is the union, one row per cell, the latest measurement winning.
    `as_name` publishes them as another campaign, a rerun of `campaign` (`rerun_of`):
    e.g. rows measured under conditions that must not count as the campaign itself
    (a busy machine), kept as evidence beside it. Returns (path, rows written);
    raises PublishError when there is nothing to write.
    """
    if as_name is not None:
        return _export_as(campaign, as_name, store_path, out)
    out = out or published_path(campaign)
    db = store.resolve_path(store_path)
    sources = []
    if store.has_table(store_path):
        sources.append(("store", db))
    if out.exists():
        sources.append(("published", out))
    if not sources:
        raise PublishError(
            f"campaign {campaign!r}: no rows to publish (no store at {db} and no {out})"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{campaign}.", suffix=".parquet", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with duckdb.connect() as con:
            parts = []
            for kind, path in sources:
                if kind == "store":
                    # through store.connect: it waits while a running campaign holds the lock
                    with store.connect(store_path, read_only=True) as scon:
                        stored = scon.sql(
                            f"SELECT * FROM {store.TABLE} WHERE campaign = ?", params=[campaign]
                        ).to_arrow_table()
                    con.register("stored_rows", stored)
                    parts.append("SELECT * FROM stored_rows")
                else:
                    parts.append(f"SELECT * FROM read_parquet('{_quote(path)}')")
            union = " UNION ALL BY NAME ".join(f"({p})" for p in parts)
            sql = _LATEST_PER_CELL.format(source=f"({union})")
            n = con.execute(f"SELECT count(*) FROM ({sql})", [campaign]).fetchone()
            count = int(n[0]) if n else 0
            if count == 0:
                raise PublishError(f"campaign {campaign!r}: no finished measurements to publish")
            con.execute(
                f"COPY ({sql}) TO '{_quote(tmp)}' (FORMAT parquet, COMPRESSION zstd)", [campaign]
            )
        tmp.replace(out)
    except duckdb.Error as e:
        raise PublishError(f"cannot export campaign {campaign!r} to {out}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    log.info("published %d rows of %s to %s", count, campaign, out)
    return out, count


def _export_as(
    campaign: str, as_name: str, store_path: str | os.PathLike[str] | None, out: Path | None
) -> tuple[Path, int]:
    if not store.has_table(store_path):
        raise PublishError(f"campaign {campaign!r}: no store at {store.resolve_path(store_path)}")
    with store.connect(store_path, read_only=True) as scon:
        stored = scon.sql(
            f"SELECT * FROM {store.TABLE} WHERE campaign = ?", params=[campaign]
        ).to_arrow_table()
    tmpdir = Path(tempfile.mkdtemp(prefix="dch-publish-as-"))
    try:
        db = tmpdir / "renamed.duckdb"
        with duckdb.connect(str(db)) as con:
            con.register("stored_rows", stored)
            if "rerun_of" in stored.column_names:
                select = "* REPLACE (? AS campaign, coalesce(rerun_of, ?) AS rerun_of)"
            else:
                select = "* REPLACE (? AS campaign), ? AS rerun_of"
            con.execute(
                f"CREATE TABLE {store.TABLE} AS SELECT {select} FROM stored_rows",
                [as_name, campaign],
            )
        return export(as_name, db, out or published_path(as_name))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")


def read_rows(path: Path) -> list[dict]:
    """Every row of a published file, as the store would return them."""
    try:
        with duckdb.connect() as con:
            cur = con.execute(f"SELECT * FROM read_parquet('{_quote(path)}') ORDER BY ts, row_id")
            names = [d[0] for d in cur.description or []]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    except duckdb.Error as e:
        raise PublishError(f"{path}: not a readable published results file ({e})") from e


def published_cells(campaign: str, directory: Path | None = None) -> set[str]:
    """Cells of `campaign` that its published file already holds (any code revision)."""
    path = published_path(campaign, directory)
    if not path.exists():
        return set()
    try:
        with duckdb.connect() as con:
            got = con.execute(
                f"SELECT DISTINCT cell FROM read_parquet('{_quote(path)}') "
                "WHERE campaign = ? AND cell IS NOT NULL",
                [campaign],
            ).fetchall()
    except duckdb.Error as e:
        raise PublishError(f"{path}: not a readable published results file ({e})") from e
    return {str(r[0]) for r in got}


def published_store(files: Iterable[Path] | None = None, directory: Path | None = None) -> Path:
    """A temporary DuckDB store holding every published row (table `results`), for the
    report. The caller deletes it (it lives in a temporary directory)."""
    paths = list(files) if files is not None else published_files(directory)
    tmpdir = Path(tempfile.mkdtemp(prefix="dch-published-"))
    db = tmpdir / "published.duckdb"
    with duckdb.connect(str(db)) as con:
        if not paths:
            return db
        union = " UNION ALL BY NAME ".join(
            f"(SELECT * FROM read_parquet('{_quote(p)}'))" for p in paths
        )
        try:
            con.execute(f"CREATE TABLE {store.TABLE} AS {union}")
        except duckdb.Error as e:
            names = ", ".join(str(p) for p in paths)
            raise PublishError(f"cannot read the published results ({names}): {e}") from e
    return db
