"""The typed row: its keys are the contract they were, one function makes a row, and the
store's columns come from the types — and every published Parquet file still reads
into them with the same column types."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import duckdb
import pytest

from dchlab.experiments import publish, store
from dchlab.run_config import RunConfig
from dchlab.workloads.rows import (
    APP_KEYS,
    ROW_KEYS,
    SESSION_KEYS,
    Outcome,
    column_types,
    config_columns,
    make_row,
    sql_type,
)

PUBLISHED = Path(__file__).resolve().parents[2] / "results" / "published"

# The row keys as they were written out by hand before they came from the types: the
# contract of `--json` output, the store and results/published.
OLD_ROW_KEYS = [
    "workload", "scheme", "hbc", "llc", "cc", "seed", "trial", "trace_offset_ms", "page",
    "plt_ms", "fcp_ms", "lcp_ms", "speed_index_ms", "atf_ms", "valid", "invalid_reason",
    "resources_loaded", "resources_failed", "resources_failed_unexpected", "missing_expected",
    "dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "transfer_ms", "total_ms", "size_bytes",
    "bytes_hbc", "bytes_llc", "pkts_hbc", "pkts_llc", "host_cpu_busy", "host_cpu_steal",
    "stats",
]  # fmt: skip
OLD_SESSION_KEYS = ["session_id", "page_index", "requests", "requests_cached", "request_bytes",
                    "request_size_p99", "connections_opened", "connections_used"]  # fmt: skip
OLD_APP_KEYS = ["app_profile", "interaction", "irt_ms", "requests", "requests_answered",
                "order_violations", "depth", "warm_irt_ms", "critical_think_ms",
                "input_delay_ms", "connections_opened"]  # fmt: skip


def test_row_keys_are_the_contract_they_were() -> None:
    # columns added since: `missing_unrecorded` (issue 36's validity rule), after
    # missing_expected; issue 39's `protocol` after trial and the responses by protocol
    # before stats; issue 41's `devices` after protocol; every old key keeps its place
    # relative to the others; issue 39 item 5's `handshakes`, `handshake_ms_p50` after the
    # responses by protocol; the servers' QUIC loss recovery (`quic_*`, issue 39's ask.com
    # diagnosis) after those
    responses = ["responses_h3", "responses_h2", "responses_other", "handshakes",
                 "handshake_ms_p50", "quic_sent_packets", "quic_lost_packets",
                 "quic_congestion_events"]  # fmt: skip
    expected = [*OLD_ROW_KEYS[:7], "protocol", "devices", *OLD_ROW_KEYS[7:20], "missing_unrecorded",
                *OLD_ROW_KEYS[20:-1], *responses, "stats"]  # fmt: skip
    assert expected == ROW_KEYS
    assert SESSION_KEYS == OLD_SESSION_KEYS
    assert APP_KEYS == OLD_APP_KEYS


def test_make_row_joins_config_outcome_and_provenance_in_row_order() -> None:
    run = RunConfig("dchannel", "MM-S", "urllc", seed=3, trial=2, agent_args=("--a", "1"))
    row = make_row(
        run, "pageload", "site0", Outcome(plt_ms=812.5, valid=True, resources_loaded=30),
        {"cell": "MM-S|site0|t2|dchannel"},
    )  # fmt: skip
    assert list(row)[: len(ROW_KEYS)] == ROW_KEYS and list(row)[-1] == "cell"
    assert (row["scheme"], row["seed"], row["trial"], row["page"]) == ("dchannel", 3, 2, "site0")
    assert (row["plt_ms"], row["valid"], row["resources_loaded"]) == (812.5, True, 30)
    assert row["fcp_ms"] is None and row["invalid_reason"] == "" and row["stats"] == {}
    assert "agent_args" not in row  # a campaign cell's column, not every row's
    assert config_columns(run, ("agent_args",)) == {"agent_args": ["--a", "1"]}
    # a workload's own columns (a mapping outcome) follow the common ones
    extra = make_row(run, "app", "social/launch", {"irt_ms": 5.0, "valid": True})
    assert list(extra)[-1] == "irt_ms" and extra["valid"] is True


def test_a_fresh_store_has_every_typed_column_with_its_type(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store.append_rows([{"scheme": "all-hbc", "valid": True, "plt_ms": 1.0}], store=db)
    with store.connect(db, read_only=True) as con:
        have = store.existing_columns(con)
    assert have == store.COLUMNS  # in order: the core first
    assert list(have)[: len(store.CORE_ORDER)] == list(store.CORE_ORDER)
    # hand-checked types of a few: counts and times DOUBLE, seed/trial BIGINT, nested JSON
    assert (have["resources_loaded"], have["seed"], have["trial"]) == ("DOUBLE", "BIGINT", "BIGINT")
    assert (have["warm_irt_ms"], have["x"], have["quick"], have["ts"]) == (
        "VARCHAR", "VARCHAR", "BOOLEAN", "TIMESTAMP",
    )  # fmt: skip


PUBLISHED_FILES = sorted(PUBLISHED.glob("*.parquet"))


@pytest.mark.skipif(not PUBLISHED_FILES, reason="no results/published/*.parquet here")
def test_every_published_file_reads_into_the_typed_columns() -> None:
    """Each column of each published file is a typed column of the same SQL type: the
    old files still read, and the types say what they hold."""
    types = column_types()
    checked = 0
    for path in PUBLISHED_FILES:
        got = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
        for name, kind, *_ in got:
            assert name in types, f"{path.name}: column {name} has no type"
            assert types[name] == kind, f"{path.name}: {name} is {kind}, typed {types[name]}"
            checked += 1
    assert checked > 40 * len(PUBLISHED_FILES)  # the files are not empty of columns
    db = publish.published_store(PUBLISHED_FILES)
    n = store.query("SELECT count(*) FROM results", store=db)[1][0][0]
    assert n > 1000


def test_an_old_published_file_appends_into_a_typed_store(tmp_path: Path) -> None:
    """Rows of the oldest-shaped published file (fewest columns) go into a new store
    unchanged: every value it held is read back the same."""
    if not PUBLISHED_FILES:
        pytest.skip("no results/published/*.parquet here")
    widths = {p: len(duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{p}')").fetchall())
              for p in PUBLISHED_FILES}  # fmt: skip
    oldest = min(widths, key=lambda p: widths[p])
    rows = publish.read_rows(oldest)[:20]
    assert rows
    db = tmp_path / "s.duckdb"
    store.append_rows(rows, store=db)
    back = {r["row_id"]: r for r in store.load_rows(store=db)}
    for r in rows:
        got = back[r["row_id"]]
        for k, v in r.items():
            assert got[k] == v, (oldest.name, k)


def test_a_workload_outcome_is_typed_as_the_columns_it_fills() -> None:
    """The frame's typed outcome fills Outcome columns of the same types (no drift);
    curl's outcome is an Outcome and a row made from it holds its values (hand-computed:
    Table 2's phases)."""
    import typing
    from dataclasses import fields

    from dchlab.workloads.api import CURL_COLUMNS, curl_outcome
    from dchlab.workloads.measure import Frame

    schema = typing.get_type_hints(Outcome)
    assert set(CURL_COLUMNS) <= set(schema)
    for cls in (Frame,):
        mine = typing.get_type_hints(cls)
        for f in fields(cls):
            if f.name.endswith("_failure"):  # the frame's verdict, not a column
                continue
            assert f.name in schema, (cls.__name__, f.name)
            assert column_types()[f.name] == sql_type(mine[f.name]), (cls.__name__, f.name)
    w = {"exitcode": 0, "http_code": 200, "time_namelookup": 0.01, "time_connect": 0.03,
         "time_appconnect": 0.06, "time_starttransfer": 0.08, "time_total": 0.1,
         "size_download": 1000}  # fmt: skip
    out = curl_outcome(w, expect_size=1000)
    row = make_row(RunConfig("all-hbc", "embb", "urllc"), "bulk", "u", asdict(out))
    got = [round(row[k], 6) for k in ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "transfer_ms", "total_ms")]  # fmt: skip
    assert got == [10.0, 20.0, 30.0, 20.0, 40.0, 100.0] and row["size_bytes"] == 1000
    assert row["valid"] is True and row["invalid_reason"] == ""
    short = curl_outcome({**w, "size_download": 10}, expect_size=1000)
    assert not short.valid and short.invalid_reason == "downloaded 10 bytes, expected 1000"
    assert short.dns_ms is None  # an invalid fetch has no phases


