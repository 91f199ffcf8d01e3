"""Bad input everywhere (issue 16.5): every parser of the lab, fed garbage, truncated
and mutated versions of valid input and huge input, either accepts it or raises its
one documented error naming the file or field — never another exception (a
traceback for the user), never a half-written output file.

Parsers: byte sizes, built-in channel specs, fault specs (CLI values), RTT
timelines, capacity series, Mahimahi traces, ping output, throughput CSVs, profile
TOML, campaign files, corpus manifests. The wire format's parsers have their own
(Rust proptest: crates/dchannel-core/tests/parser_never_panics.rs,
crates/dchannel-crypto/tests/open_never_panics.rs).

Examples per parser: 150 by default (CI); `DCH_PROPERTY_EXAMPLES=5000` for a soak.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dchlab.errors import UserError
from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.pages.corpus import CorpusError
from dchlab.pages.corpus import load as load_corpus
from dchlab.traces.builtin import parse_builtin
from dchlab.traces.capacity import read_capacity
from dchlab.traces.errors import TraceFormatError
from dchlab.traces.faults import parse_burst, parse_outage
from dchlab.traces.mahimahi import read_mahimahi
from dchlab.traces.ping import parse_ping
from dchlab.traces.profile_toml import load_profile
from dchlab.traces.throughput_csv import import_throughput_csv
from dchlab.traces.timeline import read_rtt
from dchlab.units import parse_size

EXAMPLES = int(os.environ.get("DCH_PROPERTY_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a loaded 2-core machine: no per-example time limit
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,  # nothing written into the checkout
)

# Valid inputs, each cut and mutated below.
VALID_RTT = "t_ms,rtt_ms\n0,20\n15,22.5\n30,40\n"
VALID_CAP = "t_s,up_mbit,down_mbit\n0,10,200\n1,12,180.5\n2,9,220\n"
VALID_MAHIMAHI = "1\n1\n2\n5\n5\n9\n12\n"
VALID_PING = (
    "PING 198.18.1.1 (198.18.1.1) 56(84) bytes of data.\n"
    "[1700000000.100000] 64 bytes from 198.18.1.1: icmp_seq=1 ttl=64 time=20.1 ms\n"
    "[1700000000.300000] 64 bytes from 198.18.1.1: icmp_seq=2 ttl=64 time=22.4 ms\n"
    "--- 198.18.1.1 ping statistics ---\n"
    "2 packets transmitted, 2 received, 0% packet loss, time 200ms\n"
)
VALID_CSV = (
    "Timestamp,NetworkMode,DL_bitrate,UL_bitrate\n"
    "2020.01.01_10.00.00,5G,200000,10000\n"
    "2020.01.01_10.00.01,5G,180000,12000\n"
    "2020.01.01_10.00.02,5G,220000,9000\n"
)
VALID_PROFILE = """name = "p"
[downlink]
[downlink.delay]
kind = "fixed"
ms = 20
[downlink.rate]
kind = "constant"
mbit = 100
[uplink]
[uplink.delay]
kind = "fixed"
ms = 20
[uplink.rate]
kind = "constant"
mbit = 10
"""
VALID_CAMPAIGN = {
    "name": "prop",
    "description": "property test",
    "paper": {"source": "none", "metric": "plt_ms", "values": {}},
    "schemes": ["all-hbc", "dchannel", {"label": "d2", "scheme": "dchannel"}],
    "conditions": [{"name": "c", "hbc": "fixed:20ms/100mbit", "llc": "urllc"}],
    "workload": {"kind": "bulk", "sizes": ["10KB", "1MB"]},
    "trials": 2,
    "seed": 1,
    "analysis": {"kind": "gain", "baseline": "all-hbc"},
}


def _mutations(valid: str) -> st.SearchStrategy[str]:
    """Truncations, random character edits and insertions of `valid`, and free text."""
    n = len(valid)
    cut = st.integers(0, n).map(lambda i: valid[:i])
    edit = st.lists(
        st.tuples(st.integers(0, max(0, n - 1)), st.characters(codec="utf-8")),
        min_size=1,
        max_size=8,
    ).map(lambda eds: _apply(valid, eds))
    insert = st.tuples(st.integers(0, n), st.text(max_size=40)).map(
        lambda t: valid[: t[0]] + t[1] + valid[t[0] :]
    )
    return st.one_of(cut, edit, insert, st.text(max_size=200))


def _apply(valid: str, edits: list[tuple[int, str]]) -> str:
    chars = list(valid)
    for i, c in edits:
        if chars:
            chars[min(i, len(chars) - 1)] = c
    return "".join(chars)


def _file_case(
    name: str, text: str | bytes, read: Callable[[Path], Any], error: type[Exception]
) -> None:
    """Write `text` to a file called `name` and read it: success, or `error` naming
    the file; nothing else."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            read(path)
        except error as e:
            assert name in str(e), f"the error does not name the file: {e}"


# ---------------------------------------------------------------- CLI values


@SETTINGS
@given(st.one_of(_mutations("1.5MiB"), _mutations("10KB"), st.text(max_size=30)))
def test_sizes(text: str) -> None:
    try:
        n = parse_size(text)
    except ValueError as e:
        assert ("bad size" in str(e) and "expected" in str(e)) or "at least 1 byte" in str(e)
    else:
        assert isinstance(n, int) and n >= 1


