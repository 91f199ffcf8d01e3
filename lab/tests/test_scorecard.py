"""The scorecard: its verdict rule on hand-made numbers, and every number of the published
scorecard recomputed from results/published/*.parquet independently — DuckDB SQL over the
Parquet files for the pairing and the means, the paper's values read from the campaign
YAML, a bootstrap written here."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
import yaml

from dchlab.experiments import analysis as an
from dchlab.experiments import publish, scorecard
from dchlab.experiments.scorecard import (
    DIFFERS,
    NOT_RUN,
    REPRODUCED,
    WITHIN_CI,
    Score,
    ratio_gain,
    verdict,
)
from dchlab.paths import repo_root

# ---------------------------------------------------------------- the rule, by hand


def test_verdict_rule_on_hand_made_numbers() -> None:
    ci = an.CI(18.4, 14.1, 22.9, 40)
    assert verdict(20.0, ci, "%") == REPRODUCED  # 1.6 points away
    assert verdict(22.0, ci, "%") == WITHIN_CI  # 3.6 away, inside [14.1, 22.9]
    assert verdict(37.0, ci, "%") == DIFFERS  # outside the CI
    assert verdict(None, ci, "%") == NOT_RUN
    assert verdict(20.0, an.NAN_CI, "%") == NOT_RUN
    # times and sizes: 10% of the paper's value
    assert verdict(392.0, an.CI(364.0, 364.0, 364.0, 1), "B") == REPRODUCED  # 7% away
    assert verdict(944.0, an.CI(280.0, 280.0, 280.0, 1), "B") == DIFFERS  # no CI to be within
    assert verdict(189.0, an.CI(110.0, 108.0, 112.0, 10), "ms") == DIFFERS


def test_ratio_gain_is_one_minus_the_ratio_of_means() -> None:
    pages = [(1000.0, 800.0), (2000.0, 1000.0), (500.0, 500.0)]
    got = ratio_gain(pages)
    # means 1166.67 and 766.67: 1 - 766.67 / 1166.67 = 34.29%
    assert got.mean == pytest.approx(100 * (1 - 2300 / 3500))
    assert got.n == 3 and got.lo <= got.mean <= got.hi
    one = ratio_gain([(1000.0, 900.0)])
    assert (one.mean, one.lo, one.hi, one.n) == (pytest.approx(10.0), one.mean, one.mean, 1)
    assert math.isnan(ratio_gain([]).mean)


def test_reason_names_the_gap_and_the_measured_cause() -> None:
    claim = scorecard.CLAIMS[1]  # fig3 MM-W
    s = Score(claim, 37.0, an.CI(17.6, 13.7, 21.1, 40), 0.51, DIFFERS, "", "%")
    assert s.reason().startswith("ours 19.4 points below: ")
    assert claim.reason in s.reason()
    ok = Score(claim, 37.0, an.CI(36.0, 30.0, 40.0, 40), 0.9, REPRODUCED, "", "%")
    assert ok.reason() == ""


# ---------------------------------------------------------------- the published numbers

BOOT, SEED = 2000, 20230417  # the report's bootstrap: 2000 resamples, its fixed seed


def _boot(x: np.ndarray[Any, Any], stat: Any) -> tuple[float, float]:
    idx = np.random.default_rng(SEED).integers(0, len(x), size=(BOOT, len(x)))
    lo, hi = np.percentile(stat(x[idx]), [2.5, 97.5])
    return float(lo), float(hi)


_LATEST = """
WITH m AS (
  SELECT *, row_number() OVER (ORDER BY ts, row_id) AS pos
  FROM rows WHERE campaign = $campaign AND coalesce(error, '') = ''),
c AS (
  SELECT *, min(pos) OVER (PARTITION BY cell) AS cell_first,
         row_number() OVER (PARTITION BY cell ORDER BY ts DESC, row_id DESC) AS k
  FROM m)
