"""`dch traces` end to end (in-process): synth, stats, plot, import, errors; and the
time-structure check against the real driving RTT runs when ../shared/data exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dchlab import cli
from dchlab.paths import shared_data


def _dch(*argv: str) -> int:
    return cli.main(list(argv))  # the real entry: bad input becomes exit 2 there


def test_synth_stats_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lbd"
    assert _dch("traces", "synth", "LB-D", "--seed", "5", "-o", str(out)) == 0
    assert {p.name for p in out.iterdir()} >= {
        "LB-D.rtt.csv",
        "LB-D.cap.csv",
        "profile.toml",
        "source.json",
    }
    capsys.readouterr()
    assert (
        _dch("traces", "stats", "--json", str(out / "profile.toml"), str(out / "LB-D.rtt.csv")) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    prof, rtt = rows
    assert prof["span_min"] == pytest.approx(23.0) and rtt["span_min"] == pytest.approx(23.0)
    for key, want in {
        "rtt_min": 34,
        "rtt_p50": 54,
        "rtt_p98": 202,
        "rtt_mean": 68.84,
        "rtt_cv": 0.62,
    }.items():
        assert rtt[key] == pytest.approx(want, rel=0.05), key
        assert prof[key] == pytest.approx(want, rel=0.05), key
    assert prof["up_mbit"] == pytest.approx(15, rel=0.05)
    assert prof["down_mbit"] == pytest.approx(57, rel=0.05)
    png = tmp_path / "lbd.png"
    assert _dch("traces", "plot", str(out / "profile.toml"), "-o", str(png), "--seconds", "60") == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_list_names_every_channel(capsys: pytest.CaptureFixture[str]) -> None:
    from dchlab.traces.profiles import known_channels

    assert _dch("traces", "list") == 0
    out = capsys.readouterr().out
    for name in known_channels():
        assert name in out
    assert "LB-D    23       34   54  202  68.84  0.62      15/57       100/20" in out


def test_import_roundtrip_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "x.cap.csv"
    cap.write_text("t_s,up_mbit,down_mbit\n0,1.2,12\n1,0,24\n")
    assert (
        _dch(
            "traces",
            "import",
            "mahimahi",
            "write",
            "--capacity",
            str(cap),
            "-o",
            str(tmp_path / "x"),
        )
        == 0
    )
    assert len((tmp_path / "x.down").read_text().split()) == 3000  # 12 + 24 Mbit = 3000 packets
    # 1.2 Mbit in second 0 = 100 packets, plus one at 2000 ms pinning the loop period.
    assert (tmp_path / "x.up").read_text().split()[-2:] == ["1000", "2000"]
    back = tmp_path / "y.cap.csv"
    assert (
        _dch(
            "traces",
            "import",
            "mahimahi",
            "read",
            "--down",
            str(tmp_path / "x.down"),
            "--up",
            str(tmp_path / "x.up"),
            "-o",
            str(back),
        )
        == 0
    )
    assert back.read_text().splitlines()[1:] == ["0,1.200,12.000", "1,0.012,24.000"]
    bad = tmp_path / "bad.out"
    bad.write_text(
        "PING a (a) 56(84) bytes of data.\n64 bytes from a: icmp_seq=1 ttl=64 time=oops ms\n"
    )
    capsys.readouterr()
    assert _dch("traces", "import", "ping", str(bad), "-o", str(tmp_path / "b.rtt.csv")) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: field 'time'" in err
    assert not (tmp_path / "b.rtt.csv").exists()


DATA = shared_data()


@pytest.mark.shared_data
@pytest.mark.skipif(
    DATA is None or not (DATA / "traces/imc23-driving-rtt").is_dir(), reason="../shared/data absent"
)
def test_time_structure_matches_real_driving_rtt() -> None:
    """The fitted model vs the IMC'23 runs at their 200 ms spacing (docs/traces.md):
    ACF at 0.2-1 s and excursions above p90 close to the real ones, and far closer
    than i.i.d. samples with the same marginal."""
    from dchlab.traces.fit import fit_report

    assert DATA is not None
    r = fit_report(DATA / "traces/imc23-driving-rtt")
    real, model, iid = r["real"], r["model"], r["iid_baseline"]
    assert isinstance(real, dict) and isinstance(model, dict) and isinstance(iid, dict)
    assert r["runs"] == 109 and real["excursions"] == 837
    assert real["excursion_mean"] == pytest.approx(1.2712, abs=1e-4)
    real_acf = sum(real["acf"].values()) / 5
    model_acf = sum(model["acf"].values()) / 5
    assert real_acf == pytest.approx(0.1855, abs=1e-3)
    assert abs(model_acf - real_acf) < 0.05
    assert model["excursion_mean"] == pytest.approx(real["excursion_mean"], rel=0.1)
    assert model["distance"] < iid["distance"] / 4
    assert model["burst_ms_at_15ms"] >= 100


@pytest.mark.shared_data
@pytest.mark.skipif(
    DATA is None or not (DATA / "traces/raca-5g").is_dir(), reason="../shared/data absent"
)
def test_capacity_model_matches_real_5g_throughput() -> None:
    """Per-second capacity vs Raca et al. 5G downlink throughput (docs/traces.md)."""
    from dchlab.traces.fit import capacity_report

    assert DATA is not None
    r = capacity_report(DATA / "traces/raca-5g")
    for folder, model_key, real_cv, real_acf1 in (
        ("Static", "model_LB-S", 0.9934, 0.7940),
        ("Driving", "model_LB-D", 1.1992, 0.7595),
    ):
        entry = r[folder]
        assert isinstance(entry, dict)
        real, model = entry["real"], entry[model_key]
        assert real["cv"] == pytest.approx(real_cv, abs=1e-3)
        assert real["log_acf"][1] == pytest.approx(real_acf1, abs=1e-3)
        assert model["cv"] == pytest.approx(real["cv"], rel=0.15)
        for lag in (1, 2, 5, 10, 30):
            assert abs(model["log_acf"][lag] - real["log_acf"][lag]) < 0.1, (folder, lag)
