"""Workloads: pairing, curl phase arithmetic, the Chromium CDP driver and (with the
testbed binaries built) page loads, replay fidelity and PLT vs RTT through the testbed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_pages, why_no_testbed

from dchlab.paths import shared_data, target_dir
from dchlab.workloads.api import ROW_KEYS, RunSpec, channel_counters, curl_row, paired_seed
from dchlab.workloads.cli_common import parse_size

LAB = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/lib/chromium/chromium")


# --- pure parts ---------------------------------------------------------------------------


def test_paired_seed_depends_on_page_and_trial_not_scheme() -> None:
    a = paired_seed(1, "site0", 0)
    assert a == paired_seed(1, "site0", 0)
    assert (
        len({a, paired_seed(1, "site1", 0), paired_seed(1, "site0", 1), paired_seed(2, "site0", 0)})
        == 4
    )
    # RunSpec carries the scheme, paired_seed never sees it.
    s1, s2 = RunSpec("all-hbc", "embb", "urllc"), RunSpec("dchannel", "embb", "urllc")
    assert paired_seed(s1.seed, "p", s1.trial) == paired_seed(s2.seed, "p", s2.trial)


def test_parse_size() -> None:
    assert parse_size("10KB") == 10_000 and parse_size("100MB") == 100_000_000
    assert parse_size("1MiB") == 1 << 20 and parse_size("500") == 500
    with pytest.raises(Exception, match="bad size"):
        parse_size("10 parsecs")


def test_curl_row_phases_table2() -> None:
    """Table 2 phases from curl -w times (s): DNS 0.044, connect 0.086, appconnect 0.139,
    total 0.348 → DNS 44, TCP 42, TLS 53, transfer 209, total 348 ms."""
    row: dict = dict.fromkeys(ROW_KEYS)
    w = {
        "exitcode": 0,
        "http_code": 200,
        "time_namelookup": 0.044,
        "time_connect": 0.086,
        "time_appconnect": 0.139,
        "time_starttransfer": 0.2,
        "time_total": 0.348,
        "size_download": 100000,
    }
    curl_row(row, w, expect_size=100000)
    assert row["valid"]
    got = [round(row[k]) for k in ("dns_ms", "connect_ms", "tls_ms", "transfer_ms", "total_ms")]
    assert got == [44, 42, 53, 209, 348]
    bad: dict = dict.fromkeys(ROW_KEYS)
    curl_row(bad, {**w, "size_download": 5}, expect_size=100000)
    assert not bad["valid"] and "expected 100000" in bad["invalid_reason"]


def test_chromium_env_keeps_its_temporary_files_beside_the_profile(tmp_path: Path) -> None:
    from dchlab.workloads.browser import chromium_env

    env = chromium_env(tmp_path / "home", tmp_path / "run" / "profile")
    assert env == {"HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "run" / "profile-tmp")}
    assert (tmp_path / "run" / "profile-tmp").is_dir()


def test_channel_counters() -> None:
    st = {
        "interfaces": {
            "ue": {"hbc": {"rx_bytes": 10, "tx_bytes": 5, "rx_packets": 2, "tx_packets": 1}}
        }
    }
    assert channel_counters(st) == {
        "bytes_hbc": 15,
        "pkts_hbc": 3,
        "bytes_llc": None,
        "pkts_llc": None,
    }


def test_quic_counters_read_webreplays_totals_and_are_none_without_quic() -> None:
    from dchlab.workloads.measure import quic_counters

    totals = {"connections": 4, "sent_packets": 606, "lost_packets": 2, "congestion_events": 2}
    st = {"servers": {"webreplay_quic": {"totals": totals, "connections": []}}}
    assert quic_counters(st) == {
        "quic_sent_packets": 606,
        "quic_lost_packets": 2,
        "quic_congestion_events": 2,
    }
    none = {"quic_sent_packets": None, "quic_lost_packets": None, "quic_congestion_events": None}
    assert quic_counters({}) == none  # h2: webreplay wrote no QUIC statistics
    assert quic_counters({"servers": {"webreplay_quic": {"error": "missing"}}}) == none


# --- the Chromium driver alone (private netns with only loopback) --------------------------

need_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium not installed")
need_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


@pytest.mark.chromium
@pytest.mark.netns
@need_chromium
@need_root
def test_driver_counts_loaded_and_failed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "ok.html").write_text(
        '<html><body><img src="a.png"><script src="s.js"></script></body></html>'
    )
    (site / "bad.html").write_text(
        '<html><body><img src="a.png"><img src="gone.png"></body></html>'
    )
    import numpy as np

    from dchlab.pages.media import png

    (site / "a.png").write_bytes(png(5000, np.random.default_rng(1)))
    (site / "s.js").write_text("document.title='ran';")
    (site / "hang.html").write_text(
        '<html><body><img src="http://127.0.0.1:8001/x.png"></body></html>'
    )
    py = sys.executable
    script = (
        "ip link set lo up; "
        f"{py} -m http.server 8000 --bind 127.0.0.1 --directory {site} >/dev/null 2>&1 & S=$!; "
        "sleep 0.7; "
        f"{py} -m dchlab.workloads.browser http://127.0.0.1:8000/ok.html --timeout 20; "
        f"{py} -m dchlab.workloads.browser http://127.0.0.1:8000/bad.html --timeout 20; "
        # A server that accepts and never answers: `load` never fires; the timeout rules.
        f'{py} -c \'import socket,time; s=socket.socket(); s.bind(("127.0.0.1", 8001)); '
        "s.listen(); time.sleep(30)' & H=$!; sleep 0.3; "
        f"{py} -m dchlab.workloads.browser http://127.0.0.1:8000/hang.html --timeout 3; "
        "kill $S $H"
    )
    env = {**os.environ, "PYTHONPATH": str(LAB)}
    out = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3, out.stderr[-2000:]
    ok, bad, hang = rows
    assert ok["valid"], ok
    assert ok["resources_loaded"] == 3 and ok["resources_failed"] == 0  # html, png, js
    assert 0 < ok["plt_ms"] < 10_000 and ok["main_status"] == 200
    assert not bad["valid"] and bad["resources_failed"] == 1
    assert bad["failed_urls"][0].startswith("http://127.0.0.1:8000/gone.png")
    assert not hang["valid"] and hang["invalid_reason"] == "timeout after 3 s"
    assert hang["plt_ms"] is None and hang["driver_ms"] < 15_000


# --- webreplay + Chromium in a private namespace (no channels) ---------------------------


def _local_ready() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not (target_dir() / "release" / "webreplay").exists():
        return "webreplay not built (cargo build --release -p webreplay)"
    if not CHROMIUM.exists():
        return "chromium not installed"
    return None


need_local = pytest.mark.skipif(_local_ready() is not None, reason=str(_local_ready()))


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from dchlab.pages.generator import generate

    return generate(tmp_path_factory.mktemp("corpus") / "syn", seed=5, pages=2)


def _tp5n(tmp_path: Path, sites: list[str]):  # type: ignore[no-untyped-def]
    from dchlab.pages.tp5n import import_tp5n

    return import_tp5n(shared_pages("tp5n"), tmp_path / "tp5n", sites)[0]


@pytest.mark.netns
@need_local
def test_replay_serves_objects_byte_identically(small_corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from dchlab.workloads.localreplay import LocalReplay

    corpora = [small_corpus]
    data = shared_data()
    if data is not None and (data / "pages" / "tp5n").is_dir():
        corpora.append(_tp5n(tmp_path, ["amazon.com"]))  # 284 objects, 5 hosts, `?` URLs
    for corpus in corpora:
        objs = [o for o in corpus.objects if o.status == 200]
        out = tmp_path / f"out-{corpus.name}"
        out.mkdir()
        with LocalReplay(corpus) as lr:
            res = subprocess.run(
                lr.curl_argv([o.url for o in objs], out), capture_output=True, timeout=120
            )
        assert res.returncode == 0, res.stderr[-500:]
        for i, o in enumerate(objs):
            got = (out / str(i)).read_bytes()
            assert hashlib.sha256(got).hexdigest() == o.body[7:], o.url


@pytest.mark.chromium
@pytest.mark.netns
@need_local
def test_generated_pages_load_completely(small_corpus) -> None:  # type: ignore[no-untyped-def]
    """Every object of a generated page is requested and loads: HTML → CSS → fonts and
    backgrounds, scripts → inserted scripts → images, fetch → JSON → images; fonts decode,
    images decode, scripts run without exceptions."""
    from dchlab.workloads.localreplay import LocalReplay

    with LocalReplay(small_corpus) as lr:
        for page in small_corpus.pages:
            r = lr.load(page.entry_url, 60)
            n = len(small_corpus.objects_of(page.name))
            assert r["valid"], r["invalid_reason"]
            assert r["resources_loaded"] == n and r["resources_failed"] == 0
            assert r["console_errors"] == [] and r["images_broken"] == 0
            assert r["fonts"] and set(r["fonts"]) == {"loaded"}
            assert r["protocol"] in ("h2", "http/1.1")
            paths = {(e.get("host"), e.get("path")) for e in lr.access_log()}
            assert len(paths) >= n


@pytest.mark.chromium
@pytest.mark.netns
@need_local
def test_broken_certificate_is_invalid(small_corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Chromium trusts a different CA than the one webreplay signs with: the load must be
    invalid (the error page still fires `load`, fast)."""
    from dchlab.testbed.ca import ensure_ca
    from dchlab.workloads.localreplay import LocalReplay

    other, _ = ensure_ca(tmp_path / "other-ca")
    with LocalReplay(small_corpus, trust=other) as lr:
        r = lr.load(small_corpus.pages[0].entry_url, 30)
    assert not r["valid"]
    assert "CERT" in r["invalid_reason"].upper(), r["invalid_reason"]
    assert r["resources_loaded"] == 0