class _Scheme:
    def __init__(self, reason: str | None) -> None:
        self.reason = reason

    def invalid_reason(self, stats: dict) -> str | None:
        return self.reason


class _Testbed:
    """A testbed as the frame sees it: start/stop, an offset, stats, a scheme."""

    offset_ms = 1234

    def __init__(self, fail: BaseException | None = None, scheme_reason: str | None = None):
        self.fail, self.scheme = fail, _Scheme(scheme_reason)
        self.stopped = False

    def __enter__(self):
        if self.fail is not None:
            raise self.fail
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped = True

    def stats(self) -> dict:
        link = {"rx_bytes": 100, "tx_bytes": 20, "rx_packets": 3, "tx_packets": 2}
        return {"interfaces": {"ue": {"hbc": link}}}


def test_the_testbed_frame_is_a_typed_outcome_with_its_verdict() -> None:
    from dchlab.testbed import TestbedError, TestbedInterrupted
    from dchlab.workloads.measure import in_testbed

    ran: list = []
    tb = _Testbed()
    frame = in_testbed(tb, ran.append)
    assert ran == [tb] and tb.stopped
    assert (frame.trace_offset_ms, frame.bytes_hbc, frame.pkts_hbc) == (1234, 120, 5)
    assert frame.bytes_llc is None and frame.testbed_failure is None
    assert frame.verdict(True, "") == (True, "")
    assert set(frame.columns()) <= set(ROW_KEYS) and "testbed_failure" not in frame.columns()
    # a testbed that fails to start: never ran the body, no offset, invalid
    broken = in_testbed(_Testbed(fail=TestbedError("no dnsmasq")), ran.append)
    assert len(ran) == 1 and broken.trace_offset_ms is None
    assert broken.verdict(True, "") == (False, "testbed: no dnsmasq")
    # a scheme that never took effect invalidates a valid load, not an invalid one
    idle = in_testbed(_Testbed(scheme_reason="no MPTCP connection"), lambda tb: None)
    assert idle.verdict(True, "") == (False, "no MPTCP connection")
    assert idle.verdict(False, "timeout") == (False, "timeout")
    with pytest.raises(TestbedInterrupted):  # the owner stops: not an invalid load
        in_testbed(_Testbed(fail=TestbedInterrupted("SIGTERM")), lambda tb: None)


