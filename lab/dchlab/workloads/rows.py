"""A measurement's row, typed: the run's configuration, the workload's outcome and the
provenance, joined by one function (`make_row`); the results store's columns and their
SQL types come from these types (`column_types`, dchlab.experiments.store).

Rows are contracts (results/published/*.parquet, the report, `--json` output): a
column is added by adding a field here, and its name never changes. Which types there
are:
  RunConfig (dchlab.run_config)  the configuration columns (`RUN_COLUMNS` on every row,
                                 `CELL_RUN_COLUMNS` on campaign rows);
  Outcome                        what every workload's row measured (None: n/a);
  SessionColumns, AppColumns     what a browsing session's and an app's rows add;
  RealtimeColumns                what a real-time session's row adds;
  CellProvenance                 which campaign cell a row measured;
  StoreProvenance                where, when and with which code it was stored.
Numbers are DOUBLE in the store (as they always were) unless a field's metadata says
otherwise (`sql`); nested values (dicts, lists) are JSON text.
"""

from __future__ import annotations

import datetime as dt
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dchlab.run_config import RunConfig

#: Configuration columns of every workload row, in row order.
RUN_COLUMNS = ("scheme", "hbc", "llc", "cc", "seed", "trial", "protocol", "devices")
#: Configuration columns a campaign cell's rows add (lists as the agents get them).
CELL_RUN_COLUMNS = ("agent_args", "client_args", "gateway_args", "server_delay_ms")


@dataclass(frozen=True)
class Outcome:
    """What a measurement on the testbed yields: the columns every workload row has
    besides its configuration, workload and page (None: does not apply or not reached)."""

    trace_offset_ms: float | None = None
    plt_ms: float | None = None
    # pageload: paint and visual metrics, ms since the navigation start like plt_ms
    # (dchlab.workloads.pagemetrics; docs/formats.md "Page metrics")
    fcp_ms: float | None = None
    lcp_ms: float | None = None
    speed_index_ms: float | None = None
    atf_ms: float | None = None
    valid: bool = False
    invalid_reason: str = ""
    resources_loaded: int | None = None
    resources_failed: int | None = None
    # failed requests outside the page's expected-missing set
    resources_failed_unexpected: int | None = None
    # pageload: how many requests the corpus records it cannot answer
    missing_expected: int | None = None
    # pageload: failed requests the corpus does not hold (a 404 from webreplay, a host
    # outside the corpus) beyond those it records: gaps of the recording, counted, never
    # invalidating (dchlab.workloads.validity)
    missing_unrecorded: int | None = None
    dns_ms: float | None = None
    connect_ms: float | None = None
    tls_ms: float | None = None
    ttfb_ms: float | None = None
    transfer_ms: float | None = None
    total_ms: float | None = None
    size_bytes: int | None = None
    bytes_hbc: int | None = None
    bytes_llc: int | None = None
    pkts_hbc: int | None = None
    pkts_llc: int | None = None
    # the machine's CPU over this load: busy and stolen shares (dchlab.hostcpu)
    host_cpu_busy: float | None = None
    host_cpu_steal: float | None = None
    # pageload: the page's responses by the protocol they came over (CDP
    # Response.protocol; dchlab.protocol): h3, h2, anything else (http/1.1)
    responses_h3: int | None = None
    responses_h2: int | None = None
    responses_other: int | None = None
    # pageload: connections the load opened with a timed handshake and their median
    # handshake in ms (TCP + TLS for h2, QUIC for h3; dchlab.workloads.handshakes)
    handshakes: int | None = None
    handshake_ms_p50: float | None = None
    # h3: the servers' QUIC loss recovery over all the load's connections (webreplay
    # --quic-stats-json; dchlab.workloads.measure.quic_counters): packets sent, declared
    # lost (RFC 9002 §6) and congestion events (window reductions). None under h2.
    quic_sent_packets: int | None = None
    quic_lost_packets: int | None = None
    quic_congestion_events: int | None = None
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionColumns:
    """What a browsing session's rows add, per page (dchlab.workloads.session)."""

    session_id: str | None = None
    page_index: int | None = None
    requests: int | None = None
    requests_cached: int | None = None
    request_bytes: int | None = None
    request_size_p99: float | None = None
    connections_opened: int | None = None
    connections_used: int | None = None