@pytest.mark.chromium
@pytest.mark.netns
@pytest.mark.shared_data
@need_local
def test_imported_real_page_missing_count(tmp_path: Path) -> None:
    """The probe sets `missing` to what Chromium cannot get; a later load fails exactly
    that many requests (amazon.com: two `httpdisabled://` images its scripts insert, which
    static analysis cannot see), and a complete page (google.com) loads valid."""
    from dchlab.commands.corpus import probe_corpus
    from dchlab.pages.corpus import load
    from dchlab.workloads.localreplay import LocalReplay

    corpus = _tp5n(tmp_path, ["amazon.com", "google.com"])
    static = {p.name: p.missing for p in corpus.pages}
    probe_corpus(corpus)  # `dch corpus probe`: records the failed URLs in the manifest
    corpus = load(corpus.root)
    assert len(corpus.page("amazon.com").missing_urls or []) == 2
    assert corpus.page("google.com").missing == 0 == static["google.com"]
    assert corpus.page("amazon.com").missing == 2
    with LocalReplay(corpus) as lr:
        again = lr.load(corpus.page("amazon.com").entry_url, 60)
        full = lr.load(corpus.page("google.com").entry_url, 60)
    assert again["resources_failed"] == corpus.page("amazon.com").missing
    assert not again["valid"] and again["resources_loaded"] > 150
    assert full["valid"] and full["resources_failed"] == 0
    if _testbed_ready() is None:  # and through the emulated channels, as campaigns load it
        from dchlab.workloads.api import load_one

        row = load_one(RunSpec(HBC, "fixed:20ms/100mbit", "urllc"), corpus, "amazon.com", 60)
        assert row["resources_failed"] == row["missing_expected"] == 2, row["stats"]["browser"]
        assert row["valid"] and row["resources_failed_unexpected"] == 0, row["invalid_reason"]


