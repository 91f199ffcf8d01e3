"""dchlab — the dchannel lab: testbed, traces, workloads, campaigns, reports."""

from pathlib import Path

__version__ = "0.1.0"

#: Repository root (the directory holding ./dch and Cargo.toml).
REPO_ROOT = Path(__file__).resolve().parents[2]
