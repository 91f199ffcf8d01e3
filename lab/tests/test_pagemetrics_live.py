"""Page metrics on real Chromium loads through the testbed (built-in synthetic corpus).

One generated page, loaded five times over a fixed 10 ms HBC and five times over a
fixed 80 ms one (hbc-only: plain routing, nothing but the RTT differs), with the
screencast on (DCH_SPEED_INDEX=1), and once more with the default (off: FCP and LCP,
no Speed Index or atf_ms):

- every load is valid and FCP <= LCP <= PLT; Speed Index and atf_ms are measured and
  agree with the paint times across the two clocks (frame timestamps against
  performance.timeOrigin): SI <= ATF, and the last visual change is not before the
  first contentful paint;
- stable: over the five loads of the same page and RTT, the median absolute deviation
  of FCP, LCP, Speed Index and atf_ms (and of the PLT) is at most 50% of their median.
  A robust spread, since single loads stray far on this machine: at load average
  14–20, the browser at nice 19 beside a campaign, one page's FCP at 10 ms RTT ranged
  464–952 ms in one run and 668–2288 ms in another (PLT 1677–2773 ms), while the
  median absolute deviation stayed at 15–33% of the median (docs/benchmarks.md,
  "Page metrics");
- FCP, LCP, Speed Index and PLT rise with the RTT: the 80 ms medians exceed the 10 ms
  ones by at least 3 × 70 ms (DNS, TCP and TLS each cross the channel before the first
  byte of the document, let alone its first paint). Medians, not single loads: one
  load of a starved browser can take a second longer than its neighbours.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from conftest import require_binaries, require_root

METRICS = ("fcp_ms", "lcp_ms", "speed_index_ms", "plt_ms")
LOADS = 5


def _loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dict[str, Any]]]:
    require_root()
    require_binaries("chanemu", "webreplay")
    if not Path("/usr/lib/chromium/chromium").exists():
        pytest.skip("chromium not installed")
    # No testbed prepared ahead: nothing of this test outlives it.
    monkeypatch.setenv("DCH_PREPARE_AHEAD", "0")
    monkeypatch.setenv("DCH_SPEED_INDEX", "1")  # the screencast is opt-in
    from dchlab.pages.generator import generate
    from dchlab.workloads.api import RunSpec, load_one

    corpus = generate(tmp_path / "syn", seed=5, pages=1)
    page = corpus.pages[0].name
    out: dict[str, list[dict[str, Any]]] = {}
    for rtt in ("10", "80"):
        out[rtt] = [
            load_one(RunSpec("hbc-only", f"fixed:{rtt}ms/100mbit", "urllc", trial=t), corpus, page)
            for t in range(LOADS)
        ]
    # By default no screencast: FCP and LCP only.
    monkeypatch.delenv("DCH_SPEED_INDEX")
    spec = RunSpec("hbc-only", "fixed:10ms/100mbit", "urllc", trial=LOADS)
    out["default"] = [load_one(spec, corpus, page)]
    return out


@pytest.mark.netns
@pytest.mark.chromium
def test_paint_and_visual_metrics_order_stability_and_rtt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _loads(tmp_path, monkeypatch)
    (r,) = rows.pop("default")
    assert r["valid"], r["invalid_reason"]
    assert 0 < r["fcp_ms"] <= r["lcp_ms"] <= r["plt_ms"], r
    assert r["speed_index_ms"] is None and r["atf_ms"] is None
    assert r["stats"]["browser"]["screencast_frames"] == 0
    for rtt, loads in rows.items():
        for r in loads:
            shown = {k: r[k] for k in (*METRICS, "atf_ms", "invalid_reason")}
            assert r["valid"], shown
            assert all(r[k] is not None for k in (*METRICS, "atf_ms")), shown
            assert 0 < r["fcp_ms"] <= r["lcp_ms"] <= r["plt_ms"], shown
            assert r["stats"]["browser"]["screencast_frames"] >= 1, shown
            assert r["speed_index_ms"] <= r["atf_ms"] + 0.1, shown
            assert r["atf_ms"] >= r["fcp_ms"] - 50, shown  # two clocks, a few ms apart
        for k in (*METRICS, "atf_ms"):
            vals = [r[k] for r in loads]
            med = statistics.median(vals)
            mad = statistics.median(abs(v - med) for v in vals)
            assert mad <= 0.5 * med, (rtt, k, vals)
    for k in METRICS:
        fast = [r[k] for r in rows["10"]]
        slow = [r[k] for r in rows["80"]]
        assert statistics.median(slow) - statistics.median(fast) >= 3 * 70, (k, fast, slow)
