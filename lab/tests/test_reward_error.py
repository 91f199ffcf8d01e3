"""Join of decision and arrival logs into the Fig. 11 reward-estimation error
(dchlab.testbed.reward_error) on hand-written CSVs with hand-computed percentiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from dchlab.testbed import reward_error

DEC = "t_ms,peer,flow_id,seq,flow,proto,size,payload,channel,outcome,reward_ms,c_hbc_ms,c_llc_ms,llc_queue_bytes,t_mono_ns\n"
ARR = "t_mono_ns,peer,flow_id,seq,channel,size\n"
T0 = 7_000_000_000  # the sender's epoch on CLOCK_MONOTONIC (ns)
MS = 1_000_000


def dec(
    t_ms: float, flow_id: int, seq: int, ch: str, outcome: str, c_hbc: float, c_llc: float
) -> str:
    t_mono = T0 + int(t_ms * MS)
    return f"{t_ms},0,{flow_id},{seq},f,6,100,40,{ch},{outcome},1.0,{c_hbc},{c_llc},0,{t_mono}\n"


def arr(at_ms: float, flow_id: int, seq: int, ch: str) -> str:
    return f"{T0 + int(at_ms * MS)},0,{flow_id},{seq},{ch},100\n"


def write(tmp: Path) -> dict[str, dict[str, Path]]:
    # Uplink (client decisions, gateway arrivals). Signed errors estimated - realised:
    # +1 (llc 15 vs 14), -2 (hbc 50 vs 52), +3 (llc 25 vs 22), -4 (hbc 60 vs 64),
    # -10 (llc 30 vs 40); seq 6 is not a reward decision; seq 7 never arrived.
    up_dec = DEC + "".join([
        dec(10, 1, 1, "llc", "reward", 30, 15),
        dec(11, 1, 2, "hbc", "reward", 50, 20),
        dec(12, 1, 3, "llc", "reward", 52, 25),
        dec(13, 1, 4, "hbc", "reward", 60, 26),
        dec(14, 1, 5, "llc", "reward", 54, 30),
        dec(15, 1, 6, "hbc", "no_estimate", 0, 0),
        dec(16, 1, 7, "llc", "reward", 56, 31),
    ])  # fmt: skip
    up_arr = ARR + "".join([
        arr(14, 1, 1, "llc"), arr(52, 1, 2, "hbc"), arr(22, 1, 3, "llc"),
        arr(64, 1, 4, "hbc"), arr(40, 1, 5, "llc"), arr(55, 1, 6, "hbc"),
    ])  # fmt: skip
    # Downlink: one match (-0.5 ms); (3, 9) appears twice in the arrival log
    # (flow-id wrap): ambiguous, counted missing.
    dn_dec = DEC + dec(5, 2, 1, "llc", "reward", 45, 12) + dec(6, 3, 9, "llc", "reward", 46, 13)
    dn_arr = ARR + arr(12.5, 2, 1, "llc") + arr(13, 3, 9, "llc") + arr(90, 3, 9, "llc")
    files = {
        "client": {"decisions": up_dec, "arrivals": dn_arr},
        "gateway": {"decisions": dn_dec, "arrivals": up_arr},
    }
    out: dict[str, dict[str, Path]] = {}
    for role, kinds in files.items():
        out[role] = {}
        for kind, text in kinds.items():
            p = tmp / f"{role}.{kind}.csv"
            p.write_text(text)
            out[role][kind] = p
    return out


def test_join_and_percentiles(tmp_path: Path) -> None:
    s = reward_error.collect(write(tmp_path))
    up = s["uplink"]
    # |errors| sorted 1,2,3,4,10: p50 = 3; p90 at rank 0.9*4 = 3.6 -> 4 + 0.6*(10-4) = 7.6;
    # p99 at rank 3.96 -> 4 + 0.96*6 = 9.76; mean signed (1-2+3-4-10)/5 = -2.4.
    assert up["samples"] == 5 and up["missing"] == 1
    assert up["p50"] == pytest.approx(3.0)
    assert up["p90"] == pytest.approx(7.6)
    assert up["p99"] == pytest.approx(9.76)
    assert up["mean_signed"] == pytest.approx(-2.4)
    assert sorted(up["abs_ms"]) == pytest.approx([1, 2, 3, 4, 10])
    dn = s["downlink"]
    assert dn["samples"] == 1 and dn["missing"] == 1
    assert dn["p50"] == pytest.approx(0.5) and dn["mean_signed"] == pytest.approx(-0.5)
    assert s["samples"] == 6


def test_no_reward_decisions_gives_empty_summary(tmp_path: Path) -> None:
    logs = write(tmp_path)
    for role in ("client", "gateway"):
        logs[role]["decisions"].write_text(DEC + dec(1, 1, 1, "hbc", "fixed", 0, 0))
    s = reward_error.collect(logs)
    assert s["samples"] == 0
    assert s["uplink"] == {"samples": 0, "missing": 0, "abs_ms": []}
