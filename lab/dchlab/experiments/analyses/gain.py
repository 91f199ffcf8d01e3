"""Analysis kind `gain`: each scheme's page load time gain against the baseline.

Per condition and scheme, the gain paired per (page, trial) and averaged over pages,
in % and ms with 95% bootstrap CIs over pages, beside the paper's; the LLC's share of
the bytes; the share of the `ideal` scheme's gain; and the tables the campaign asks
for after it (analyses.paired). Plotted as bars per condition.
"""

from __future__ import annotations

from dchlab.experiments.analyses import register
from dchlab.experiments.analyses.paired import PairedGain


@register("gain", help="paired PLT gain of each scheme against the baseline, beside the paper's")
class Gain(PairedGain):
    """The paired-gain table and its optional tables, nothing more."""