SELECT coalesce(nullif(condition, ''), hbc || ' + ' || llc) AS cond,
       coalesce(nullif(arm, ''), scheme) AS arm,
       coalesce(nullif(item, ''), nullif(page, ''), '') AS item,
       coalesce(trial, 0) AS trial, cell_first, pos, valid, stats,
       {metric} AS v,
       coalesce(valid, false) AND {metric} IS NOT NULL AND NOT isnan({metric}) AS ok
FROM c WHERE k = 1
"""


Pages = dict[tuple[str, str], list[tuple[float, float, float]]]


def _pages(
    con: duckdb.DuckDBPyConnection, campaign: str, metric: str, base: str
) -> tuple[Pages, dict[tuple[str, str], float]]:
    """Per (condition, arm): (gain %, baseline mean, scheme mean) per page, pages in
    the order of their first row; and the mean over pages of the gain in ms."""
    sql = f"""
    WITH l AS ({_LATEST.format(metric=metric)}),
    p AS (SELECT a.cond, a.arm, a.item, avg(b.v - a.v) AS g, avg(b.v) AS mb, avg(a.v) AS ma
          FROM l a JOIN l b ON b.cond = a.cond AND b.item = a.item AND b.trial = a.trial
          WHERE b.arm = $base AND a.arm <> $base AND a.ok AND b.ok GROUP BY ALL),
    o AS (SELECT cond, arm, item, min(pos) AS first FROM l GROUP BY ALL)
    SELECT p.cond, p.arm, CASE WHEN mb > 0 THEN 100 * g / mb ELSE 'nan'::DOUBLE END,
           mb, ma, g
    FROM p JOIN o USING (cond, arm, item) ORDER BY o.first
    """
    out: Pages = {}
    gms: dict[tuple[str, str], list[float]] = {}
    for cond, arm, pct, mb, ma, g in con.execute(
        sql, {"campaign": campaign, "base": base}
    ).fetchall():
        out.setdefault((cond, arm), []).append((pct, mb, ma))
        gms.setdefault((cond, arm), []).append(g)
    return out, {k: float(np.mean(v)) for k, v in gms.items()}


def _paper(campaign: str, cond: str, arm: str, key: str, measure: str) -> float | None:
    doc = yaml.safe_load((repo_root() / "experiments" / f"{campaign}.yaml").read_text())
    vals = doc["paper"]["values"].get(cond, {})

    def one(a: str) -> float | None:
        v = vals.get(a)
        if isinstance(v, dict):
            return None if v.get(key) is None else float(v[key])
        return None if v is None or key != doc["paper"]["metric"] else float(v)

    if measure != "ratio":
        return one(arm)
    a, b = one(arm), one(doc["analysis"].get("baseline", "all-hbc"))
    return None if a is None or b is None else 100 * (1 - a / b)


def _recompute(con: duckdb.DuckDBPyConnection, s: Score) -> tuple[float, float, float, Any]:
    """(ours, lo, hi, ideal share) of one scorecard row, from SQL."""
    cl = s.claim
    doc = yaml.safe_load((repo_root() / "experiments" / f"{cl.campaign}.yaml").read_text())
    base = doc["analysis"].get("baseline", "all-hbc")
    if cl.measure in ("gain", "ratio"):
        metric = doc["analysis"].get("metric", "plt_ms")
        pages, gain_ms = _pages(con, cl.campaign, metric, base)
        rows = np.asarray(pages[(cl.condition, cl.arm)])
        ideal = gain_ms.get((cl.condition, "ideal"))
        share = gain_ms[(cl.condition, cl.arm)] / ideal if ideal and ideal > 0 else None
        if cl.measure == "gain":
            x = rows[:, 0][~np.isnan(rows[:, 0])]
            return (float(x.mean()), *_boot(x, lambda r: r.mean(axis=1)), share)
        mb, ma = rows[:, 1], rows[:, 2]
        both = np.stack([mb, ma], axis=1)
        point = 100 * (1 - ma.mean() / mb.mean())
        idx = np.random.default_rng(SEED).integers(0, len(mb), size=(BOOT, len(mb)))
        boot = 100 * (1 - both[idx][:, :, 1].mean(axis=1) / both[idx][:, :, 0].mean(axis=1))
        lo, hi = np.percentile(boot, [2.5, 97.5])
        return float(point), float(lo), float(hi), share
    if cl.measure == "mean":
        sql = f"""WITH l AS ({_LATEST.format(metric=cl.key)})
        SELECT item, v FROM l WHERE cond = $cond AND arm = $arm AND ok ORDER BY cell_first"""
        got = con.execute(
            sql, {"campaign": cl.campaign, "cond": cl.condition, "arm": cl.arm}
        ).fetchall()
        assert len({item for item, _ in got}) == 1  # one object fetched: units are trials
        x = np.asarray([v for _, v in got])
        return (float(x.mean()), *_boot(x, lambda r: r.mean(axis=1)), None)
    stat = doc["analysis"].get("stats", {}).get(cl.key) or doc["analysis"]["stat"]
    paths = [stat] if isinstance(stat, str) else stat
    q = 0.5 if cl.measure == "p50" else 0.9
    values = " UNION ALL ".join(
        f"""SELECT unnest(CASE WHEN json_type(stats, '$.{p}') = 'ARRAY'
                THEN from_json(json_extract(stats, '$.{p}'), '["DOUBLE"]')
                ELSE [json_extract(stats, '$.{p}')::DOUBLE] END) AS x
            FROM l WHERE cond = $cond AND arm = $arm AND valid IS DISTINCT FROM false"""
        for p in paths
    )
    sql = f"""WITH l AS ({_LATEST.format(metric="plt_ms")}), v AS ({values})
    SELECT quantile_cont(x, {q}) FROM v WHERE x IS NOT NULL"""
    (got,) = con.execute(
        sql, {"campaign": cl.campaign, "cond": cl.condition, "arm": cl.arm}
    ).fetchone() or (None,)
    return float(got), float(got), float(got), None


@pytest.fixture(scope="module")
def published_scores() -> Iterator[list[Score]]:
    db = publish.published_store()
    try:
        yield scorecard.store_scorecard(db)
    finally:
        shutil.rmtree(db.parent, ignore_errors=True)


def test_published_scorecard_equals_an_independent_recomputation(
    published_scores: list[Score],
) -> None:
    files = sorted(str(p) for p in (repo_root() / "results" / "published").glob("*.parquet"))
    assert files, "results/published holds the committed data"
    con = duckdb.connect()
    con.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet({files!r}, union_by_name = true)")
    assert len(published_scores) == len(scorecard.CLAIMS)
    for s in published_scores:
        cl = s.claim
        where = f"{cl.campaign} {cl.condition} {cl.arm} {cl.key}"
        paper = _paper(cl.campaign, cl.condition, cl.arm, cl.key, cl.measure)
        assert paper is not None and s.paper == pytest.approx(paper), where
        mean, lo, hi, share = _recompute(con, s)
        assert s.ours.mean == pytest.approx(mean, rel=1e-9, abs=1e-9), where
        assert s.ours.lo == pytest.approx(lo, rel=1e-9, abs=1e-9), where
        assert s.ours.hi == pytest.approx(hi, rel=1e-9, abs=1e-9), where
        if share is None:
            assert s.ideal_share is None, where
        else:
            assert s.ideal_share == pytest.approx(share, rel=1e-9), where
        # the verdict, by the rule of the module docstring, on the recomputed numbers
        tol = 2.0 if s.unit == "%" else 0.1 * abs(paper)
        expected = (
            REPRODUCED
            if abs(mean - paper) <= tol
            else WITHIN_CI
            if s.ours.n >= 2 and lo <= paper <= hi
            else DIFFERS
        )
        assert s.verdict == expected, where


def test_published_scorecard_renders_every_row_with_its_numbers(
    published_scores: list[Score],
) -> None:
    md = scorecard.scorecard_markdown(published_scores)
    body = [line for line in md.splitlines() if line.startswith("| ") and "figure" not in line]
    assert len(body) == len(published_scores)
    for line, s in zip(body, published_scores, strict=True):
        assert scorecard.fmt_ours(s) in line
        assert f"| [{s.verdict}](#{s.claim.section}) |" in line  # linked to its section
        if s.verdict == DIFFERS:
            assert s.reason() and s.reason() in line  # with its measured reason
    assert (
        Path(repo_root() / "docs" / "results.md")
        .read_text()
        .count(scorecard.tally(published_scores))
        == 1
    ), "docs/results.md carries the current scorecard (regenerate it)"


def test_published_report_opens_on_the_scorecard(
    published_scores: list[Score], tmp_path: Path
) -> None:
    from dchlab.experiments.report import build_report

    db = publish.published_store()
    try:
        out = build_report(
            db,
            tmp_path / "index.html",
            [repo_root() / "experiments" / "table2.yaml"],
            with_channels=False,
            scores=published_scores,
        )
    finally:
        shutil.rmtree(db.parent, ignore_errors=True)
    page = out.read_text()
    body = page.split("</h1>", 1)[1]
    first_table = body.split("<table>", 1)[1].split("</table>", 1)[0]
    assert body.index('id="scorecard"') < body.index("<h2")  # before any campaign section
    for s in published_scores:
        assert scorecard.fmt_ours(s) in first_table
    assert first_table.count("<tr") == len(published_scores) + 1  # + the header


def test_markdown_puts_the_scorecard_under_the_title_and_replaces_it(tmp_path: Path) -> None:
    from dchlab.experiments.markdown import (
        BEGIN,
        END,
        SCORECARD_BEGIN,
        SCORECARD_END,
        write_markdown,
    )

    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nProse kept.\n")
    write_markdown(doc, f"{BEGIN}\ntables\n{END}", "card one")
    text = doc.read_text()
    assert text.startswith(f"# Results\n\n{SCORECARD_BEGIN}\n\ncard one\n\n{SCORECARD_END}")
    assert "Prose kept." in text and text.index("Prose kept.") < text.index(BEGIN)
    write_markdown(doc, f"{BEGIN}\ntables two\n{END}", "card two")
    again = doc.read_text()
    assert "card one" not in again and again.count("card two") == 1
    assert "tables two" in again and "tables\n" not in again and "Prose kept." in again


def test_markdown_writes_the_tables_to_the_tables_page_when_only_it_has_markers(
    tmp_path: Path,
) -> None:
    from dchlab.experiments.markdown import BEGIN, END, tables_page, write_markdown

    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nShort answers.\n")
    side = tables_page(doc)
    assert side == tmp_path / "results" / "tables.md"
    side.parent.mkdir()
    side.write_text(f"# Tables\n\n{BEGIN}\nold\n{END}\n")
    write_markdown(doc, f"{BEGIN}\nnew tables\n{END}", "the card")
    assert side.read_text() == f"# Tables\n\n{BEGIN}\nnew tables\n{END}\n"
    text = doc.read_text()
    assert "new tables" not in text and "the card" in text and "Short answers." in text


def _github_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces
    to hyphens (letters, digits, "_" and "-" kept)."""
    import re

    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_claim_links_to_a_section_of_results_md() -> None:
    text = (repo_root() / "docs" / "results.md").read_text()
    anchors = {
        _github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")
    }
    assert _github_anchor("Table 5: α and the eMBB RTT (table5; α = 0.75 on 40 pages)") == (
        "table-5-α-and-the-embb-rtt-table5-α--075-on-40-pages"
    )
    for cl in scorecard.CLAIMS:
        assert cl.section in anchors, (cl.campaign, cl.section)
