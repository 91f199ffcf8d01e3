"""`dch run`, `dch results` and `dch report` as a user calls them."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from dchlab.experiments import store

LAB = Path(__file__).resolve().parents[1]


def dch(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(LAB)}
    return subprocess.run(
        [sys.executable, "-m", "dchlab.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_run_rejects_a_bad_campaign_with_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nschemes: [all-hbc]\nconditions: [{name: a, hbc: embb}]\nworkload: {kind: bulk, sizes: [1KB]}\n"
    )
    p = dch("run", str(bad), "--store", str(tmp_path / "s.duckdb"))
    assert p.returncode == 2
    assert f"{bad}: conditions[0].llc: missing" in p.stderr
    assert not (tmp_path / "s.duckdb").exists()


def test_results_summary_csv_json_and_sql(tmp_path):
    db = tmp_path / "s.duckdb"
    rows = [  # TEST DATA
        {
            "arm": a,
            "scheme": a,
            "condition": "c",
            "plt_ms": v,
            "valid": ok,
            "test_data": True,
            "cell": f"c|p|t{i}|{a}",
        }
        for i, (a, v, ok) in enumerate(
            [("all-hbc", 100.0, True), ("dchannel", 80.0, True), ("dchannel", 1.0, False)]
        )
    ]
    store.append_rows(rows, campaign="t", store=db)
    p = dch("results", "--store", str(db), "--csv")
    assert p.returncode == 0, p.stderr
    got = list(csv.DictReader(io.StringIO(p.stdout)))
    d = next(r for r in got if r["scheme"] == "dchannel")
    assert (d["loads"], d["invalid"], d["mean_plt_ms"]) == ("2", "1", "80.0")
    p = dch(
        "results",
        "--store",
        str(db),
        "--json",
        "--sql",
        "SELECT count(*) AS n FROM results WHERE valid",
    )
    assert json.loads(p.stdout.strip()) == {"n": 2}
    p = dch("results", "--store", str(db), "--sql", "SELECT nope FROM results")
    assert p.returncode == 2 and "nope" in p.stderr
    p = dch("results", "--store", str(tmp_path / "none.duckdb"))
    assert p.returncode == 1 and "no results" in p.stderr


def test_report_command_writes_the_page(tmp_path):
    out = tmp_path / "r.html"
    p = dch("report", "--store", str(tmp_path / "empty.duckdb"), "-o", str(out), "--no-channels")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out)
    assert "No results yet. Run `./dch run experiments/fig3.yaml`" in out.read_text()


def test_demo_says_what_is_missing_instead_of_printing_numbers(tmp_path):
    env_dir = tmp_path / "no-target"
    env_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(LAB), "CARGO_TARGET_DIR": str(env_dir)}
    p = subprocess.run(
        [sys.executable, "-m", "dchlab.cli", "demo", "--store", str(tmp_path / "d.duckdb")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 3
    assert "binary chanemu" in p.stdout and "cargo build --release -p chanemu" in p.stdout
    assert "Nothing was measured" in p.stdout
    assert not (tmp_path / "d.duckdb").exists()
