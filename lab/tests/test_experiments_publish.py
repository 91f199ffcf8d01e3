"""Published results (results/published/*.parquet): what an export holds, that a run
resumes from it on a machine whose store is empty, and that the report builds from it."""

from __future__ import annotations

import textwrap

import duckdb
import pytest

from dchlab.experiments import publish, runner, store
from dchlab.experiments.campaign import load_campaign

# 2 schemes x 2 sizes x 1 trial = 4 cells
CAMPAIGN = """
name: publish-test
schemes: [all-hbc, dchannel]
conditions:
  - {name: embb-urllc, hbc: embb, llc: urllc}
workload: {kind: bulk, sizes: [10KB, 20KB], timeout_s: 30}
trials: 1
analysis: {kind: bulk, baseline: all-hbc, metric: total_ms}
quick: {schemes: [all-hbc, dchannel], trials: 1}
"""


def fake_ms(ms: float):
    def run(c, g):
        return [{"valid": True, "total_ms": ms, "size_bytes": 1000}]

    return run


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "publish-test.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    return load_campaign(path)


@pytest.fixture
def pub(tmp_path, monkeypatch):
    d = tmp_path / "published"
    monkeypatch.setenv("DCH_PUBLISHED", str(d))
    return d


def _parquet_rows(path):
    with duckdb.connect() as con:
        cur = con.execute(f"SELECT cell, total_ms, error, quick FROM read_parquet('{path}')")
        return cur.fetchall()


def test_export_holds_the_latest_finished_row_per_cell(campaign, tmp_path, pub):
    db = tmp_path / "s.duckdb"
    runner.run_campaign(campaign, store_path=db, executor=fake_ms(10.0))
    # measured again later (--fresh): the newer rows win
    runner.run_campaign(campaign, store_path=db, executor=fake_ms(20.0), fresh=True)
    # a failed run and a quick subset are not measurements of the campaign
    store.append_rows(
        [{"cell": "embb-urllc|10KB|t0|all-hbc", "error": "boom", "valid": False}],
        campaign="publish-test",
        store=db,
    )
    runner.run_campaign(campaign.quick(), store_path=db, executor=fake_ms(99.0), fresh=True)

    path, n = publish.export("publish-test", db)
    assert path == pub / "publish-test.parquet"
    rows = _parquet_rows(path)
    assert n == len(rows) == 4
    assert len({r[0] for r in rows}) == 4  # one row per cell
    assert {r[1] for r in rows} == {20.0}
    assert all(r[2] is None and not r[3] for r in rows)
    assert [p.name for p in pub.iterdir()] == ["publish-test.parquet"]  # no temp file left


def test_run_resumes_from_published_rows_on_an_empty_store(campaign, tmp_path, pub):
    """Another machine: a fresh store, the committed file. Published cells are skipped
    (at any revision), and re-exporting keeps them beside the new rows."""
    first = tmp_path / "machine1.duckdb"
    calls = []

    def two_then_stop(c, g):
        calls.append(g.cells[0])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return fake_ms(10.0)(c, g)

    with pytest.raises(KeyboardInterrupt):
        runner.run_campaign(campaign, store_path=first, executor=two_then_stop)
    _, n = publish.export("publish-test", first)
    assert n == 2

    second = tmp_path / "machine2.duckdb"
    s = runner.run_campaign(campaign, store_path=second, executor=fake_ms(30.0))
    assert (s.skipped, s.measured) == (2, 2)
    _, n = publish.export("publish-test", second)
    rows = _parquet_rows(pub / "publish-test.parquet")
    assert n == 4 and sorted(r[1] for r in rows) == [10.0, 10.0, 30.0, 30.0]
    assert publish.published_cells("publish-test") == {r[0] for r in rows}


def test_export_of_an_unknown_campaign_names_it(tmp_path, pub):
    with pytest.raises(publish.PublishError, match="'nope'"):
        publish.export("nope", tmp_path / "none.duckdb")


def test_a_corrupt_published_file_is_named(tmp_path, pub):
    pub.mkdir()
    bad = pub / "publish-test.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(publish.PublishError, match=r"publish-test\.parquet"):
        publish.published_cells("publish-test")


def test_report_builds_from_published_files_alone(campaign, tmp_path, pub, monkeypatch):
    from dchlab import cli

    db = tmp_path / "s.duckdb"
    runner.run_campaign(campaign, store_path=db, executor=fake_ms(10.0))
    publish.export("publish-test", db)
    db.unlink()  # a fresh clone has no store
    monkeypatch.setenv("DCH_RESULTS", str(tmp_path / "absent.duckdb"))
    out = tmp_path / "r.html"
    code = cli.main(
        [
            "report",
            "--published",
            "--no-channels",
            "-o",
            str(out),
            str(tmp_path / "publish-test.yaml"),
        ]
    )
    assert code == 0
    html = out.read_text()
    assert "publish-test" in html and "4 measurements" in html
    assert str(pub) in html  # says where the rows came from
    assert not (tmp_path / "absent.duckdb").exists()
