"""One size parser for the command line and campaign files (dchlab.units)."""

from __future__ import annotations

import argparse

import pytest

from dchlab.experiments.campaign import CampaignError
from dchlab.experiments.campaign import parse_size as campaign_size
from dchlab.units import format_size, parse_size
from dchlab.workloads.cli_common import parse_size as cli_size

SIZES = {
    "500": 500,
    "10KB": 10_000,
    "10k": 10_000,
    "1.5MB": 1_500_000,
    " 2 gb ": 2 * 10**9,
    "1KiB": 1024,
    "1MiB": 1 << 20,
    "1mib": 1 << 20,
    "1GiB": 1 << 30,
    "7B": 7,
}
BAD = ["", "10 parsecs", "1TB", "-5", "1e3", "0", "0.4", "KB", "1MiBB", "1 0KB"]


@pytest.mark.parametrize(("text", "n"), SIZES.items())
def test_cli_and_campaign_read_sizes_alike(text: str, n: int) -> None:
    assert parse_size(text) == n
    assert cli_size(text) == n
    assert campaign_size(text, "workload.sizes[0]") == n


@pytest.mark.parametrize("text", BAD)
def test_bad_sizes_are_refused_by_both(text: str) -> None:
    with pytest.raises(ValueError, match="bad size"):
        parse_size(text)
    with pytest.raises(argparse.ArgumentTypeError, match="bad size"):
        cli_size(text)
    with pytest.raises(CampaignError, match=r"^f\.yaml: workload\.sizes\[2\]: bad size"):
        campaign_size(text, "f.yaml: workload.sizes[2]")


def test_integers_and_other_types() -> None:
    assert parse_size(123) == 123
    for bad in (0, -1, True, 1.5, None, ["1KB"]):
        with pytest.raises(ValueError, match="bad size"):
            parse_size(bad)  # type: ignore[arg-type]


def test_unknown_unit_is_named() -> None:
    with pytest.raises(ValueError, match="unknown unit 'TB'"):
        parse_size("1TB")


def test_format_size_reads_back() -> None:
    for n in (1, 999, 1000, 1500, 10_000, 1_000_000, 3 * 10**9, 1 << 20):
        assert parse_size(format_size(n)) == n
    assert format_size(10_000) == "10KB" and format_size(1500) == "1500B"
