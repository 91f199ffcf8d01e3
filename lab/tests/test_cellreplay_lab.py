"""CellReplay trace directories in the lab (issue 42, deliver 3): the channel spec
`cellreplay:DIR` down to chanemu's argv, `dch traces stats` on a hand-made directory,
malformed files refused naming file, line and field (the lab's reader and chanemu
alike, and the CLI without a traceback), fig3_cellreplay refusing without its
archive, the derived stand-in's rules, and a ping and a download through
`dch shell --hbc cellreplay:DIR` (namespaces; the tiny synthetic set of chanemu's tests).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_binaries, require_root

from dchlab.experiments.campaign import CampaignError, load_campaign
from dchlab.paths import binary
from dchlab.testbed import TestbedError
from dchlab.testbed import channels as ch
from dchlab.testbed.links import chanemu_argv
from dchlab.traces import profiles
from dchlab.traces.cellreplay import load_side, read_light
from dchlab.traces.cellreplay_derive import derive
from dchlab.traces.errors import TraceFormatError

LAB = Path(__file__).resolve().parents[1]
REPO = LAB.parent
TESTDATA = REPO / "crates" / "chanemu" / "testdata" / "cellreplay"


def _dch(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dchlab.cli", *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(LAB), **(env or {})},
    )  # fmt: skip


def test_spec_resolves_to_chanemu_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cellreplay:DIR` (relative, or through a variable) is chanemu's built-in with the
    directory made absolute; with a modifier it is a profile naming the directory per
    direction; its traces' periods set the start offset."""
    monkeypatch.chdir(REPO)
    resolved = profiles.resolve_channel("cellreplay:crates/chanemu/testdata/cellreplay")
    assert resolved == f"cellreplay:{TESTDATA}"
    monkeypatch.setenv("CR_TEST_ROOT", str(TESTDATA.parent))
    assert profiles.resolve_channel("cellreplay:${CR_TEST_ROOT}/cellreplay") == resolved
    argv = chanemu_argv(
        Path("/x/chanemu"), resolved, ns_a="a", dev_a="hbc", ns_b="b", dev_b="hbc",
        seed=3, offset_ms=250, stats=Path("/s.json"),
    )  # fmt: skip
    assert argv[:3] == ["/x/chanemu", "--profile", f"cellreplay:{TESTDATA}"]
    assert argv[argv.index("--offset-ms") + 1] == "250"
    # light and heavy traces loop every 1000 ms in both directions: a quarter is 250 ms
    assert profiles.trace_offset_ms(resolved, 1, fraction=0.25) == 250
    monkeypatch.setenv("DCH_CACHE", str(tmp_path))
    lossy = Path(profiles.resolve_channel(f"cellreplay:{TESTDATA}+loss=0.01"))
    text = lossy.read_text()
    assert f'rate = {{ cellreplay = "{TESTDATA}", side = "up" }}' in text
    assert f'rate = {{ cellreplay = "{TESTDATA}", side = "down" }}' in text
    assert "loss = 0.01" in text and "queue" not in text
    with pytest.raises(ValueError, match="queue= does not apply to a CellReplay direction"):
        profiles.resolve_channel(f"cellreplay:{TESTDATA}+queue=10")
    # the agents' and objproxy's nominal rate: the heavy PDOs' mean, 1400 B each
    # (up: 100 opportunities per 1000 ms = 1.12 Mbit/s; down: 200 = 2.24)
    assert ch.nominal_mbit(resolved, "uplink") == pytest.approx(1.12)
    assert ch.nominal_mbit(resolved, "downlink") == pytest.approx(2.24)


