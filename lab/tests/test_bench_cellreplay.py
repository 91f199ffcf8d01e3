"""mm-cellular packet-log parsing and the comparison of dchlab.bench_cellreplay."""

from __future__ import annotations

from collections.abc import Sequence

from dchlab.bench_cellreplay import Read, Written, compare, parse_log

# lines in mm-cellular's format (cellular_queue.cc: read_packet / write_packets*)
LOG = "\n".join(
    [
        "Packet train trace filename=/t/up-delay-light-pdo",
        "Link filename=/t/up-heavy-pdo",
        "Seq_num \t packet_ip_port \t arrival_time_ms \t relase_time_ms \t total_delay_ms",
        "0\t100\tUDP\t100.64.0.2:1\t100.64.0.1:9\t104\t20\ttrue",
        "1\t100\tUDP\t100.64.0.2:1\t100.64.0.1:9\t1396\t25\tfalse",
        "0\tUDP\t100.64.0.2:1\t100.64.0.1:9\t100\t120\t20\ttrue\t0",
        "1\tUDP\t100.64.0.2:1\t100.64.0.1:9\t100\t131\t31\tfalse\t5",
    ]
)


def test_parse_log_splits_read_and_written_lines() -> None:
    reads, written = parse_log(LOG)
    # sizes lose the 4-byte TUN header; delay-queue release = arrival + delay
    assert reads == [Read(100, 100, 120), Read(100, 1392, 125)]
    # link entry = write time - link delay
    assert written == {0: Written(120, False, 120), 1: Written(131, True, 126)}


def test_compare_counts_differences_per_part() -> None:
    reads, written = parse_log(LOG)
    calls: list[tuple[list[str], list[tuple[int, int]]]] = []

    def fake(args: Sequence[str], rows: Sequence[tuple[int, int]]) -> list[list[int]]:
        calls.append((list(args), list(rows)))
        if args:  # --link BASE: the link alone delivers packet 1 at 130
            return [[t, s, 130] for t, s in rows]
        # end to end: 120 (equal) and 130 (1 ms early); light part 120 and 125
        return [[100, 100, 120, 0, 120], [100, 1392, 130, 1, 125]]

    out = compare(reads, written, fake)
    assert calls[0] == ([], [(100, 100), (100, 1392)])
    assert calls[1] == (["--link", "100"], [(126, 1392)])  # entry times of linked packets
    assert out["end_to_end_ms"] == {0: 1, 1: 1}
    assert out["end_to_end_within_1ms"] == 2
    assert out["light_part_equal"] == 2
    assert out["link_alone_ms"] == {1: 1}
    assert out["mm_entry_lateness_ms"] == {1: 1}  # entered at 126, released from delay at 125
