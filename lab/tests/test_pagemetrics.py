"""Speed Index, visual completeness and above-the-fold time on synthetic frames, with
the expected values computed by hand; the page-metrics table of the report.

Frames are 10 x 10 pixels (100 per channel). The blank page is white, which the
histograms leave out, so the initial histogram is empty.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dchlab.experiments.campaign import cell_key, load_campaign
from dchlab.experiments.summary import summarize
from dchlab.workloads import pagemetrics as pm

REPO = Path(__file__).resolve().parents[2]
WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
RED = (255, 0, 0)


def image(n_coloured: int, colour: tuple[int, int, int], rest=WHITE) -> Image.Image:
    """10 x 10: the first `n_coloured` pixels (row-major) `colour`, the rest `rest`."""
    px = np.array([rest] * 100, dtype=np.uint8)
    px[:n_coloured] = colour
    return Image.fromarray(px.reshape(10, 10, 3))


def test_histogram_leaves_out_near_white_pixels() -> None:
    im = image(30, BLACK, rest=(250, 252, 249))  # all three channels >= 249: background
    h = pm.histogram(im)
    assert h.shape == (3, 256)
    assert h.sum() == 90 and (h[:, 0] == 30).all()
    # one channel below 249 is enough to count the pixel
    h = pm.histogram(image(100, (248, 255, 255)))
    assert h[0, 248] == 100 and h[1, 255] == 100 and h[2, 255] == 100


def test_visual_completeness_by_hand() -> None:
    h0 = pm.histogram(image(0, BLACK))  # blank: empty histogram
    final = pm.histogram(image(100, BLACK))  # 100 black pixels: bin 0 of each channel
    assert pm.visual_completeness(pm.histogram(image(40, BLACK)), h0, final) == pytest.approx(0.4)
    # 50 red pixels: R moved to bin 255 (no part of the way to bin 0), G and B to bin 0:
    # match = 0 + 50 + 50 of total 300
    assert pm.visual_completeness(pm.histogram(image(50, RED)), h0, final) == pytest.approx(1 / 3)
    assert pm.visual_completeness(final, h0, final) == 1.0
    assert pm.visual_completeness(h0, h0, h0) == 1.0  # nothing to complete


def test_speed_index_integral_by_hand() -> None:
    # VC 0 until 100 ms, 0.4 until 300 ms, then 1: 100 * 1 + 200 * 0.6 = 220
    assert pm.speed_index([100.0, 300.0], [0.4, 1.0]) == pytest.approx(220.0)
    assert pm.speed_index([50.0], [1.0], vc0=0.5) == pytest.approx(25.0)
    assert pm.speed_index([], []) == 0.0


def test_visual_metrics_by_hand() -> None:
    frames = [
        pm.Frame(-10.0, image(0, BLACK)),  # about:blank before the navigation
        pm.Frame(50.0, image(50, RED)),  # VC 1/3
        pm.Frame(100.0, image(40, BLACK)),  # VC 0.4
        pm.Frame(300.0, image(100, BLACK)),  # VC 1: the last visual change
        pm.Frame(400.0, image(100, BLACK)),  # same pixels again
    ]
    got = pm.visual_metrics(frames)
    # 50 * 1 + 50 * (2/3) + 200 * 0.6 + 100 * 0 = 203.33
    assert got["speed_index_ms"] == pytest.approx(203.3, abs=0.05)
    assert got["atf_ms"] == 300.0
    assert got["frames"] == 4
    # Without a frame before the navigation the initial state is the blank page.
    assert pm.visual_metrics(frames[1:]) == got
    assert pm.visual_metrics(frames[:1]) == {"speed_index_ms": None, "atf_ms": None, "frames": 0}


def _b64(im: Image.Image) -> str:
    buf = io.BytesIO()
    im.save(buf, "PNG")  # lossless, so the hand-computed values hold exactly
    return base64.b64encode(buf.getvalue()).decode()


def test_screencast_frame_times_from_their_timestamps() -> None:
    sc = pm.Screencast(cdp=None, sid="s")
    origin_ms = 1_700_000_000_000.0
    # arrival order is not frame order; one frame lacks a timestamp (arrival time used)
    for ts, mono, im in (
        (origin_ms / 1000 + 0.3, 10.9, image(100, BLACK)),
        (origin_ms / 1000 - 0.01, 10.0, image(0, BLACK)),
        (None, 10.1 + 0.1, image(40, BLACK)),  # 100 ms after Page.navigate at 10.1
    ):
        sc.raw.append(pm.RawFrame(ts, mono, _b64(im)))
    sc.raw.append(pm.RawFrame(origin_ms / 1000 + 0.2, 11.0, "bm90IGFuIGltYWdl"))  # not an image
    assert sc.digest_one() and sc.raw[0].image is not None
    got = sc.metrics(origin_ms, t_nav_mono=10.1)
    assert got["speed_index_ms"] == pytest.approx(220.0, abs=0.05)  # as in the integral test
    assert got["atf_ms"] == pytest.approx(300.0, abs=0.05)
    assert sc.raw[-1].broken and got["frames"] == 2  # the undecodable frame left out
    assert not sc.digest_one()  # everything decoded or given up on


def test_report_has_the_page_metrics_per_scheme() -> None:
    c = load_campaign(REPO / "experiments" / "fig3.yaml", check_channels=False).quick()
    cond = c.conditions[0]
    rows = []
    for sch in c.schemes:
        for page, plt in (("site0", 1000.0), ("site1", 2000.0)):
            rows.append(
                {
                    "cell": cell_key(cond.name, page, 0, sch.label),
                    "condition": cond.name, "arm": sch.label, "scheme": sch.scheme,
                    "item": page, "page": page, "trial": 0, "valid": True,
                    "plt_ms": plt, "fcp_ms": plt / 4, "lcp_ms": plt / 2,
                    "speed_index_ms": plt / 3, "atf_ms": None,
                }
            )  # fmt: skip
    s = summarize(c, rows)
    t = next(t for t in s.tables if t.title.startswith("Page metrics"))
    assert t.columns[2:7] == ["PLT", "FCP", "LCP", "Speed Index", "ATF"]
    assert len(t.rows) == len(c.schemes)
    # mean over the two pages: PLT 1500, FCP 375, LCP 750, SI 500; no ATF measured
    assert t.rows[0][2].startswith("1500 ") and t.rows[0][3].startswith("375 ")
    assert t.rows[0][4].startswith("750 ") and t.rows[0][5].startswith("500 ")
    assert t.rows[0][6] == "n/a"
    # rows without the metrics (older stores, other workloads): no such table
    for r in rows:
        r.pop("fcp_ms")
    assert not [t for t in summarize(c, rows).tables if t.title.startswith("Page metrics")]


def test_rows_carry_the_metrics_into_the_store(tmp_path: Path) -> None:
    from dchlab.experiments import store
    from dchlab.workloads.measure import ROW_KEYS, RunSpec, new_row

    assert {"fcp_ms", "lcp_ms", "speed_index_ms", "atf_ms"} <= set(ROW_KEYS)
    db = tmp_path / "r.duckdb"
    old = new_row(RunSpec("hbc-only", "embb", "urllc"), "pageload", "site0")  # no metrics
    store.append_rows([dict(old, plt_ms=900.0, valid=True)], campaign="c", store=db)
    row = dict(old, plt_ms=1000.0, fcp_ms=250.0, lcp_ms=400.0, valid=True)
    row.update(speed_index_ms=320.5, atf_ms=None)  # screencast off: NULL
    store.append_rows([row], campaign="c", store=db)
    got = store.load_rows("c", store=db)
    assert [(r["plt_ms"], r["fcp_ms"], r["lcp_ms"], r["speed_index_ms"]) for r in got] == [
        (900.0, None, None, None),
        (1000.0, 250.0, 400.0, 320.5),
    ]
    assert all(r.get("atf_ms") is None for r in got)
