"""Plots of traces: RTT (ms) and capacity (Mbit/s) over time (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from dchlab.traces.capacity import CapacitySeries, read_capacity
from dchlab.traces.mahimahi import opportunities_to_rate, read_mahimahi
from dchlab.traces.stats import sniff
from dchlab.traces.timeline import RttTimeline, read_rtt


def load_for_plot(
    path: Path, seed: int = 1
) -> tuple[RttTimeline | None, CapacitySeries | None, str]:
    kind = sniff(path)
    if kind == "rtt":
        return read_rtt(path), None, path.name
    if kind == "cap":
        return None, read_capacity(path), path.name
    if kind == "mahimahi":
        down = opportunities_to_rate(read_mahimahi(path))
        return None, CapacitySeries(np.full(len(down), np.nan), down), path.name
    if kind == "ping":
        from dchlab.traces.ping import parse_ping

        return parse_ping(path).timeline, None, path.name
    from dchlab.traces.profile_toml import load_profile

    p = load_profile(path)
    base = path.parent
    rtt = read_rtt(base / p["delay"]["file"]) if p["delay"]["kind"] == "timeline" else None
    cols: dict[str, np.ndarray] = {}
    n = 0
    for side, short in (("uplink", "up"), ("downlink", "down")):
        r = p[side]["rate"]
        if isinstance(r, dict) and "series" in r:
            cols[short] = read_capacity(base / r["series"]).column(r["column"])
        elif isinstance(r, dict) and "mahimahi" in r:
            cols[short] = opportunities_to_rate(read_mahimahi(base / r["mahimahi"]))
        n = max([n, *[len(c) for c in cols.values()]])
    if n == 0:
        n = int(rtt.period_ms // 1000) if rtt is not None else 1
    for side, short in (("uplink", "up"), ("downlink", "down")):
        r = p[side]["rate"]
        if short not in cols:
            cols[short] = np.full(
                n, float(r["mbit"]) if isinstance(r, dict) and "mbit" in r else np.nan
            )
    cap = CapacitySeries(cols["up"], cols["down"])
    return rtt, cap, str(p["name"])


def plot_file(path: Path, out: Path, seconds: float | None = None, seed: int = 1) -> None:
    rtt, cap, title = load_for_plot(path, seed)
    panels = [x for x in (rtt, cap) if x is not None]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(10, 2.8 * len(panels)), sharex=True, squeeze=False
    )
    i = 0
    if rtt is not None:
        t = rtt.t_ms / 1000
        keep = t <= seconds if seconds else slice(None)
        ax = axes[i][0]
        ax.plot(t[keep], rtt.rtt_ms[keep], lw=0.5, color="tab:blue")
        ax.set_ylabel("RTT (ms)")
        ax.grid(alpha=0.3)
        i += 1
    if cap is not None:
        t = np.arange(len(cap), dtype=float)
        keep = t <= seconds if seconds else slice(None)
        ax = axes[i][0]
        ax.step(t[keep], cap.down_mbit[keep], where="post", lw=0.8, label="down", color="tab:green")
        if not np.all(np.isnan(cap.up_mbit)):
            ax.step(
                t[keep], cap.up_mbit[keep], where="post", lw=0.8, label="up", color="tab:orange"
            )
        ax.set_ylabel("capacity (Mbit/s)")
        ax.legend(loc="upper right")
        ax.grid(alpha=0.3)
    axes[-1][0].set_xlabel("time (s)")
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