@dataclass(frozen=True)
class AppColumns:
    """What an app interaction's rows add (dchlab.apps.run, docs/apps.md)."""

    app_profile: str | None = None
    interaction: str | None = None
    irt_ms: float | None = None
    requests: int | None = None
    requests_answered: int | None = None
    order_violations: int | None = None
    depth: int | None = None
    warm_irt_ms: dict[str, float | None] | None = None
    critical_think_ms: float | None = None
    input_delay_ms: float | None = None
    connections_opened: int | None = None


@dataclass(frozen=True)
class RealtimeColumns:
    """What a real-time session's row adds (dchlab.workloads.realtime, docs/realtime.md):
    the server -> device video and, for cloud gaming, input-to-display latency; for a
    video call, the device -> server video and both audio directions too. Per-input
    and per-frame samples are in the row's stats (`realtime.samples`)."""

    rt_app: str | None = None
    duration_s: float | None = None
    # when the video jitter buffers released a frame: next (aiortc's) or marker
    # (libwebrtc's; dchlab.workloads.realtime.frame_release); None: next (rows before it)
    frame_release: str | None = None
    # when the peer connection failed, s into the session (ICE consent expired: no
    # check answered for 30 s); None: it held. The rest of the session is one freeze.
    connection_lost_s: float | None = None
    input_to_display_p50_ms: float | None = None
    input_to_display_p95_ms: float | None = None
    input_to_display_p99_ms: float | None = None
    inputs_sent: int | None = None
    inputs_displayed: int | None = None
    frame_delay_p50_ms: float | None = None
    frame_delay_p95_ms: float | None = None
    frame_delay_p99_ms: float | None = None
    fps_delivered: float | None = None
    freezes: int | None = None
    freeze_ms: float | None = None
    bitrate_mbps: float | None = None
    # the encoded bytes of the frames displayed, per second (what the player saw of it)
    shown_mbps: float | None = None
    encode_ms: float | None = None
    decode_ms: float | None = None
    jitter_buffer_ms: float | None = None
    frame_delay_up_p95_ms: float | None = None
    audio_delay_p50_ms: float | None = None
    audio_delay_p95_ms: float | None = None
    audio_delay_up_p95_ms: float | None = None
    # the video's bitrate (issue 40's >= 10 Mbit/s target; docs/realtime.md)
    bitrate_steady_mbps: float | None = None  # received after the first warmup_s
    target_mbps: float | None = None  # the encoder's mean target
    start_bitrate_mbps: float | None = None
    max_bitrate_mbps: float | None = None
    min_bitrate_mbps: float | None = None
    warmup_s: float | None = None
    key_frames: int | None = None
    frame_bytes_delta_p50: float | None = None
    frame_bytes_key_p50: float | None = None
    encode_cpu_ms: float | None = None  # median CPU time per frame of the encoder
    cpu_server_pct: float | None = None  # each end's process CPU (100 = one core)
    cpu_device_pct: float | None = None
    # input-to-display taken apart (dchlab.workloads.realtime.latency_parts): per
    # part p50 and p95 (ms), the inputs accounted, the parts' sum's residual (max |ms|)
    # and the whole without the CPU / event-loop waits (p50, p95)
    i2d_parts_p50_ms: dict[str, float | None] | None = None
    i2d_parts_p95_ms: dict[str, float | None] | None = None
    i2d_inputs_accounted: int | None = None
    i2d_residual_max_ms: float | None = None
    i2d_without_waits_p50_ms: float | None = None
    i2d_without_waits_p95_ms: float | None = None


@dataclass(frozen=True)
class CellProvenance:
    """Which cell of which campaign a row measured (dchlab.experiments.runner)."""

    cell: str | None = None
    condition: str | None = None
    arm: str | None = None
    item: str | None = None
    quick: bool | None = None
    x: dict[str, Any] | None = None  # the condition's sweep coordinates
    offsets: str | None = None
    rerun_of: str | None = None
    corpus: str | None = None
    error: str | None = None  # the lab failed (the cell is retried)


