"""Side by side: chanemu's CellReplay stages beside CellReplay's own `mm-cellular`
(docs/chanemu.md, "Beside mm-cellular"). Needs root, a built `mm-cellular` installed
setuid root, and `cargo build --release -p chanemu --example cellreplay_replay`.

    PYTHONPATH=lab .venv/bin/python -m dchlab.bench_cellreplay \\
        --mm-cellular /tmp/crbin/mm-cellular [--traces DIR] [--user nobody] [--json OUT]

A fixed UDP pattern (bursts of 1–9 packets of 100–1392 B every 20–38 ms, and a
150-packet burst every 20 rounds) is sent up through `mm-cellular` from inside its
shell; its packet logs (`--packet-log-folder`) give every packet's arrival, size,
delay-queue release, link entry and write time per direction. The same arrivals are
then fed to chanemu's `CellReplayLink` (end to end and the light part alone) and the
logged link-entry times to `PdoLink` (the heavy link alone), and the release times
compared. mm-cellular runs in a namespace of our own (`crcmp<pid>`), as `--user`.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dchlab import REPO_ROOT

log = logging.getLogger(__name__)

TUN_HEADER_BYTES = 4  # mm-cellular's logged sizes include the TUN packet-info header
SENDER = """#!/usr/bin/python3
import os, socket, time
dst = os.environ.get("MAHIMAHI_BASE", "100.64.0.1")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sizes = [72, 572, 1272, 172, 1364]  # UDP payloads: IP sizes 100, 600, 1300, 200, 1392
time.sleep(0.5)
k = 0
for rnd in range(60):
    n = (rnd % 9) + 1 if rnd % 20 != 19 else 150
    for i in range(n):
        s.sendto(b"x" * sizes[k % len(sizes)], (dst, 9))
        k += 1
    time.sleep(0.003 * (rnd % 7) + 0.02)