# --- through the testbed -------------------------------------------------------------------


def _testbed_ready() -> str | None:
    return why_no_testbed()


need_testbed = pytest.mark.skipif(_testbed_ready() is not None, reason=str(_testbed_ready()))
# all-hbc runs the agents; before the dchannel binary is built, plain routing over the HBC
# (`hbc-only`) is the same path for these tests.
HBC = "all-hbc" if (target_dir() / "release" / "dchannel").exists() else "hbc-only"


@pytest.mark.chromium
@pytest.mark.netns
@need_testbed
def test_generated_page_loads_through_testbed(small_corpus) -> None:  # type: ignore[no-untyped-def]
    from dchlab.workloads.api import pageload

    page = small_corpus.pages[0].name
    singletons = set(Path("/tmp").glob("org.chromium.Chromium.*"))
    rows = pageload(RunSpec(HBC, "fixed:20ms/100mbit", "urllc"), str(small_corpus.root), [page], 60)
    # the killed browser's singleton directory went away with the run (chromium_env)
    assert set(Path("/tmp").glob("org.chromium.Chromium.*")) <= singletons
    assert len(rows) == 1
    row = rows[0]
    assert row["page"] == page and row["missing_expected"] == 0
    assert row["valid"], (row["invalid_reason"], row["stats"].get("browser"))
    assert row["resources_failed"] == 0
    assert row["resources_loaded"] == len(small_corpus.objects_of(page))
    assert row["plt_ms"] > 20 * 3  # at least DNS + TCP + TLS round trips
    assert row["dns_ms"] >= 15 and row["connect_ms"] >= 15
    assert row["bytes_hbc"] > sum(o.size for o in small_corpus.objects_of(page)) * 0.5
    assert set(ROW_KEYS) <= set(row)
    # Chromium ran during the load, so some CPU was busy; shares of the load's CPU time
    assert 0 < row["host_cpu_busy"] <= 1 and 0 <= row["host_cpu_steal"] < 1, row


