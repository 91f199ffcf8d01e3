"""The six 5G scenarios of the paper's Table 1 and the presets that go with them.

Numbers are copied from the paper's Table 1 (RTT in ms, rates in Mbit/s, span in
minutes). The mmWave uplink is a fixed 60 Mbit/s in the paper; the other rates
are means of per-second series.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    span_min: float
    rtt_min: float
    rtt_p50: float
    rtt_p98: float
    rtt_mean: float
    rtt_cv: float
    up_mbit: float
    down_mbit: float
    band: str  # "mmwave" | "lowband": picks the DRX preset
    mobility: str  # "stationary" | "walking" | "driving": picks the time structure
    fixed_uplink: bool  # uplink is a constant rate (mmWave) rather than a series


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "MM-S",
            "5G mmWave stationary",
            60,
            18,
            22,
            106,
            29.88,
            0.77,
            60,
            140,
            "mmwave",
            "stationary",
            True,
        ),
        Scenario(
            "MM-W",
            "5G mmWave walking",
            56,
            16,
            22,
            120,
            30.32,
            0.98,
            60,
            110,
            "mmwave",
            "walking",
            True,
        ),
        Scenario(
            "MM-D",
            "5G mmWave driving",
            18,
            18,
            40,
            236,
            56.15,
            0.96,
            60,
            100,
            "mmwave",
            "driving",
            True,
        ),
        Scenario(
            "LB-S",
            "5G low-band stationary",
            60,
            34,
            40,
            132,
            45.20,
            0.50,
            26,
            93,
            "lowband",
            "stationary",
            False,
        ),
        Scenario(
            "LB-W",
            "5G low-band walking",
            53,
            32,
            52,
            156,
            58.94,
            0.50,
            21,
            63,
            "lowband",
            "walking",
            False,
        ),
        Scenario(
            "LB-D",
            "5G low-band driving",
            23,
            34,
            54,
            202,
            68.84,
            0.62,
            15,
            57,
            "lowband",
            "driving",
            False,
        ),
    )
}

#: Radio sleep presets (downlink only): inactivity timer and wake period, ms.
DRX_PRESETS: dict[str, dict[str, int]] = {
    "mmwave": {"inactivity_ms": 30, "wake_period_ms": 40},
    "lowband": {"inactivity_ms": 100, "wake_period_ms": 20},
}

#: Drop-tail queue the paper used on the 5G links, in packets.
QUEUE_PACKETS = 800

#: RTT sample spacing of synthesized timelines.
RTT_STEP_MS = 15


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