time.sleep(2)
"""


@dataclass(frozen=True)
class Read:
    """A packet as mm-cellular read it."""

    arrival_ms: int
    ip_size: int
    delay_queue_release_ms: int


@dataclass(frozen=True)
class Written:
    """A packet as mm-cellular wrote it."""

    release_ms: int
    via_link: bool
    link_entry_ms: int


def parse_log(text: str) -> tuple[list[Read], dict[int, Written]]:
    """mm-cellular's packet log: read lines (8 tab-separated fields: seq, arrival,
    proto, src, dst, size, delay, bypass) and written lines (9: seq, proto, src, dst,
    arrival, release, total delay, bypassed link, link delay)."""
    reads: list[Read] = []
    written: dict[int, Written] = {}
    for line in text.splitlines():
        f = line.split("\t")
        if not f[0].isdigit():
            continue  # the header lines
        if len(f) == 8:
            arrival = int(f[1])
            reads.append(Read(arrival, int(f[5]) - TUN_HEADER_BYTES, arrival + int(f[6])))
        elif len(f) == 9:
            release = int(f[5])
            written[int(f[0])] = Written(release, f[7] == "false", release - int(f[8]))
    return reads, written


Replay = Callable[[Sequence[str], Sequence[tuple[int, int]]], list[list[int]]]


def histogram(diffs: Sequence[int]) -> dict[int, int]:
    """Counts of each difference, sorted."""
    return dict(sorted(collections.Counter(diffs).items()))


def compare(reads: list[Read], written: dict[int, Written], replay: Replay) -> dict[str, object]:
    """The three comparisons of the module docstring; `replay(args, rows)` runs
    `cellreplay_replay DIR SIDE *args` on (time, size) rows and returns its columns."""
    ch = replay([], [(r.arrival_ms, r.ip_size) for r in reads])
    both = [(written[i].release_ms, c[2]) for i, c in enumerate(ch) if i in written]
    out: dict[str, object] = {
        "packets": len(reads),
        "written": len(both),
        "end_to_end_ms": histogram([a - b for a, b in both]),
        "end_to_end_within_1ms": sum(abs(a - b) <= 1 for a, b in both),
        "light_part_equal": sum(
            r.delay_queue_release_ms == c[4] for r, c in zip(reads, ch, strict=True)
        ),
    }
    via = [i for i in sorted(written) if written[i].via_link]
    if via:
        base = str(reads[0].arrival_ms)  # both trace clocks start at the first packet
        lk = replay(["--link", base], [(written[i].link_entry_ms, reads[i].ip_size) for i in via])
        out["link_packets"] = len(via)
        out["link_alone_ms"] = histogram(
            [written[i].release_ms - c[2] for i, c in zip(via, lk, strict=True)]
        )
        out["mm_entry_lateness_ms"] = histogram(
            [written[i].link_entry_ms - reads[i].delay_queue_release_ms for i in via]
        )
    return out


def replayer(exe: Path, traces: Path, side: str) -> Replay:
    """A `Replay` running the cellreplay_replay example."""

    def run(args: Sequence[str], rows: Sequence[tuple[int, int]]) -> list[list[int]]:
        stdin = "".join(f"{t} {s}\n" for t, s in rows)
        res = subprocess.run(
            [str(exe), str(traces), side, *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        )
        return [[int(x) for x in line.split()] for line in res.stdout.splitlines()]

    return run


def run_mm_cellular(mm: Path, traces: Path, user: str, work: Path) -> Path:
    """Runs the sender inside mm-cellular over `traces`; returns the log folder."""
    pw = pwd.getpwnam(user)
    if pw.pw_uid == 0:
        raise ValueError("--user: mm-cellular refuses to run as root; give a normal user")
    tr = work / "traces"
    shutil.copytree(traces, tr)
    logs = work / "logs"
    logs.mkdir()
    sender = work / "send"
    sender.write_text(SENDER)
    for p in (work, tr, *tr.iterdir(), sender):
        p.chmod(0o755)
    logs.chmod(0o777)  # mm-cellular writes its logs as the user
    off = {s: f"--psize-latency-offset-{s}={tr}/latency-offset-{s}" for s in ("up", "down")}
    args = [
        f"{tr}/up-delay-light-pdo",
        f"{tr}/down-delay-light-pdo",
        f"{tr}/up-heavy-pdo",
        f"{tr}/down-heavy-pdo",
        *[off[s] for s in ("up", "down") if (tr / f"latency-offset-{s}").exists()],
        f"--packet-log-folder={logs}",
    ]
    # NUM_ARGS counts mm-cellular's own argv up to the command, itself included
    cmd = [str(mm), str(len(args) + 2), *args, str(sender)]
    ns = f"crcmp{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        inns = ["ip", "netns", "exec", ns]
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run([*inns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        ids = [f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]
        log.info("running %s", " ".join(cmd))
        subprocess.run([*inns, "setpriv", *ids, *cmd], check=True, capture_output=True, timeout=120)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    return logs


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run, compare, print (and write --json)."""
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(prog="dchlab.bench_cellreplay", description=doc.split("\n")[0])
    ap.add_argument(
        "--mm-cellular", type=Path, required=True, help="the built mm-cellular (setuid root)"
    )
    ap.add_argument(
        "--traces",
        type=Path,
        default=REPO_ROOT / "crates/chanemu/testdata/cellreplay",
        help="CellReplay trace directory (default: the synthetic one of the tests)",
    )
    ap.add_argument(
        "--replay-bin",
        type=Path,
        default=REPO_ROOT / "target/release/examples/cellreplay_replay",
        help="chanemu's cellreplay_replay example",
    )
    ap.add_argument("--user", default="nobody", help="unprivileged user for mm-cellular")
    ap.add_argument("--json", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="crcmp") as tmp:
        logs = run_mm_cellular(args.mm_cellular, args.traces, args.user, Path(tmp))
        for side in ("up", "down"):
            reads, written = parse_log((logs / f"packet-log-{side}link").read_text())
            results[side] = compare(reads, written, replayer(args.replay_bin, args.traces, side))
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