@dataclass(frozen=True)
class StoreProvenance:
    """Where, when and with which code a row was stored (dchlab.experiments.store)."""

    row_id: str | None = None
    ts: dt.datetime | None = None
    campaign: str | None = None
    scheme_name: str | None = None
    scheme_params: dict[str, Any] | None = None
    profiles: dict[str, Any] | None = None
    code_rev: str | None = None
    code_dirty: bool | None = None
    chromium_version: str | None = None
    kernel_version: str | None = None
    hostname: str | None = None
    host_load1: float | None = None
    host_cpus: int | None = None
    ray_node_id: str | None = None  # measured on a Ray node (dchlab.experiments.ray_backend)
    node_code_rev: str | None = None  # that node's code revision, when not the head's


#: What every workload row holds, in order (its `--json` output's keys).
ROW_KEYS = [
    "workload",
    *RUN_COLUMNS,
    "trace_offset_ms",
    "page",
    *(f.name for f in fields(Outcome) if f.name != "trace_offset_ms"),
]
SESSION_KEYS = [f.name for f in fields(SessionColumns)]
APP_KEYS = [f.name for f in fields(AppColumns)]
REALTIME_KEYS = [f.name for f in fields(RealtimeColumns)]


def make_row(
    run: RunConfig,
    workload: str,
    page: str | None,
    outcome: Outcome | Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The one row of a measurement: the run's configuration columns, the workload and
    page, the outcome's columns, then `provenance` (a cell's or a node's columns)."""
    values = {"workload": workload, **config_columns(run), "page": page}
    values.update(asdict(outcome) if isinstance(outcome, Outcome) else outcome)
    row = {k: values.pop(k, None) for k in ROW_KEYS}
    row.update(values)  # a workload's own columns (SessionColumns, AppColumns) follow
    row.update(provenance or {})
    return row


def config_columns(run: RunConfig, names: tuple[str, ...] = RUN_COLUMNS) -> dict[str, Any]:
    """`run`'s configuration columns `names` (a campaign cell's rows: CELL_RUN_COLUMNS
    too), tuples as lists."""
    return {n: list(v) if isinstance(v := getattr(run, n), tuple) else v for n in names}


# ---------------------------------------------------------------- the store's schema

#: Columns whose SQL type is not the default of their Python type.
_SQL_OVERRIDES = {"seed": "BIGINT", "trial": "BIGINT"}

ROW_TYPES = (RunConfig, Outcome, SessionColumns, AppColumns, RealtimeColumns, CellProvenance,
             StoreProvenance)  # fmt: skip


#: The two columns that say what was measured: the workload kind and its page/item.
_ITEM_COLUMNS = {"workload": "VARCHAR", "page": "VARCHAR"}


def column_types() -> dict[str, str]:
    """{column: SQL type} of every typed row column (the store creates them all)."""
    return dict(_column_types())


@functools.cache
def _column_types() -> dict[str, str]:
    out: dict[str, str] = dict(_ITEM_COLUMNS)
    for cls in ROW_TYPES:
        hints = typing.get_type_hints(cls)
        names = [f.name for f in fields(cls)]
        if cls is RunConfig:
            names = [n for n in names if n in RUN_COLUMNS + CELL_RUN_COLUMNS]
        for name in names:
            out.setdefault(name, _SQL_OVERRIDES.get(name) or sql_type(hints[name]))
    return out


def sql_type(hint: Any) -> str:
    """The store's SQL type of a field's Python type (Optional unwrapped): bool BOOLEAN,
    numbers DOUBLE, datetime TIMESTAMP, the rest (str, dicts, lists as JSON) VARCHAR."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = args[0]
    if hint is bool:
        return "BOOLEAN"
    if hint in (int, float):
        return "DOUBLE"
    if hint is dt.datetime:
        return "TIMESTAMP"
    return "VARCHAR"
