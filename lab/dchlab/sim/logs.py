"""The agents' decision logs of one page load -> one user's inner-packet trace.

A page load run with `--client-arg=--decision-log --client-arg=UP.csv` and
`--gateway-arg=--decision-log --gateway-arg=DOWN.csv` leaves one row per inner packet
each agent steered: the client's are the device's uplink, the gateway's the downlink,
both stamped on CLOCK_MONOTONIC (`t_mono_ns`, one clock for every namespace). Merged
in time order they are the packets the policy was asked about, which `llcsim` feeds
to the same policy again. The trace keeps what Algorithm 1 reads (time, direction,
flow, IP length) and the channel the agent picked (for the demand figures); rows the
agent could not parse (flow `-`) carry no flow and are left out, counted.

Trace format (what crates/llcsim/src/trace.rs reads; `channel` is extra, ignored
there): `t_ns,dir,proto,src,sport,dst,dport,ip_len,channel`, t_ns since the first
packet.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

#: The columns llcsim reads, in its order, then the agent's channel.
TRACE_COLUMNS = ("t_ns", "dir", "proto", "src", "sport", "dst", "dport", "ip_len", "channel")


@dataclass(frozen=True)
class Packet:
    """One inner packet of a trace."""

    t_ns: int
    dir: str  # "up" | "down"
    proto: int
    src: str
    sport: int
    dst: str
    dport: int
    ip_len: int
    channel: str  # the channel the testbed's agent sent it on ("hbc" | "llc")


def _endpoint(text: str, where: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{where}: flow endpoint {text!r}, expected ADDRESS:PORT")
    return host.strip("[]"), int(port)


def read_decision_log(path: Path, direction: str) -> tuple[list[Packet], int]:
    """The packets of one agent's decision log (`direction`: "up" for the client's,
    "down" for the gateway's) and the number of rows without a flow (left out)."""
    packets: list[Packet] = []
    skipped = 0
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        need = {"t_mono_ns", "flow", "proto", "size", "channel"}
        missing = need - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: not a decision log, missing columns {sorted(missing)}")
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            flow = row["flow"].split()
            if len(flow) < 2 or ">" not in flow[1]:
                skipped += 1
                continue
            a, b = flow[1].split(">", 1)
            (src, sport), (dst, dport) = _endpoint(a, where), _endpoint(b, where)
            try:
                packets.append(
                    Packet(
                        int(row["t_mono_ns"]),
                        direction,
                        int(row["proto"]),
                        src,
                        sport,
                        dst,
                        dport,
                        int(row["size"]),
                        row["channel"],
                    )
                )
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from e
    return packets, skipped


def merge(uplink: list[Packet], downlink: list[Packet]) -> list[Packet]:
    """Both directions in time order, times made relative to the first packet."""
    both = sorted(uplink + downlink, key=lambda p: p.t_ns)
    if not both:
        return []
    t0 = both[0].t_ns
    return [
        Packet(p.t_ns - t0, p.dir, p.proto, p.src, p.sport, p.dst, p.dport, p.ip_len, p.channel)
        for p in both
    ]


def write_trace(packets: list[Packet], path: Path) -> None:
    """Writes `packets` as a trace file (see the module docs)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(TRACE_COLUMNS)
        for p in packets:
            w.writerow(
                [p.t_ns, p.dir, p.proto, p.src, p.sport, p.dst, p.dport, p.ip_len, p.channel]
            )


def read_trace(path: Path) -> list[Packet]:
    """Reads a trace file written by `write_trace`."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != TRACE_COLUMNS:
            raise ValueError(f"{path}: header {reader.fieldnames}, expected {list(TRACE_COLUMNS)}")
        return [
            Packet(
                int(r["t_ns"]),
                r["dir"],
                int(r["proto"]),
                r["src"],
                int(r["sport"]),
                r["dst"],
                int(r["dport"]),
                int(r["ip_len"]),
                r["channel"],
            )
            for r in reader
        ]


def convert(page_dir: Path, out: Path) -> tuple[int, int]:
    """`page_dir/uplink.csv` + `page_dir/downlink.csv` (decision logs) -> trace `out`;
    returns (packets written, rows without a flow)."""
    up, s_up = read_decision_log(page_dir / "uplink.csv", "up")
    down, s_down = read_decision_log(page_dir / "downlink.csv", "down")
    packets = merge(up, down)
    write_trace(packets, out)
    return len(packets), s_up + s_down