def test_ideal_keeps_the_pdos_without_the_base_delay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ideal link of a CellReplay HBC: its PDOs, every base delay 0, the LLC's delay."""
    monkeypatch.setenv("DCH_CACHE", str(tmp_path))
    ideal = ch.ideal_profile(f"cellreplay:{TESTDATA}", "urllc")
    assert ideal["delay"] == {"kind": "fixed", "rtt_ms": 5.0}
    nobase = Path(ideal["uplink"]["rate"]["cellreplay"])
    assert ideal["uplink"]["rate"]["side"] == "up" and ideal["downlink"]["rate"]["side"] == "down"
    up = load_side(nobase, "up")
    assert up.light.base_delay_ms.tolist() == [0, 0, 0]
    assert up.light.pdos_ms == load_side(TESTDATA, "up").light.pdos_ms
    assert up.heavy_ms.tolist() == load_side(TESTDATA, "up").heavy_ms.tolist()
    require_binaries("chanemu")
    path = ch.write_profile(ideal, tmp_path / "ideal.toml")
    p = subprocess.run([str(binary("chanemu")), "check-profile", str(path)], capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["uplink"]["rate"]["cellreplay"] == str(nobase)


def _hand_dir(root: Path) -> Path:
    """Up side only: three trains, 100 heavy PDOs over 1000 ms, three size offsets."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "up-delay-light-pdo").write_text("0 10 0 2 4\n1000 20 0 5\n2000 30 0 1 2 3\n")
    (root / "up-heavy-pdo").write_text("".join(f"{10 * i}\n" for i in range(1, 101)))
    (root / "latency-offset-up").write_text("100 1\n200 2\n300 4\n")
    return root


def test_traces_stats_on_a_hand_made_directory(tmp_path: Path) -> None:
    """Numbers by hand (rules: dchlab.traces.cellreplay_stats)."""
    d = _hand_dir(tmp_path / "cr")
    r = _dch("traces", "stats", str(d), "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["side"] == "up" and row["trains"] == 3
    assert row["span_min"] == pytest.approx(2000 / 60000)  # the last train's time
    assert (row["base_min"], row["base_p50"], row["base_mean"]) == (10, 20, 20)
    assert row["base_p98"] == pytest.approx(29.6)  # 20 + 0.96 · (30 − 20), numpy linear
    assert row["light_pdos"] == 3  # (3 + 2 + 4) / 3
    # per train (PDOs after the first) · 11200 bit / span: 2·11.2/4 = 5.6, 11.2/5 = 2.24,
    # 3·11.2/3 = 11.2 (kbit/ms = Mbit/s); the median
    assert row["light_mbit"] == pytest.approx(5.6)
    assert row["heavy_mbit"] == pytest.approx(1.12)  # 100 · 11200 bit / 1000 ms
    assert (row["offset_100_ms"], row["offset_1400_ms"]) == (1, 4)  # first; last beyond 300 B
    table = _dch("traces", "stats", str(d))
    assert table.returncode == 0 and "light Mbit/s" in table.stdout and "5.60" in table.stdout
    plot = _dch("traces", "plot", str(d), "-o", str(tmp_path / "cr.png"))
    assert plot.returncode == 0, plot.stderr
    assert (tmp_path / "cr.png").stat().st_size > 10_000


# (file, its text, the line and field both readers must name)
MALFORMED = [
    ("up-delay-light-pdo", "0 10 0\n1000 x 1\n2000 30 2\n", 2, "base_delay_ms"),
    ("up-delay-light-pdo", "0 10 0\n1000 20 1  2\n2000 30 2\n", 2, "pdo_ms[1]"),
    ("up-delay-light-pdo", "0 10 0\n\n2000 30 2\n", 2, "time_ms"),
    ("up-delay-light-pdo", "0 10 0\n3000 20 1\n2000 30 2\n", 3, "time_ms"),
    ("up-delay-light-pdo", "0 10 0\n1000 20\n2000 30 2\n", 2, "pdo_ms[0]"),
    ("up-delay-light-pdo", "0 10 0\n1000 20 1\n", 0, "time_ms"),
    ("up-heavy-pdo", "10\n20\nten\n", 3, "timestamp_ms"),
    ("up-heavy-pdo", "10\n30\n20\n", 3, "timestamp_ms"),
    ("up-heavy-pdo", "0\n0\n", 0, "timestamp_ms"),
    ("latency-offset-up", "100 1\n300 2\n", 2, "size_bytes"),
    ("latency-offset-up", "100 1\n200 x\n", 2, "offset_ms"),
    ("latency-offset-up", "100 1\n200\n", 2, "row"),
]


def _broken_copy(root: Path, name: str, text: str) -> Path:
    shutil.copytree(TESTDATA, root)
    (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("name", "text", "line", "field"), MALFORMED)
def test_malformed_file_named_alike_by_lab_and_chanemu(
    tmp_path: Path, name: str, text: str, line: int, field: str
) -> None:
    d = _broken_copy(tmp_path / "cr", name, text)
    with pytest.raises(TraceFormatError) as e:
        load_side(d, "up")
    assert (Path(e.value.path).name, e.value.line, e.value.field) == (name, line, field)
    require_binaries("chanemu")
    p = subprocess.run([str(binary("chanemu")), "check-profile", f"cellreplay:{d}"], capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 1, p.stdout
    assert f"{d / name}:{line}: field `{field}`" in p.stderr, p.stderr


def test_malformed_file_surfaces_without_a_traceback(tmp_path: Path) -> None:
    """`dch traces stats`, the testbed's channel resolution and `dch shell` all say
    which file, line and field; none prints a traceback."""
    d = _broken_copy(tmp_path / "cr", "up-delay-light-pdo", "0 10 0\n1000 x 1\n2000 30 2\n")
    where = re.escape(f"{d / 'up-delay-light-pdo'}:2: field 'base_delay_ms'")
    with pytest.raises(TestbedError, match=where):
        ch.resolve_channel(f"cellreplay:{d}", 1)
    for args in (["traces", "stats", str(d)], ["shell", "--hbc", f"cellreplay:{d}", "--", "true"]):
        r = _dch(*args)
        assert r.returncode != 0, (args, r.stdout)
        assert re.search(where, r.stderr), (args, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr


def test_fig3_cellreplay_refuses_without_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset: refused, saying where the traces go; set to a root holding the six sets
    (here copies of the synthetic set): it loads, each condition naming its set."""
    monkeypatch.delenv("DCH_CELLREPLAY_TRACES", raising=False)
    campaign = REPO / "experiments" / "fig3_cellreplay.yaml"
    with pytest.raises(CampaignError, match=r"conditions\[0\]\.hbc: .*DCH_CELLREPLAY_TRACES is not set.*unzip traces/cellular-traces\.zip"):  # fmt: skip
        load_campaign(campaign)
    r = _dch("run", str(campaign), env={"DCH_CELLREPLAY_TRACES": ""})
    assert r.returncode == 2 and "DCH_CELLREPLAY_TRACES is not set" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    monkeypatch.setenv("DCH_CELLREPLAY_TRACES", str(tmp_path / "nowhere"))
    with pytest.raises(CampaignError, match=r"nowhere/tmobile/stationary does not exist; point \$DCH_CELLREPLAY_TRACES"):  # fmt: skip
        load_campaign(campaign)
    for op in ("tmobile", "verizon"):
        for s in ("stationary", "walking", "driving"):
            shutil.copytree(TESTDATA, tmp_path / "root" / op / s)
    monkeypatch.setenv("DCH_CELLREPLAY_TRACES", str(tmp_path / "root"))
    c = load_campaign(campaign)
    assert [x.name for x in c.conditions] == ["TM-S", "TM-W", "TM-D", "VZ-S", "VZ-W", "VZ-D"]
    got = profiles.resolve_channel(c.conditions[2].hbc)
    assert got == f"cellreplay:{tmp_path / 'root' / 'tmobile' / 'driving'}"


def test_derive_follows_its_stated_rules(tmp_path: Path) -> None:
    """Heavy traces up 1 2 4 8 10 (period 10), down 5 10; pings 20, 31, 40 ms 5 ms
    apart; samples every 5 ms, 3 light PDOs a train (dchlab.traces.cellreplay_derive)."""
    up, down = tmp_path / "l.up", tmp_path / "l.down"
    up.write_text("1\n2\n4\n8\n10\n")
    down.write_text("5\n10\n")
    (tmp_path / "pings").mkdir()
    (tmp_path / "pings" / "run.out").write_text(
        "PING x (192.0.2.1) 56(84) bytes of data.\n"
        "64 bytes from 192.0.2.1: icmp_seq=1 ttl=50 time=20.0 ms\n"
        "64 bytes from 192.0.2.1: icmp_seq=2 ttl=50 time=31.0 ms\n"
        "64 bytes from 192.0.2.1: icmp_seq=3 ttl=50 time=40.0 ms\n\n"
        "--- x ping statistics ---\n"
        "3 packets transmitted, 3 received, 0% packet loss, time 10ms\n"
    )
    out = tmp_path / "cr"
    d = derive(up, down, tmp_path / "pings", out, step_ms=5, train=3)
    assert (d.period_ms, d.samples) == (10, 2)
    # RTT 20 → up 10 / down 10; 31 → 15 / 16. Up at 0: opportunities 1 2 4; at 5: 8 10
    # and 11 (the loop); the last line closes the loop at 10 with the first's values
    assert (out / "up-delay-light-pdo").read_text() == "0 10 0 1 3\n5 15 0 2 3\n10 10 0 1 3\n"
    assert (out / "down-delay-light-pdo").read_text() == "0 10 0 5 10\n5 16 0 5 10\n10 10 0 5 10\n"
    assert (out / "up-heavy-pdo").read_text() == up.read_text()
    assert not (out / "latency-offset-up").exists()
    assert (out / "base.rtt.csv").read_text() == "t_ms,rtt_ms\n0,20.00\n5,31.00\n"
    model = profiles.profile_summary(str(out / "mahimahi-model.toml"))
    assert model["period_ms"] == 10 and model["up_queue"] == "unlimited"
    assert read_light(out / "up-delay-light-pdo").period_ms == 10


def _shell(tmp: Path, scheme: str, *cmd: str) -> tuple[subprocess.CompletedProcess, dict]:
    stats = tmp / f"{scheme}.json"
    r = _dch(
        "shell", "--scheme", scheme, "--hbc", f"cellreplay:{TESTDATA}", "--llc", "urllc",
        "--stats", str(stats), "--", *cmd, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return r, json.loads(stats.read_text())


def _rtts(out: str) -> list[float]:
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def test_shell_over_a_cellreplay_directory(tmp_path: Path) -> None:
    """all-hbc: pings take the two base delays (up 20–24 ms, down 18–22 ms along the
    synthetic set's light traces; 84-byte pings get no size offset); a 30 kB download
    arrives whole. ideal: the same PDOs without base delay, URLLC's 5 ms RTT on top."""
    require_root()
    require_binaries("chanemu", "webreplay", "dchannel")
    r, _ = _shell(tmp_path, "all-hbc", "ping", "-n", "-c", "5", "-i", "0.3", "server.test")
    rtts = _rtts(r.stdout)
    assert len(rtts) == 5 and all(37 <= x <= 60 for x in rtts), r.stdout
    r, _ = _shell(
        tmp_path, "all-hbc", "curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
        "https://server.test/bytes/30000",
    )  # fmt: skip
    assert r.stdout.strip() == "30000", r.stdout
    r, _ = _shell(tmp_path, "ideal", "ping", "-n", "-c", "5", "-i", "0.3", "server.test")
    rtts = _rtts(r.stdout)
    # ≥ 5 ms: a CellReplay release in the packet's own ms leaves at once, never before
    # the packet came (3.8-4.4 ms before chanemu's pipeline kept to that)
    assert len(rtts) == 5 and all(5 <= x <= 15 for x in rtts), r.stdout
