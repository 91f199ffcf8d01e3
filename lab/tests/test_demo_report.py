"""The demo's outputs: a terminal table that fits 80 columns, a chart on which every
scheme is readable, and a report that shows the demo beside the published scorecard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from dchlab.commands import demo
from dchlab.experiments import analysis as an
from dchlab.experiments import scorecard, store
from dchlab.experiments.campaign import load_campaign
from dchlab.experiments.report import panels_by_scale
from dchlab.paths import repo_root

DEMO = repo_root() / "experiments" / "demo.yaml"


def _rows() -> list[dict[str, Any]]:
    """Demo rows at their widest: PLTs of 10 s, a gain of −1000%, 5 digits of loads."""
    plt = {"all-hbc": 912.4, "dchannel": 701.9, "all-llc": 10234.7}
    rows = []
    for page in range(3):
        for trial in range(2):
            for arm, ms in plt.items():
                rows.append(
                    {
                        "cell": f"demo|{arm}|p{page}|{trial}",
                        "ts": f"2026-11-26T05:{10 + page}:{10 + trial}",
                        "condition": "embb40-urllc5",
                        "arm": arm,
                        "item": f"page-{page}",
                        "trial": trial,
                        "plt_ms": ms * (1 + 0.11 * page - 0.07 * trial),
                        "valid": True,
                        "bytes_hbc": 0 if arm == "all-llc" else 900_000.0,
                        "bytes_llc": 100_000.0 if arm != "all-hbc" else 0.0,
                    }
                )
    return rows


def test_demo_table_fits_80_columns_without_wrapping() -> None:
    c = load_campaign(DEMO, check_channels=False)
    table = demo.summary_table(c, _rows())
    wide = Console(width=200, record=True, color_system=None)
    wide.print(table)
    lines = wide.export_text().rstrip("\n").splitlines()
    assert max(len(line.rstrip()) for line in lines) <= demo.TERMINAL_COLUMNS
    narrow = Console(width=demo.TERMINAL_COLUMNS, record=True, color_system=None)
    narrow.print(table)
    # at 80 columns nothing wraps: the same lines as on a 200-column terminal
    assert narrow.export_text().rstrip("\n").splitlines() == lines
    text = "\n".join(lines)
    for arm in ("all-hbc", "dchannel", "all-llc"):
        assert arm in text
    assert "baseline" in text and "%" in text


def test_a_far_slower_scheme_gets_its_own_panel() -> None:
    assert panels_by_scale({"all-hbc": 900.0, "dchannel": 700.0, "all-llc": 10_000.0}) == [
        ["all-hbc", "dchannel"],
        ["all-llc"],
    ]
    # within 3x of the fastest: one panel, the campaign's order kept
    assert panels_by_scale({"all-hbc": 900.0, "dchannel": 700.0, "ideal": 400.0}) == [
        ["all-hbc", "dchannel", "ideal"]
    ]
    assert panels_by_scale({"all-hbc": float("nan")}) == [["all-hbc"]]


def test_demo_report_shows_the_demo_beside_the_published_scorecard(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    store.append_rows(_rows(), campaign="demo", store=db)
    out = demo.demo_report(str(db), str(tmp_path / "index.html"))
    page = Path(out).read_text()
    top = page.split("<h2", 1)[0]  # everything before the first campaign section
    assert 'id="scorecard"' in top and "This run: demo" in top
    scores = [s for s in scorecard.CLAIMS]
    assert top.count('<td class="why">') == len(scores)  # every published claim
    assert "not run yet" not in page  # the campaigns this store never ran are left out
    gains = an.paired_gains(_rows())
    assert gains[("embb40-urllc5", "dchannel")].gain_pct.fmt(1, "%") in top
