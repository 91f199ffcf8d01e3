"""Plot of a CellReplay trace directory (`dch traces plot DIR`): per direction the base
delay over time, the heavy PDO rate per second beside each light train's PDO rate,
and the packet-size latency offsets (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from dchlab.traces.cellreplay import PDO_BYTES, SIDES, load_side, offset_ms, side_files
from dchlab.traces.cellreplay_stats import light_rates

COLORS = {"up": "tab:orange", "down": "tab:green"}


def plot_cellreplay(directory: Path, out: Path, seconds: float | None = None) -> None:
    """Three panels: base delay (ms), rate (Mbit/s), size offset (ms) by packet size."""
    fig, (ax_d, ax_r, ax_o) = plt.subplots(3, 1, figsize=(10, 8.4))
    for side in SIDES:
        if not side_files(directory, side)[0].exists():
            continue
        s = load_side(directory, side)
        c = COLORS[side]
        t = s.light.time_ms / 1000
        keep = t <= seconds if seconds else np.ones(len(t), bool)
        ax_d.plot(t[keep], s.light.base_delay_ms[keep], lw=0.6, color=c, label=f"{side} base")
        # heavy: PDOs per second × 1400 B
        secs = int(np.ceil(s.heavy_period_ms / 1000))
        counts = np.bincount(s.heavy_ms // 1000, minlength=secs)[:secs]
        heavy = counts * PDO_BYTES * 8 / 1e6
        x = np.arange(secs, dtype=float)
        hk = x <= seconds if seconds else slice(None)
        ax_r.step(x[hk], heavy[hk], where="post", lw=0.8, color=c, label=f"{side} heavy")
        lt, lr = light_rates(s.light)
        lk = lt / 1000 <= seconds if seconds else np.ones(len(lt), bool)
        if len(lt):
            ax_r.scatter(
                lt[lk] / 1000, lr[lk], s=4, color=c, alpha=0.5, label=f"{side} light train"
            )
        if s.offsets_ms is not None:
            sizes = np.arange(0, 1501, 50)
            ax_o.plot(sizes, [offset_ms(s.offsets_ms, int(z)) for z in sizes], color=c, label=side)
    ax_d.set_ylabel("base delay (ms, one-way)")
    ax_d.set_xlabel("time (s)")
    ax_r.set_ylabel("PDO rate (Mbit/s)")
    ax_r.set_xlabel("time (s)")
    ax_o.set_ylabel("size offset (ms)")
    ax_o.set_xlabel("packet size (bytes)")
    for ax in (ax_d, ax_r, ax_o):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"CellReplay {directory.name}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
