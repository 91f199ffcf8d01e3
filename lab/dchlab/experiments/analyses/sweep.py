"""Analysis kind `sweep`: the paired gains of `gain`, over conditions that vary one
network parameter (`x: {sweep: NAME, value: V}` on each condition).

The tables are those of `gain` (analyses.paired); the report plots each scheme's gain
as a line over the swept value, the paper's values as crosses.
"""

from __future__ import annotations

from dchlab.experiments.analyses import register
from dchlab.experiments.analyses.paired import PairedGain


@register("sweep", help="paired PLT gains over conditions that sweep one network parameter")
class Sweep(PairedGain):
    """The paired-gain tables; only the plot (a line over the swept value) differs."""
