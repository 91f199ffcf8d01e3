"""The report renders plots and tables from a store filled with rows.

All rows here are TEST DATA (labelled `test_data: True`), generated in the test, never
shipped as results; the report must say so.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np

from dchlab.experiments import store
from dchlab.experiments.campaign import cell_key, load_campaign
from dchlab.experiments.report import build_report

REPO = Path(__file__).resolve().parents[2]


def _fill(db: Path, name: str, rng: np.random.Generator) -> None:
    c = load_campaign(REPO / "experiments" / f"{name}.yaml", check_channels=False).quick()
    rows = []
    for cond in c.conditions:
        for trial in range(2):
            for sch in c.schemes:
                items = ["curl"] if c.workload.kind == "curl-phases" else ["site0", "site1"]
                if c.workload.kind == "bulk":
                    items = ["10KB", "1MB"]
                if c.workload.kind == "app":
                    items = [
                        f"{p}/{i}" for p in ("social", "news") for i in c.workload.interactions
                    ]
                for it in items:
                    base = 1000.0 if sch.label == "all-hbc" else 700.0
                    r = {
                        "test_data": True,
                        "cell": cell_key(cond.name, it, trial, sch.label),
                        "condition": cond.name,
                        "arm": sch.label,
                        "scheme": sch.scheme,
                        "item": it,
                        "page": it,
                        "trial": trial,
                        "seed": 1,
                        "hbc": cond.hbc,
                        "llc": cond.llc,
                        "valid": not (sch.label == "dchannel" and trial == 1 and it == "site1"),
                        "plt_ms": base + float(rng.normal(0, 30)),
                        "total_ms": base + float(rng.normal(0, 30)),
                        "irt_ms": base + float(rng.normal(0, 30)),
                        "dns_ms": 40.0 + trial,
                        "connect_ms": 41.0,
                        "tls_ms": 50.0,
                        "transfer_ms": 200.0,
                        "bytes_hbc": 9000,
                        "bytes_llc": 1000,
                        "stats": {"agents": {"client": {"reward_error_ms": [1.0, 5.0, 12.0]}}},
                    }
                    rows.append(r)
    store.append_rows(rows, campaign=c.name, store=db)


def test_report_renders_plots_tables_and_provenance(tmp_path):
    db = tmp_path / "r.duckdb"
    rng = np.random.default_rng(1)
    for name in ("fig3", "table2", "fig8", "fig6", "fig11", "table4", "fig7"):
        _fill(db, name, rng)
    files = sorted((REPO / "experiments").glob("*.yaml"))
    out = build_report(db, tmp_path / "index.html", files, with_channels=False)
    page = out.read_text()
    # one inlined PNG per filled campaign, each a real PNG
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(pngs) == 7
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    # the paper's numbers stand beside ours (Table 2: All-eMBB total 349 ms, DChannel transfer 144)
    assert "/ 349" in page and "/ 144" in page
    # fig3 quick: dchannel ~30% faster than all-hbc on the test data; one invalid load counted
    assert re.search(r"<td>MM-S</td><td>dchannel</td><td>\d\d\.\d%", page)
    assert re.search(r"<td>MM-S</td><td>obj-oracle</td><td>\d\d\.\d%", page)  # object level
    assert "1 / 0" in page  # invalid (scheme / base)
    assert "./dch run experiments/fig3.yaml" in page
    # fig7: per interaction, beside the paper's (launch 15%, item 21%)
    assert re.search(r"<td>launch</td><td>dchannel</td><td>\d\d\.\d%[^<]*</td><td>15\.0</td>", page)
    assert "TEST DATA" in page
    # campaigns without rows say how to produce them
    assert "No results yet. Run `./dch run experiments/table5.yaml`" in page
    # self-contained: no external resources
    assert not re.search(r'(src|href)="https?://', page)


def test_fig3_summary_labels_the_object_level_rows() -> None:
    from dchlab.experiments.summary import summarize

    c = load_campaign(REPO / "experiments" / "fig3.yaml", check_channels=False)
    plt = {"all-hbc": 1000.0, "obj-size:3000": 900.0, "obj-size:6000": 800.0}
    rows = [  # TEST DATA ONLY
        {
            "test_data": True,
            "cell": cell_key("MM-S", page, trial, sch.label),
            "condition": "MM-S",
            "arm": sch.label,
            "scheme": sch.scheme,
            "item": page,
            "page": page,
            "trial": trial,
            "valid": True,
            "plt_ms": plt.get(sch.label, 700.0) + trial,
        }
        for sch in c.schemes
        for page in ("site0", "site1")
        for trial in range(2)
    ]
    s = summarize(c, rows)
    shown = {r[1] for t in s.tables for r in t.rows if r[0] == "MM-S"}
    assert {"obj-size:3000", "obj-size:6000", "obj-oracle", "ians"} <= shown
    # the better threshold (lower PLT) is the best-of row
    assert "best obj-size (= obj-size:6000)" in shown


def test_cost_text_sums_each_loads_wall_time() -> None:
    import json as _json

    from dchlab.experiments.summary import cost_text

    rows = [
        {"cell": f"c{i}", "ts": i, "plt_ms": 500.0,
         "stats": _json.dumps({"timing": {"load": {"total": 2000.0}}})}
        for i in range(90)
    ]  # fmt: skip
    rows.append({"cell": "x", "ts": 99, "plt_ms": 1.0, "stats": {}})  # no timing: not counted
    assert cost_text(rows) == (
        "machine time 3 min for 90 loads (2.00 s per load, of which a mean PLT of 0.50 s)"
    )
    assert cost_text([{"cell": "x", "stats": "{}"}]) == ""