@SETTINGS
@given(st.one_of(_mutations("fixed:40ms/200mbit"), _mutations("fixed:5ms/unlimited")))
def test_builtin_channel_specs(text: str) -> None:
    try:
        parse_builtin(text)
    except ValueError as e:
        assert "built-in channel" in str(e) and "expected" in str(e), e


@SETTINGS
@given(st.one_of(_mutations("2s-4s:down"), _mutations("500ms-1.5s:0.3:up")))
def test_fault_specs(text: str) -> None:
    for parse in (parse_outage, parse_burst):
        try:
            f = parse(text)
        except ValueError as e:
            assert (repr(text) in str(e) and "expected" in str(e)) or "must" in str(e), e
        else:
            assert f.to_ms > f.from_ms


# ---------------------------------------------------------------- trace, profile and campaign files


# Every file parser: (file name, a valid input, the reader, the one error it may raise).
FILE_PARSERS = [
    ("x.rtt.csv", VALID_RTT, read_rtt, TraceFormatError),
    ("x.cap.csv", VALID_CAP, read_capacity, TraceFormatError),
    ("x.mahi", VALID_MAHIMAHI, read_mahimahi, TraceFormatError),
    ("ping.txt", VALID_PING, parse_ping, TraceFormatError),
    ("tput.csv", VALID_CSV, import_throughput_csv, TraceFormatError),
    ("profile.toml", VALID_PROFILE, load_profile, TraceFormatError),
    ("campaign.yaml", yaml.safe_dump(VALID_CAMPAIGN), load_campaign, CampaignError),
]


@pytest.mark.parametrize(
    ("name", "valid", "read", "error"), FILE_PARSERS, ids=[p[0] for p in FILE_PARSERS]
)
@SETTINGS
@given(data=st.data())
def test_mutated_files(
    name: str,
    valid: str,
    read: Callable[[Path], Any],
    error: type[Exception],
    data: st.DataObject,
) -> None:
    """RTT timelines, capacity series, Mahimahi traces, ping output, throughput CSVs,
    profile TOML and campaign files, each mutated: read, or `error` naming the file."""
    _file_case(name, data.draw(_mutations(valid)), read, error)


@SETTINGS
@given(st.binary(max_size=300))
def test_trace_files_that_are_not_text(data: bytes) -> None:
    for name, read in (("b.rtt.csv", read_rtt), ("b.cap.csv", read_capacity),
                       ("b.mahi", read_mahimahi), ("b.toml", load_profile)):  # fmt: skip
        _file_case(name, data, read, TraceFormatError)


# ---------------------------------------------------------------- campaign files


def _campaign_values() -> st.SearchStrategy[Any]:
    """YAML-able values of any shape, to put where a campaign expects something else."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True), st.text(max_size=20),
    )  # fmt: skip
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += _paths(v, (*prefix, i))
    return out


CAMPAIGN_PATHS = [p for p in _paths(VALID_CAMPAIGN) if p]


@SETTINGS
@given(st.sampled_from(CAMPAIGN_PATHS), _campaign_values(), st.booleans())
def test_campaign_files(where: tuple[Any, ...], value: Any, delete: bool) -> None:
    """A valid campaign with one field replaced by anything (or deleted)."""
    data = json.loads(json.dumps(VALID_CAMPAIGN))
    node = data
    for k in where[:-1]:
        node = node[k]
    if delete and isinstance(node, dict):
        del node[where[-1]]
    else:
        node[where[-1]] = value
    text = yaml.safe_dump(data, allow_unicode=True)
    _file_case("campaign.yaml", text, load_campaign, CampaignError)


# ---------------------------------------------------------------- corpus manifests


def _corpus_dir(d: Path, manifest: str | bytes) -> Path:
    root = d / "corpus"
    (root / "bodies").mkdir(parents=True)
    if isinstance(manifest, bytes):
        (root / "manifest.json").write_bytes(manifest)
    else:
        (root / "manifest.json").write_text(manifest, errors="surrogatepass")
    return root


VALID_MANIFEST = json.dumps(
    {
        "format": "dchannel-corpus/1",
        "origins": [{"host": "a.example", "scheme": "https"}],
        "pages": [{"name": "a", "entry_url": "https://a.example/", "objects": 1}],
        "objects": [
            {"url": "https://a.example/", "status": 200, "headers": [["content-type", "text/html"]],
             "body": None, "size": 0},
        ],
    }
)  # fmt: skip


@SETTINGS
@given(_mutations(VALID_MANIFEST))
def test_corpus_manifests(text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _corpus_dir(Path(d), text)
        try:
            load_corpus(root)
        except CorpusError as e:
            assert "manifest.json" in str(e) or str(root) in str(e), e


# ---------------------------------------------------------------- huge inputs


@pytest.mark.parametrize(
    ("name", "read", "error"),
    [(name, read, error) for name, _, read, error in FILE_PARSERS],
)
def test_huge_garbage_files(name: str, read: Callable[[Path], Any], error: type[Exception]) -> None:
    """16 MB of one long garbage line, and of many lines: a clear error, no hang."""
    for text in ("x" * (16 << 20), "1,2,x\n" * (16 << 20 // 6)):
        _file_case(name, text, read, error)


def test_every_documented_error_is_a_user_error() -> None:
    """What the parsers raise is what `dch` prints as "error: ..." (exit 2), not a traceback."""
    for e in (TraceFormatError, CampaignError, CorpusError):
        assert issubclass(e, UserError)
