"""Kills at random moments leave nothing behind (dchlab.soak_kills; docs/reliability.md
"Kills"). CI-sized: 4 SIGKILLs of a real campaign and 8 signalled testbeds; the long
version is `python -m dchlab.soak_kills` (20 and 100)."""

from __future__ import annotations

import random

import pytest
from conftest import require_binaries, require_root

from dchlab import soak_kills

pytestmark = pytest.mark.netns


def test_sigkilled_campaign_resumes_with_no_duplicate_and_no_lost_row(tmp_path):
    require_root()
    require_binaries("chanemu", "dchannel", "webreplay")
    got = soak_kills.soak_campaign(4, random.Random(7), tmp_path)
    assert got.kills == 4 and got.rounds >= 1, got
    assert not got.corrupt, got.corrupt
    assert not got.duplicates, got.duplicates
    assert not got.lost, got.lost
    assert got.incomplete_rounds == 0
    assert (got.final_cells, got.final_rows) == (soak_kills.CAMPAIGN_CELLS,) * 2
    assert not got.leftovers, got.leftovers


@pytest.mark.parametrize("seed", [1, 2])
def test_signalled_testbeds_leave_nothing_behind(seed):
    require_root()
    require_binaries("chanemu", "dchannel", "webreplay")
    rng = random.Random(seed)
    runs = [soak_kills.testbed_kill(rng, max_moment_s=4.0) for _ in range(4)]
    for r in runs:
        assert not r.leftovers, r
        if r.owner_survived:  # SIGINT to dch shell, or a child killed: it cleans up alone
            assert not r.cleanup_needed
            assert r.owner_exit is not None and r.owner_exit != 0, r
