"""A real quick campaign through the testbed: rows land in the store, and a second
run skips every finished cell. Needs root, the release binaries and curl."""

from __future__ import annotations

import os
import shutil
import textwrap

import pytest

from dchlab.experiments import store
from dchlab.experiments.campaign import load_campaign
from dchlab.experiments.runner import run_campaign
from dchlab.paths import target_dir

NEEDED = ("chanemu", "dchannel", "webreplay")  # the testbed uses the agent binary for every scheme

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(
        any(not (target_dir() / "release" / b).exists() for b in NEEDED),
        reason=f"needs the release binaries {NEEDED} (`./dch setup`)",
    ),
    pytest.mark.skipif(not shutil.which("curl"), reason="needs curl"),
]

CAMPAIGN = """
name: live-bulk
description: test campaign (a 10 KB download over each single channel)
paper: {source: test, values: {}}
schemes: [all-hbc, all-llc]
conditions:
  - {name: embb40-urllc5, hbc: embb, llc: urllc}
workload: {kind: bulk, sizes: [10KB], timeout_s: 60}
trials: 1
seed: 7
analysis: {kind: bulk, baseline: all-hbc, metric: total_ms}
"""


def test_real_bulk_campaign_stores_rows_and_resumes(tmp_path):
    path = tmp_path / "live.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    c = load_campaign(path)
    db = tmp_path / "live.duckdb"
    s1 = run_campaign(c, store_path=db)
    rows = store.load_rows("live-bulk", store=db)
    assert s1.failed == 0, s1.errors
    assert s1.measured == 2 and len(rows) == 2
    by = {r["arm"]: r for r in rows}
    assert all(r["valid"] for r in rows), [r["invalid_reason"] for r in rows]
    assert all(r["size_bytes"] == 10_000 for r in rows)
    # DNS, TCP, TLS 1.3 and the request each cost at least one 40 ms round trip on the HBC
    assert by["all-hbc"]["total_ms"] >= 4 * 40 * 0.9
    # the same channel pair and seed give the same trace offset to both schemes (paired)
    assert by["all-hbc"]["trace_offset_ms"] == by["all-llc"]["trace_offset_ms"]
    assert by["all-hbc"]["code_rev"] and by["all-hbc"]["kernel_version"]
    s2 = run_campaign(c, store_path=db)
    assert (s2.skipped, s2.measured, s2.failed) == (2, 0, 0)
    assert len(store.load_rows("live-bulk", store=db)) == 2
