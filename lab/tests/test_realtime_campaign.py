"""The realtime campaign: its file, the workload kind's validation and the `realtime`
analysis on hand-made rows (TEST DATA ONLY) with hand-computed percentiles and the
share of the ideal's gain."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dchlab.experiments.analyses import get_analysis
from dchlab.experiments.analyses.realtime import ideal_share
from dchlab.experiments.campaign import CampaignError, load_campaign

REPO = Path(__file__).resolve().parents[2]


def _campaign(tmp_path: Path, **workload: object) -> Path:
    data = yaml.safe_load((REPO / "experiments" / "realtime.yaml").read_text())
    data["workload"] = {"kind": "realtime", **workload}
    p = tmp_path / "rt.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_the_campaign_file_is_the_issues_grid() -> None:
    c = load_campaign(REPO / "experiments" / "realtime.yaml", check_channels=False)
    assert [s.label for s in c.schemes] == ["all-hbc", "all-llc", "dchannel", "realtime", "ideal"]
    assert [x.name for x in c.conditions] == ["MM-S", "MM-D", "LB-D", "embb40-urllc5"]
    assert all(x.llc == "urllc" for x in c.conditions)
    assert c.workload.apps == ("cloud-gaming", "video-call")
    assert c.workload.duration_s >= 60 and c.trials >= 10
    assert c.workload.kind_of().items(c.workload) == ["cloud-gaming", "video-call"]


def test_bad_workload_fields_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match=r"workload\.apps\[1\].*'chess'"):
        load_campaign(_campaign(tmp_path, apps=["cloud-gaming", "chess"]), check_channels=False)
    with pytest.raises(CampaignError, match=r"workload\.timeout_s.*shorter than a session"):
        load_campaign(_campaign(tmp_path, duration_s=90, timeout_s=60), check_channels=False)
    c = load_campaign(_campaign(tmp_path, apps=["video-call"], fps=15), check_channels=False)
    assert c.workload.apps == ("video-call",) and c.workload.fps == 15
    assert (c.workload.start_mbps, c.workload.max_mbps, c.workload.min_mbps) == (None,) * 3


def test_bitrates_are_campaign_fields_checked_in_order(tmp_path: Path) -> None:
    c = load_campaign(_campaign(tmp_path, start_mbps=10, min_mbps=10), check_channels=False)
    assert (c.workload.start_mbps, c.workload.max_mbps, c.workload.min_mbps) == (10, None, 10)
    with pytest.raises(CampaignError, match=r"workload\.start_mbps.*min_mbps <= start_mbps"):
        load_campaign(_campaign(tmp_path, start_mbps=20, max_mbps=10), check_channels=False)
    with pytest.raises(CampaignError, match=r"workload\.max_mbps"):
        load_campaign(_campaign(tmp_path, max_mbps=-1), check_channels=False)


def test_ideal_share() -> None:
    assert ideal_share(200.0, 150.0, 100.0) == 0.5
    assert ideal_share(200.0, 220.0, 100.0) == -0.2
    assert ideal_share(200.0, 150.0, 200.0) is None  # the ideal gained nothing
    assert ideal_share(None, 150.0, 100.0) is None


def _row(
    arm: str, trial: int, samples: list[float], p95: float, freezes: int, lost: float | None = None
) -> dict:
    return {  # TEST DATA ONLY
        "workload": "realtime", "condition": "MM-S", "arm": arm, "scheme": arm,
        "item": "cloud-gaming", "page": "cloud-gaming", "trial": trial, "valid": True,
        "cell": f"MM-S|cloud-gaming|{trial}|{arm}", "input_to_display_p95_ms": p95,
        "duration_s": 30.0, "freezes": freezes, "fps_delivered": 30.0, "bitrate_mbps": 2.0,
        "bytes_hbc": 900, "bytes_llc": 100, "connection_lost_s": lost,
        "stats": {"realtime": {"samples": {"input_to_display_ms": samples}}},
    }  # fmt: skip


def test_the_analysis_pools_samples_and_compares_with_the_ideal(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "experiments" / "realtime.yaml").read_text())
    data["schemes"] = ["all-hbc", "dchannel", "ideal"]
    data["conditions"] = [data["conditions"][0]]
    data["workload"]["apps"] = ["cloud-gaming"]
    data.pop("quick")
    (tmp_path / "rt.yaml").write_text(yaml.safe_dump(data))
    c = load_campaign(tmp_path / "rt.yaml", check_channels=False)
    rows = [
        _row("all-hbc", 0, [100.0, 120.0], 200.0, 1),
        _row("all-hbc", 1, [140.0, 160.0], 200.0, 0),
        _row("dchannel", 0, [80.0, 90.0], 150.0, 0),
        _row("dchannel", 1, [100.0, 110.0], 150.0, 0, lost=31.0),
        _row("ideal", 0, [50.0, 60.0], 100.0, 0),
        _row("ideal", 1, [70.0, 80.0], 100.0, 0),
    ]
    found = get_analysis("realtime").analyze(c, rows, {})
    t, bound = found.tables  # no real-time policy ran: no target table
    # all-hbc's 200 ms is above 96, and no scheme brings it under (the ideal: 100 ms)
    assert bound.rows == [["MM-S", "200.0 [200.0, 200.0]", "none"]]
    by_arm = {r[1]: r for r in t.rows}
    # all-hbc pooled: 100, 120, 140, 160 -> p50 130 (numpy linear), p95 157
    assert by_arm["all-hbc"][4:7] == ["130.0", "157.0", "159.4"]
    assert by_arm["all-hbc"][2] == "2 (0)"
    # a lost connection is counted, and the session stays in the numbers (valid)
    assert (by_arm["all-hbc"][3], by_arm["dchannel"][3]) == ("0", "1")
    assert by_arm["all-hbc"][8] == "no" and by_arm["ideal"][8] == "no"  # 200 / 100 ms
    assert by_arm["all-hbc"][9] == "1.00"  # 1 freeze in 2 x 30 s
    assert by_arm["dchannel"][11:13] == ["2.00", "—"]  # Mbit/s received; none shown
    assert by_arm["dchannel"][13] == "10.0"  # 100 of 1000 bytes on the LLC
    # pooled p50: all-hbc 130, dchannel 95, ideal 65: (130 - 95) / (130 - 65) = 54%
    assert by_arm["dchannel"][14] == "54%"
    assert by_arm["dchannel"][15] == "50%"  # session p95s: (200 - 150) / (200 - 100)
    assert by_arm["ideal"][14:] == ["—", "—"] and by_arm["all-hbc"][14:] == ["—", "—"]
    assert found.plot["samples"][("cloud-gaming MM-S", "ideal")] == [50.0, 60.0, 70.0, 80.0]


def test_frame_release_is_a_campaign_field(tmp_path: Path) -> None:
    # default: aiortc's rule, so every campaign before the field measured what it did
    assert load_campaign(_campaign(tmp_path), check_channels=False).workload.frame_release == "next"
    c = load_campaign(_campaign(tmp_path, frame_release="marker"), check_channels=False)
    assert c.workload.frame_release == "marker"
    with pytest.raises(CampaignError, match=r"workload\.frame_release.*next, marker.*'last'"):
        load_campaign(_campaign(tmp_path, frame_release="last"), check_channels=False)
