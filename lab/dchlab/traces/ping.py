"""Linux `ping` output (iputils) -> RTT timeline.

Time of each sample:
- with `ping -D`, the `[epoch]` prefix of a reply is its receive time; the sample
  is placed at its send time, `epoch - rtt`, relative to the first send;
- otherwise `(icmp_seq - first_seq) * interval`, where the interval is `--interval`
  if given, else derived from the summary (`time T ms` over N-1 gaps), else 1 s
  (ping's default). Sequence numbers that wrap at 65536 are unwrapped.

Lost pings (a sequence number with no reply, `no answer yet`, `Destination Host
Unreachable`, `Request timeout`) produce no sample: the timeline interpolates across them and
the count is reported. Duplicate replies (DUP!) are ignored. Every other line
must be one ping prints, or the input is refused with its file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dchlab.traces.errors import TraceFormatError
from dchlab.traces.timeline import RttTimeline

_EPOCH = r"(?:\[(?P<epoch>\d+(?:\.\d+)?)\]\s*)?"
_REPLY = re.compile(
    _EPOCH + r"\d+ bytes from (?P<src>.+?): (?:icmp_)?seq=(?P<seq>\d+)(?: (?:ttl|hlim)=\d+)?"
    r"(?: time[=<](?P<time>[^ ]+) ?ms)?(?P<rest>.*)$"
)
_LOST = re.compile(
    _EPOCH + r"(?:no answer yet for icmp_seq=(?P<seq1>\d+)|From .*icmp_seq=(?P<seq2>\d+).*|"
    r"Request timeout for icmp_seq[= ](?P<seq3>\d+))$"
)
_SUMMARY = re.compile(r"(?P<tx>\d+) packets transmitted, .*time (?P<ms>\d+)ms")
_NOISE = re.compile(
    r"^(PING .*|--- .* ping statistics ---|rtt min/avg/max/(?:mdev|stddev) = .*|"
    r"round-trip .*|\d+ packets transmitted, .*|ping: .*|Warning: .*|WARNING: .*|"
    r"\d{9,}(?:\.\d+)?)$"
)


@dataclass
class PingImport:
    timeline: RttTimeline
    replies: int
    lost: int
    duplicates: int
    interval_ms: float | None  # None when -D timestamps were used
    notes: list[str] = field(default_factory=list)


def parse_ping(path: str | Path, interval_s: float | None = None) -> PingImport:
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as e:
        raise TraceFormatError(path, f"not ping output: not a text file ({e})") from None
    replies: dict[int, tuple[float | None, float]] = {}  # unwrapped seq -> (epoch, rtt)
    lost: set[int] = set()
    duplicates = 0
    summary_interval: float | None = None
    transmitted: int | None = None
    last_raw = None
    wraps = 0
    saw_epoch = None

    def unwrap(raw: int) -> int:
        nonlocal last_raw, wraps
        if last_raw is not None and raw < last_raw - 32768:
            wraps += 1
        last_raw = raw
        return raw + 65536 * wraps

    for no, raw_line in enumerate(lines, start=1):
        line = raw_line.strip()
        if not line:
            continue
        m = _REPLY.match(line)
        if m:
            seq = unwrap(int(m["seq"]))
            if m["time"] is None:
                raise TraceFormatError(path, f"reply without time=: {line!r}", no, "time")
            try:
                rtt = float(m["time"])
            except ValueError:
                raise TraceFormatError(
                    path, f"expected a number in ms, got {m['time']!r}", no, "time"
                ) from None
            epoch = float(m["epoch"]) if m["epoch"] else None
            if saw_epoch is None:
                saw_epoch = epoch is not None
            elif saw_epoch != (epoch is not None):
                raise TraceFormatError(
                    path, "some replies have [epoch] timestamps and some not", no
                )
            if "DUP!" in m["rest"] or seq in replies:
                duplicates += 1
                continue
            replies[seq] = (epoch, rtt)
            continue
        m = _LOST.match(line)
        if m:
            lost.add(unwrap(int(m["seq1"] or m["seq2"] or m["seq3"])))
            continue
        s = _SUMMARY.match(line)
        if s:
            tx, ms = int(s["tx"]), int(s["ms"])
            transmitted = tx
            if tx > 1 and ms > 0:
                summary_interval = ms / (tx - 1)
            continue
        if _NOISE.match(line):
            continue
        raise TraceFormatError(path, f"not a line ping prints: {line!r}", no)
    if not replies:
        raise TraceFormatError(
            path, "no ping replies (`N bytes from ...: icmp_seq=N ... time=X ms`) found"
        )
    seqs = np.array(sorted(replies))
    rtts = np.array([replies[s][1] for s in seqs])
    notes: list[str] = []
    # Lost: from the summary (transmitted - answered) when present, else the sequence
    # numbers in the answered range without a reply plus explicit reports outside it.
    missing = len(set(range(int(seqs[0]), int(seqs[-1]) + 1)) - set(replies)) + len(
        {s for s in lost if s < seqs[0] or s > seqs[-1]}
    )
    if transmitted is not None:
        missing = max(transmitted - len(replies), 0)
    if saw_epoch:
        send = np.array([replies[s][0] for s in seqs], dtype=float) * 1000.0 - rtts
        t = send - send[0]
        interval_ms = None
        notes.append("times from -D timestamps (send time = receive time - rtt)")
        # RTTs print with 3 significant digits, so send times carry up to 0.5 ms of
        # error; keep them strictly increasing (by >= 1 us) for very fast pings.
        k = np.arange(len(t)) * 1e-3
        t = np.maximum.accumulate(t - k) + k
    else:
        if interval_s is not None:
            interval_ms = interval_s * 1000.0
            notes.append(f"interval {interval_ms:g} ms (given)")
        elif summary_interval is not None:
            interval_ms = summary_interval
            notes.append(f"interval {interval_ms:.2f} ms (from the summary line)")
        else:
            interval_ms = 1000.0
            notes.append("interval 1000 ms (ping's default; pass --interval to override)")
        t = (seqs - seqs[0]) * interval_ms
    return PingImport(
        RttTimeline(np.round(t, 3), rtts), len(replies), missing, duplicates, interval_ms, notes
    )