@pytest.mark.chromium
@pytest.mark.netns
@need_testbed
def test_plt_grows_with_rtt(small_corpus) -> None:  # type: ignore[no-untyped-def]
    from dchlab.workloads.api import load_one

    page = small_corpus.pages[0].name
    plt = {}
    for rtt in (20, 100):
        rows = [
            load_one(RunSpec(HBC, f"fixed:{rtt}ms/200mbit", "urllc", trial=t), small_corpus, page)
            for t in (0, 1)
        ]
        assert all(r["valid"] for r in rows), [r["invalid_reason"] for r in rows]
        plt[rtt] = min(r["plt_ms"] for r in rows)  # the least disturbed by a busy machine
    # A page load needs several sequential round trips (DNS, TCP, TLS, HTML, CSS, fonts,
    # scripts' own requests): at least 4 of them cost 80 ms more each at 100 ms.
    assert plt[100] > plt[20] + 4 * 80, plt


@pytest.mark.netns
@need_testbed
def test_curl_phases_and_bulk_through_testbed() -> None:
    """Over a 40 ms HBC each of DNS, TCP connect and TLS 1.3 costs one round trip (the
    paper's Table 2, All-eMBB: 44/42/53 ms); bulk downloads arrive complete."""
    from dchlab.workloads.api import bulk, curl_phases

    spec = RunSpec(HBC, "fixed:40ms/200mbit", "urllc")
    r = curl_phases(spec, "https://server.test/bytes/100000")
    assert r["valid"], r["invalid_reason"]
    for key in ("dns_ms", "connect_ms", "tls_ms"):
        # One 40 ms round trip each; the upper bound leaves room for a busy 2-core machine.
        assert 38 <= r[key] <= 150, (key, r[key])
    assert r["transfer_ms"] >= 80  # request + response: at least 2 round trips
    assert abs(r["total_ms"] - (r["dns_ms"] + r["connect_ms"] + r["tls_ms"] + r["transfer_ms"])) < 1
    assert r["size_bytes"] == 100000 and r["bytes_hbc"] > 100000
    rows = bulk(spec, [10_000, 2_000_000])
    assert [x["size_bytes"] for x in rows] == [10_000, 2_000_000]
    assert all(x["valid"] for x in rows)
    assert rows[1]["total_ms"] > rows[0]["total_ms"]


@pytest.mark.netns
@need_testbed
def test_curl_phases_over_h3_through_testbed() -> None:
    """`protocol: h3` fetches with the h3get client over QUIC (Debian's curl has no HTTP/3):
    over a 40 ms HBC, DNS is one round trip through the testbed's resolver and the QUIC
    handshake is one more — RFC 9000 §7 folds TCP's and TLS 1.3's two into one — so the
    connect phase stays under two round trips and TLS is 0. The body is `/bytes/N`'s
    pattern (byte i = i mod 251, docs/webreplay.md), byte-exact by hash."""
    import hashlib

    from dchlab.workloads.api import curl_phases

    n = 100_000
    spec = RunSpec(HBC, "fixed:40ms/200mbit", "urllc", protocol="h3")
    r = curl_phases(spec, f"https://server.test/bytes/{n}")
    assert r["valid"], r["invalid_reason"]
    w = r["stats"]["curl"]
    assert w["http_version"] == "3" and r["responses_h3"] == 1 and r["responses_h2"] == 0
    assert r["size_bytes"] == n
    assert w["sha256"] == hashlib.sha256(bytes(i % 251 for i in range(n))).hexdigest()
    assert 38 <= r["dns_ms"] <= 150, r["dns_ms"]
    assert 38 <= r["connect_ms"] < 80, r["connect_ms"]  # one round trip, not TCP + TLS's two
    assert r["tls_ms"] == 0
    assert w["time_namelookup"] < w["time_connect"] <= w["time_starttransfer"] <= w["time_total"]
    assert r["transfer_ms"] >= 80  # request + response: at least 2 round trips