def test_a_page_load_outcome_is_typed_and_the_frame_judges_it() -> None:
    """A page load's outcome (validity.page_outcome) is an Outcome with its browser
    result's columns and verdict; the frame adds its columns and has the last word on
    validity."""
    from dchlab.workloads.measure import Frame
    from dchlab.workloads.validity import page_outcome

    gone = "https://www.ex.com/a/gone.png"
    res = {"document_error": "", "resources_failed": 2, "plt_ms": 812.5, "fcp_ms": 300.0,
           "resources_loaded": 40, "bytes_received": 1000, "dns_ms": 4.0,
           "failed": [[gone, "HTTP 404"], ["https://x.test/b", "HTTP 404"]]}  # fmt: skip
    out = page_outcome(res, [gone], ["www.ex.com"], missing_expected=1)
    assert isinstance(out, Outcome) and out.valid and out.invalid_reason == ""
    assert (out.plt_ms, out.total_ms, out.fcp_ms, out.dns_ms) == (812.5, 812.5, 300.0, 4.0)
    assert (out.size_bytes, out.resources_loaded, out.resources_failed) == (1000, 40, 2)
    assert (out.resources_failed_unexpected, out.missing_unrecorded) == (0, 1)
    assert out.missing_expected == 1 and out.lcp_ms is None and out.trace_offset_ms is None
    frame = Frame(trace_offset_ms=1234.0, bytes_hbc=120, pkts_hbc=5, stats={"k": 1})
    judged = frame.judged(out)
    assert (judged.trace_offset_ms, judged.bytes_hbc, judged.pkts_hbc) == (1234.0, 120, 5)
    assert judged.stats == {"k": 1} and judged.valid and judged.plt_ms == 812.5
    row = make_row(RunConfig("all-hbc", "embb", "urllc"), "pageload", "p", judged)
    assert list(row) == ROW_KEYS and row["workload"] == "pageload" and row["page"] == "p"
    assert row["missing_unrecorded"] == 1 and row["trace_offset_ms"] == 1234.0
    # the scheme never took effect: a valid load becomes invalid, the columns stay
    idle = Frame(scheme_failure="no MPTCP connection").judged(out)
    assert not idle.valid and idle.invalid_reason == "no MPTCP connection"
    assert idle.plt_ms == 812.5
    # a failed testbed without a browser result: invalid for the testbed's reason
    broken = Frame(testbed_failure="testbed: no dnsmasq").judged(Outcome(missing_expected=3))
    assert (broken.valid, broken.invalid_reason) == (False, "testbed: no dnsmasq")
    assert broken.missing_expected == 3 and broken.plt_ms is None
