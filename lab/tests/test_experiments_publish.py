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
    def run(c, g, pool=None):
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

    def two_then_stop(c, g, pool=None):
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


def test_markdown_tables_replace_only_the_generated_part(campaign, tmp_path, pub, monkeypatch):
    from dchlab import cli
    from dchlab.experiments import markdown

    db = tmp_path / "s.duckdb"
    runner.run_campaign(campaign, store_path=db, executor=fake_ms(10.0))
    publish.export("publish-test", db)
    doc = tmp_path / "results.md"
    doc.write_text(
        f"# Results\n\nHand-written reason.\n\n{markdown.BEGIN}\nold numbers\n{markdown.END}\n\nTail.\n"
    )
    args = ["report", "--published", "--no-channels", "-o", str(tmp_path / "r.html")]
    args += ["--markdown", str(doc), str(tmp_path / "publish-test.yaml")]
    assert cli.main(args) == 0
    text = doc.read_text()
    # the scorecard opens the page, under the title; the hand-written prose follows it
    head, _, rest = text.partition(markdown.SCORECARD_BEGIN)
    assert head == "# Results\n\n"
    assert rest.partition(markdown.SCORECARD_END)[2].startswith("\n\nHand-written reason.\n\n")
    assert text.rstrip().endswith("Tail.") and "old numbers" not in text
    assert "### publish-test" in text and "4 measurements" in text
    assert "| condition |" in text  # a table, in Markdown
    assert text.count(markdown.BEGIN) == 1 and text.count(markdown.END) == 1


def test_markdown_needs_published(tmp_path):
    from dchlab import cli

    assert cli.main(["report", "--markdown", str(tmp_path / "x.md")]) == 2


def test_paper_number_above_our_ideal_bound_is_marked():
    from dchlab.experiments import analysis as an
    from dchlab.experiments.summary import _paper_vs_bound

    ci = an.CI(30.0, 25.0, 35.0, 10)
    ideal = an.Gain("LB-D", "ideal", "all-hbc", ci, ci, 1000.0, 700.0, 10, 10, 0, 0, 20.0)
    assert _paper_vs_bound(42.0, ideal) == "42.0 (above our ideal bound, 35.0%)"
    assert _paper_vs_bound(34.0, ideal) == "34.0"
    assert _paper_vs_bound(None, ideal) == "—"
    assert _paper_vs_bound(42.0, None) == "42.0"


def test_publish_as_another_campaign_keeps_the_original_unpublished(campaign, tmp_path, pub):
    """`dch publish fig3 --as fig3-busy`: the rows become a rerun of fig3, published
    beside it; fig3's own cells stay unmeasured for `dch run`."""
    db = tmp_path / "s.duckdb"
    runner.run_campaign(campaign, store_path=db, executor=fake_ms(10.0))
    path, n = publish.export("publish-test", db, as_name="publish-busy")
    assert path == pub / "publish-busy.parquet" and n == 4
    assert not (pub / "publish-test.parquet").exists()
    with duckdb.connect() as con:
        got = con.execute(
            f"SELECT DISTINCT campaign, rerun_of FROM read_parquet('{path}')"
        ).fetchall()
    assert got == [("publish-busy", "publish-test")]
    assert publish.published_cells("publish-test") == set()
    s = runner.run_campaign(campaign, store_path=tmp_path / "fresh.duckdb", executor=fake_ms(9.0))
    assert s.measured == 4  # nothing skipped: the busy rows are not the campaign's


def test_rows_without_cells_are_all_published(tmp_path, pub):
    """`dch pageload --campaign NAME` rows have no cell: each is its own measurement."""
    db = tmp_path / "s.duckdb"
    rows = [
        {"scheme": s, "page": p, "plt_ms": 1.0, "valid": True} for s in ("a", "b") for p in "xyz"
    ]
    store.append_rows(rows, campaign="adhoc", store=db)
    _, n = publish.export("adhoc", db)
    assert n == 6
