//! End-to-end tests of the `chanemu` binary between two namespaces the test
//! creates and removes (skipped when not root). Tolerances are those of issue 3.

mod common;

use common::*;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn write_file(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn profile(dir: &std::path::Path, delay: &str, up: &str, down: &str) -> String {
    let text =
        format!("name = \"test\"\n\n[delay]\n{delay}\n\n[uplink]\n{up}\n\n[downlink]\n{down}\n");
    write_file(dir, "p.toml", &text)
}

/// Starts chanemu on a profile with these `[delay]`, `[uplink]` and `[downlink]` bodies,
/// written with the trace `files` (name, text) it names into the lab's folder.
fn start_profile(
    files: &[(&str, &str)],
    (delay, up, down): (&str, &str, &str),
    extra: &[&str],
) -> Lab {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        write_file(dir.path(), name, text);
    }
    let p = profile(dir.path(), delay, up, down);
    Lab::start_in(dir, &p, extra, true)
}

/// Pings B from A (`count` times, every `interval` s); returns ping's output.
fn ping_b(lab: &Lab, count: &str, interval: &str) -> std::process::Output {
    std::process::Command::new("ip")
        .args([
            "netns", "exec", &lab.ns_a, "ping", "-n", "-c", count, "-i", interval, ADDR_B,
        ])
        .output()
        .unwrap()
}

/// A UDP socket bound to `addr` (port 0: any) in namespace `ns`.
fn udp_socket(ns: &str, addr: &'static str, port: u16) -> UdpSocket {
    in_ns(ns, move || UdpSocket::bind((addr, port)).unwrap())
        .join()
        .unwrap()
}

/// Receives at `addr`:`port` in `ns` (with a receive buffer of `rcvbuf` bytes, if given)
/// until nothing comes for `idle_ms`; each datagram with its arrival instant.
fn udp_sink(
    ns: &str,
    (addr, port): (&'static str, u16),
    idle_ms: u64,
    rcvbuf: Option<libc::c_int>,
) -> JoinHandle<Vec<(Vec<u8>, Instant)>> {
    let s = udp_socket(ns, addr, port);
    if let Some(bytes) = rcvbuf {
        set_rcvbuf(&s, bytes);
    }
    s.set_read_timeout(Some(Duration::from_millis(idle_ms)))
        .unwrap();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = s.recv(&mut buf) {
            got.push((buf[..n].to_vec(), Instant::now()));
        }
        got
    })
}

/// Connects A to a listener at B:`port`; runs `rx` on B's end and `tx` on A's, and
/// returns what each returned.
fn tcp_pair<R: Send + 'static, T: Send + 'static>(
    lab: &Lab,
    port: u16,
    rx: impl FnOnce(TcpStream) -> R + Send + 'static,
    tx: impl FnOnce(TcpStream) -> T + Send + 'static,
) -> (R, T) {
    let l = in_ns(&lab.ns_b, move || {
        TcpListener::bind((ADDR_B, port)).unwrap()
    })
    .join()
    .unwrap();
    let rx = std::thread::spawn(move || rx(l.accept().unwrap().0));
    let tx = in_ns(&lab.ns_a, move || {
        tx(TcpStream::connect((ADDR_B, port)).unwrap())
    });
    let sent = tx.join().unwrap();
    (rx.join().unwrap(), sent)
}

fn set_rcvbuf(s: &UdpSocket, bytes: libc::c_int) {
    // SAFETY: setsockopt with a c_int we own.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ping_rtt_is_twice_fixed_one_way_delay() {
    let _g = serial();
    let mut lab = Lab::start("fixed:40ms/100mbit", &[]);
    let out = ping_b(&lab, "20", "0.05");
    let text = String::from_utf8_lossy(&out.stdout);
    let rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .map(|s| s.trim_end_matches(" ms").parse().unwrap())
        .collect();
    assert_eq!(rtts.len(), 20, "{text}");
    let m = median(rtts);
    assert!((m - 40.0).abs() <= 1.0, "median RTT {m} ms");
    let (stats, _) = lab.stop();
    assert_eq!(stats["profile"], "fixed:40ms/100mbit");
    assert_eq!(stats["uplink"]["pkts_out"], 20);
    assert!((stats["downlink"]["delay_ms"]["p50"].as_f64().unwrap() - 20.0).abs() < 0.05);
}

/// Interpolated one-way delay of the timeline used below.
fn timeline_owd(t_ms: f64) -> f64 {
    let pts = [
        (0.0, 20.0),
        (800.0, 20.0),
        (801.0, 120.0),
        (1600.0, 120.0),
        (2800.0, 40.0),
        (4000.0, 40.0),
    ];
    let i = pts.iter().rposition(|p| p.0 <= t_ms).unwrap();
    let (t0, r0) = pts[i];
    let (t1, r1) = pts[i + 1];
    (r0 + (r1 - r0) * (t_ms - t0) / (t1 - t0)) / 2.0
}

fn rtt_timeline_step_and_ramp_delays_follow_interpolation() {
    let _g = serial();
    let mut lab = start_profile(
        &[(
            "t.rtt.csv",
            "t_ms,rtt_ms\n0,20\n800,20\n801,120\n1600,120\n2800,40\n4000,40\n",
        )],
        (
            "kind = \"timeline\"\nfile = \"t.rtt.csv\"",
            "rate = \"unlimited\"",
            "rate = \"unlimited\"",
        ),
        &[],
    );
    let rx = udp_sink(&lab.ns_b, (ADDR_B, 9000), 1500, None);
    let s = udp_socket(&lab.ns_a, ADDR_A, 0);
    let mut sent = Vec::new();
    for i in 0u32..300 {
        sent.push(Instant::now());
        s.send_to(&i.to_be_bytes(), (ADDR_B, 9000)).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = rx.join().unwrap();
    let (_, log) = lab.stop();
    let up: Vec<_> = log.iter().filter(|r| r.dir == "uplink").collect();
    assert_eq!(up.len(), 300);
    assert_eq!(got.len(), 300);
    let mut measured_err = Vec::new();
    let mut prev_release = 0.0;
    for (i, r) in up.iter().enumerate() {
        let rel = r.release_ms.unwrap();
        // the interpolated delay, or later if an earlier packet still has to go first
        let expected = timeline_owd(r.arrival_ms).max(prev_release - r.arrival_ms);
        prev_release = rel;
        let d = r.delay_ms.unwrap();
        assert!(
            (d - expected).abs() <= 0.5,
            "packet {i} at {:.3} ms: delay {d:.3}, expected {expected:.3}",
            r.arrival_ms
        );
        let (payload, at) = &got[i];
        assert_eq!(
            u32::from_be_bytes(payload[..4].try_into().unwrap()),
            i as u32
        );
        measured_err.push(((*at - sent[i]).as_secs_f64() * 1e3 - d).abs());
    }
    // the receiver saw (about) the same delays: median error well under a ms
    assert!(median(measured_err) < 0.5);
    // the step and the ramp were both exercised
    assert!(up.iter().any(|r| r.delay_ms.unwrap() > 59.0));
    assert!(up
        .iter()
        .any(|r| r.arrival_ms > 1700.0 && r.delay_ms.unwrap() < 58.0));
}

/// Bulk TCP from A to B for `secs`; returns (receiver goodput over [1 s, secs − 0.5 s] in
/// bit/s, the sender's MSS).
fn tcp_goodput(lab: &Lab, secs: f64) -> (f64, u32) {
    let rx = move |mut c: TcpStream| {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        let mut start: Option<Instant> = None;
        let mut marks = (None, None);
        while let Ok(n) = c.read(&mut buf) {
            if n == 0 {
                break;
            }
            let now = Instant::now();
            let s = *start.get_or_insert(now);
            total += n as u64;
            let t = (now - s).as_secs_f64();
            if t >= 1.0 && marks.0.is_none() {
                marks.0 = Some((now, total));
            }
            if t >= secs - 0.5 && marks.1.is_none() {
                marks.1 = Some((now, total));
            }
        }
        let (a, b) = (marks.0.unwrap(), marks.1.unwrap());
        (b.1 - a.1) as f64 * 8.0 / (b.0 - a.0).as_secs_f64()
    };
    let tx = move |mut c: TcpStream| {
        let mss = {
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: getsockopt into a c_int we own.
            unsafe {
                libc::getsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&c),
                    libc::IPPROTO_TCP,
                    libc::TCP_MAXSEG,
                    (&mut v as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            v as u32
        };
        let chunk = vec![0x5au8; 1 << 16];
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < secs {
            c.write_all(&chunk).unwrap();
        }
        mss
    };
    tcp_pair(lab, 9100, rx, tx)
}

/// Checks TCP goodput through `lab` against its link capacity.
fn check_goodput(mut lab: Lab, capacity_bps: f64) {
    let (goodput, mss) = tcp_goodput(&lab, 6.5);
    // Capacity is counted on whole IP packets; goodput is TCP payload: a full packet
    // of 1500 B carries `mss` payload bytes (1448 with timestamps).
    let expected = capacity_bps * mss as f64 / 1500.0;
    let err = (goodput - expected).abs() / expected;
    let (stats, _) = lab.stop();
    assert!(err <= 0.03, "goodput {goodput:.0} bit/s vs expected {expected:.0} (capacity {capacity_bps}, mss {mss}): {:.2}%", err * 100.0);
    assert_eq!(stats["uplink"]["pkts_dropped_loss"], 0);
}

fn tcp_goodput_matches_constant_12mbit() {
    let _g = serial();
    let lab = start_profile(
        &[],
        (
            "kind = \"fixed\"\nrtt_ms = 20",
            "rate = { mbit = 12 }",
            "rate = { mbit = 12 }",
        ),
        &[],
    );
    check_goodput(lab, 12e6);
}

fn tcp_goodput_matches_mahimahi_trace() {
    let _g = serial();
    let lab = start_profile(
        // 10 opportunities per 10 ms, bunched unevenly: 12 Mbit/s on average
        &[("l.trace", "1\n1\n1\n2\n4\n4\n6\n7\n9\n10\n")],
        (
            "kind = \"fixed\"\nrtt_ms = 20",
            "rate = { mahimahi = \"l.trace\" }",
            "rate = { mbit = 12 }",
        ),
        &[],
    );
    check_goodput(lab, 12e6);
}

fn capacity_series_changes_rate_on_the_second() {
    let _g = serial();
    let mut lab = start_profile(
        &[(
            "c.cap.csv",
            "t_s,up_mbit,down_mbit\n0,4,1\n1,12,1\n2,4,1\n3,12,1\n",
        )],
        (
            "kind = \"fixed\"\nrtt_ms = 0",
            "rate = { series = \"c.cap.csv\", column = \"up_mbit\" }",
            "rate = { series = \"c.cap.csv\", column = \"down_mbit\" }",
        ),
        &[],
    );
    // ~16.7 Mbit/s of 1400-byte datagrams for 4.2 s keeps the link saturated
    let s = udp_socket(&lab.ns_a, ADDR_A, 0);
    let t0 = Instant::now();
    let pkt = [7u8; 1400 - 28];
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < 4.2 {
        for _ in 0..10 {
            let _ = s.send_to(&pkt, (ADDR_B, 9200));
        }
        n += 10;
        let next = Duration::from_micros(n * 670);
        if let Some(d) = next.checked_sub(t0.elapsed()) {
            std::thread::sleep(d);
        }
    }
    let (_, log) = lab.stop();
    let sent: Vec<(f64, f64)> = log
        .iter()
        .filter(|r| r.dir == "uplink" && r.outcome == "sent" && r.size == 1400)
        .map(|r| (r.release_ms.unwrap(), r.sent_ms.unwrap()))
        .collect();
    // bytes released in [a, b) ms, by schedule and by actual write time
    let mbit = |a: f64, b: f64, actual: bool| {
        let n = sent
            .iter()
            .filter(|(rel, s)| (a..b).contains(if actual { s } else { rel }))
            .count();
        n as f64 * 1400.0 * 8.0 / ((b - a) / 1000.0) / 1e6
    };
    let rates = [4.0, 12.0, 4.0, 12.0];
    for n in 1..4 {
        let second = n as f64 * 1000.0;
        for actual in [false, true] {
            // 100 ms just before and just after the boundary
            let before = mbit(second - 100.0, second, actual);
            let after = mbit(second, second + 100.0, actual);
            // whole packets in 100 ms: ±1 packet (0.112 Mbit/s) plus 3%
            let tol = |r: f64| r * 0.03 + 0.12;
            assert!(
                (before - rates[n - 1]).abs() <= tol(rates[n - 1]),
                "second {n} before: {before} (actual={actual})"
            );
            assert!(
                (after - rates[n]).abs() <= tol(rates[n]),
                "second {n} after: {after} (actual={actual})"
            );
        }
        let whole = mbit(second + 10.0, second + 990.0, true);
        assert!(
            (whole - rates[n]).abs() <= rates[n] * 0.03,
            "second {n}: {whole}"
        );
    }
}

fn drop_tail_burst_loses_exactly_the_excess() {
    let _g = serial();
    let mut lab = start_profile(
        &[],
        (
            "kind = \"fixed\"\nrtt_ms = 0",
            "rate = { mbit = 1 }\nqueue = { packets = 20 }",
            "rate = { mbit = 1 }",
        ),
        &[],
    );
    let rx = udp_sink(&lab.ns_b, (ADDR_B, 9300), 1000, None);
    // 100 datagrams of 1000 B (8 ms each at 1 Mbit/s) as fast as possible
    let s = udp_socket(&lab.ns_a, ADDR_A, 0);
    for _ in 0..100 {
        s.send_to(&[1u8; 972], (ADDR_B, 9300)).unwrap();
    }
    let received = rx.join().unwrap().len();
    let (stats, log) = lab.stop();
    let burst: Vec<_> = log
        .iter()
        .filter(|r| r.dir == "uplink" && r.size == 1000)
        .collect();
    assert_eq!(burst.len(), 100);
    // packets that finished serialisation while the burst was still arriving made room
    let first = burst[0].arrival_ms;
    let last = burst.iter().map(|r| r.arrival_ms).fold(0.0, f64::max);
    let served_during = ((last - first) / 8.0).floor() as usize;
    assert_eq!(
        received,
        20 + served_during,
        "burst lasted {:.3} ms",
        last - first
    );
    assert_eq!(stats["uplink"]["pkts_dropped_queue"], 100 - received as u64);
    assert_eq!(
        burst.iter().filter(|r| r.outcome == "drop_queue").count(),
        100 - received
    );
}

fn one_percent_loss_is_inside_binomial_99_interval() {
    let _g = serial();
    let mut lab = start_profile(
        &[],
        (
            "kind = \"fixed\"\nrtt_ms = 2",
            "rate = \"unlimited\"\nloss = 0.01",
            "rate = \"unlimited\"",
        ),
        &["--seed", "7"],
    );
    const N: u32 = 20_000;
    let rx = udp_sink(&lab.ns_b, (ADDR_B, 9400), 700, Some(4 << 20));
    let s = udp_socket(&lab.ns_a, ADDR_A, 0);
    let t0 = Instant::now();
    for i in 0..N {
        s.send_to(&i.to_be_bytes(), (ADDR_B, 9400)).unwrap();
        if i % 50 == 49 {
            // 20 000 packets/s: far below what the reader handles
            if let Some(d) = Duration::from_micros(i as u64 * 50).checked_sub(t0.elapsed()) {
                std::thread::sleep(d);
            }
        }
    }
    let received = rx.join().unwrap().len();
    let (stats, _) = lab.stop();
    let n_in = stats["uplink"]["pkts_in"].as_u64().unwrap();
    let lost = stats["uplink"]["pkts_dropped_loss"].as_u64().unwrap();
    // the kernel may drop a few before the emulator on a busy machine; the loss stage
    // must see (nearly) all of them for the interval below to apply
    assert!(
        n_in >= 19_900 && n_in <= N as u64,
        "emulator saw {n_in} of {N}"
    );
    assert_eq!(stats["uplink"]["pkts_out"].as_u64().unwrap(), n_in - lost);
    assert!(
        received as u64 <= n_in - lost && received as u64 >= n_in - lost - 20,
        "received {received}"
    );
    // Binomial(~20000, 0.01): mean 200, sd 14.07; 99% interval 200 ± 2.576 sd = [164, 236]
    assert!((164..=236).contains(&lost), "lost {lost}");
}

fn drx_delays_downlink_after_idle_but_not_uplink() {
    let _g = serial();
    let mut lab = start_profile(
        &[],
        (
            "kind = \"fixed\"\nrtt_ms = 10",
            "rate = \"unlimited\"",
            "rate = \"unlimited\"\ndrx = { inactivity_ms = 50, wake_period_ms = 200 }",
        ),
        &[],
    );
    let t_ready = Instant::now();
    // receivers on both sides record arrival instants
    let rx_a = udp_sink(&lab.ns_a, (ADDR_A, 9500), 1500, None);
    let rx_b = udp_sink(&lab.ns_b, (ADDR_B, 9500), 1500, None);
    let sa = udp_socket(&lab.ns_a, ADDR_A, 0);
    let sb = udp_socket(&lab.ns_b, ADDR_B, 0);
    let mut sent = Vec::new();
    // 1: downlink packet ~550 ms after start: asleep since 50 ms, wake-ups at 250, 450, 650 ms
    std::thread::sleep(Duration::from_millis(550).saturating_sub(t_ready.elapsed()));
    sent.push((1u8, Instant::now()));
    sb.send_to(&[1], (ADDR_A, 9500)).unwrap();
    // 2: uplink packet after 400 ms idle: never delayed by DRX
    sleep_ms(500);
    sent.push((2u8, Instant::now()));
    sa.send_to(&[2], (ADDR_B, 9500)).unwrap();
    // 3: downlink 20 ms later: the uplink packet woke the radio
    sleep_ms(20);
    sent.push((3u8, Instant::now()));
    sb.send_to(&[3], (ADDR_A, 9500)).unwrap();
    let mut got = rx_a.join().unwrap();
    got.extend(rx_b.join().unwrap());
    let (_, log) = lab.stop();
    let owd = |id: u8| {
        let s = sent.iter().find(|x| x.0 == id).unwrap().1;
        let r = got.iter().find(|x| x.0[0] == id).unwrap().1;
        (r - s).as_secs_f64() * 1e3
    };
    let rows: Vec<_> = log.iter().filter(|r| r.size == 29).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    // packet 1 was released exactly on a wake-up: 50 ms + k·200 ms after start
    let r1 = rows.iter().find(|r| r.dir == "downlink").unwrap();
    let rel = r1.release_ms.unwrap();
    let k = ((rel - 50.0) / 200.0).round();
    assert!(
        (rel - (50.0 + k * 200.0)).abs() < 0.01,
        "release {rel} not on the wake grid"
    );
    assert!(r1.delay_ms.unwrap() > 5.0 + 20.0, "delay {:?}", r1.delay_ms);
    assert!(
        (owd(1) - r1.delay_ms.unwrap()).abs() < 2.0,
        "measured {} vs logged {:?}",
        owd(1),
        r1.delay_ms
    );
    // packets 2 and 3: just the 5 ms propagation delay
    for (id, dir) in [(2, "uplink"), (3, "downlink")] {
        let r = rows.iter().rfind(|r| r.dir == dir).unwrap();
        assert!((r.delay_ms.unwrap() - 5.0).abs() < 0.01, "{id}: {r:?}");
        assert!((owd(id) - 5.0).abs() < 2.0, "{id}: measured {}", owd(id));
    }
}

fn tcp_transfer_is_byte_exact_over_a_lossy_link() {
    let _g = serial();
    let mut lab = start_profile(
        &[],
        (
            "kind = \"gaussian\"\nmean_rtt_ms = 20\ncov = 0.5\nresample_ms = 10",
            "rate = { mbit = 50 }\nloss = 0.01",
            "rate = { mbit = 50 }\nloss = 0.01",
        ),
        &[],
    );
    let mut data = vec![0u8; 4 << 20];
    let mut x = 0x1234_5678_9abc_def0u64;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let want = Sha256::digest(&data);
    let (got, ()) = tcp_pair(
        &lab,
        9600,
        |mut c| {
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            got
        },
        move |mut c| c.write_all(&data).unwrap(),
    );
    let (stats, _) = lab.stop();
    assert_eq!(got.len(), 4 << 20);
    assert_eq!(Sha256::digest(&got), want);
    assert!(
        stats["uplink"]["pkts_dropped_loss"].as_u64().unwrap() > 0,
        "the link did lose packets"
    );
}

/// Checks that chanemu failed without saying READY; returns its stderr.
fn refused_before_ready(out: &std::process::Output) -> std::borrow::Cow<'_, str> {
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("READY"));
    String::from_utf8_lossy(&out.stderr)
}

fn refuses_missing_namespace_before_ready() {
    let out = chanemu_between(
        "urllc",
        ("dchce-no-such-ns", "x"),
        ("dchce-no-such-ns", "y"),
    )
    .output()
    .unwrap();
    let err = refused_before_ready(&out);
    assert!(
        err.contains("dchce-no-such-ns") && err.contains("does not exist"),
        "{err}"
    );
}

fn check_profile_prints_resolved_and_refuses_bad() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_chanemu"))
        .args(["check-profile", "urllc"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["delay"]["rtt_ms"], 5.0);
    assert_eq!(v["uplink"]["rate"]["mbit"], 2.0);
    assert_eq!(v["downlink"]["queue"]["packets"], 800);
    let dir = tempfile::tempdir().unwrap();
    let p = profile(
        dir.path(),
        "kind = \"fixed\"\nrtt_ms = 10",
        "rate = { mbps = 5 }",
        "rate = \"unlimited\"",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_chanemu"))
        .args(["check-profile", &p])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("p.toml:8: field `uplink.rate`") && err.contains("mbps"),
        "{err}"
    );
}

/// Parses a LINKTYPE_RAW nanosecond pcap: (unix ns, packet) per record.
fn read_pcap(path: &std::path::Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(b.len() >= 24, "{}: no global header", path.display());
    let u32le = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(u32le(0), 0xa1b2_3c4d, "nanosecond pcap magic");
    assert_eq!(&b[4..8], &[2, 0, 4, 0], "version 2.4");
    assert_eq!(u32le(20), 101, "LINKTYPE_RAW");
    let mut at = 24;
    let mut out = Vec::new();
    while at < b.len() {
        assert!(at + 16 <= b.len(), "truncated record header");
        let (sec, ns, incl, orig) = (u32le(at), u32le(at + 4), u32le(at + 8), u32le(at + 12));
        assert!(ns < 1_000_000_000);
        assert_eq!(incl, orig, "whole packets captured");
        let data = b[at + 16..at + 16 + incl as usize].to_vec();
        out.push((sec as u64 * 1_000_000_000 + ns as u64, data));
        at += 16 + incl as usize;
    }
    out
}

fn pcap_captures_each_direction_as_raw_ipv4() {
    let _g = serial();
    let scratch = tempfile::tempdir().unwrap();
    let prefix = scratch.path().join("link");
    let unix_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let t_start = unix_ns();
    let mut lab = Lab::start("fixed:10ms/100mbit", &["--pcap", prefix.to_str().unwrap()]);
    let out = ping_b(&lab, "10", "0.02");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let rx = udp_sink(&lab.ns_b, (ADDR_B, 9300), 500, None);
    let s = udp_socket(&lab.ns_a, ADDR_A, 0);
    for i in 0u32..50 {
        let mut p = b"PCAP-PAYLOAD-".to_vec();
        p.extend_from_slice(&i.to_be_bytes());
        p.resize(1000, 0x77);
        s.send_to(&p, (ADDR_B, 9300)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(rx.join().unwrap().len(), 50);
    let (stats, _) = lab.stop();
    let t_end = unix_ns();
    let up = read_pcap(&prefix.with_file_name("link-uplink.pcap"));
    let down = read_pcap(&prefix.with_file_name("link-downlink.pcap"));
    let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap().octets();
    for (name, recs, src, dst) in [
        ("uplink", &up, ip(ADDR_A), ip(ADDR_B)),
        ("downlink", &down, ip(ADDR_B), ip(ADDR_A)),
    ] {
        // every packet chanemu delivered is in the capture, none dropped
        assert_eq!(
            recs.len() as u64,
            stats[name]["pkts_out"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(stats["pcap"][name]["records"], recs.len());
        assert_eq!(stats["pcap"][name]["dropped"], 0);
        let mut prev = 0;
        for (t, p) in recs.iter() {
            assert_eq!(p[0] >> 4, 4, "{name}: IPv4 header");
            assert_eq!(
                u16::from_be_bytes([p[2], p[3]]) as usize,
                p.len(),
                "{name}: IP total length = record length"
            );
            assert_eq!(&p[12..16], &src, "{name}: source");
            assert_eq!(&p[16..20], &dst, "{name}: destination");
            assert!(*t >= prev && *t >= t_start && *t <= t_end, "{name}: time");
            prev = *t;
        }
    }
    // 10 echo requests + 50 datagrams up, 10 replies down (ARP-free TUN link)
    let icmp = |recs: &Vec<(u64, Vec<u8>)>, ty: u8| {
        recs.iter()
            .filter(|(_, p)| p[9] == 1 && p[20] == ty)
            .count()
    };
    assert_eq!(icmp(&up, 8), 10);
    assert_eq!(icmp(&down, 0), 10);
    let udp: Vec<_> = up.iter().filter(|(_, p)| p[9] == 17).collect();
    assert_eq!(udp.len(), 50);
    for (i, (_, p)) in udp.iter().enumerate() {
        assert_eq!(&p[28..41], b"PCAP-PAYLOAD-");
        assert_eq!(&p[41..45], &(i as u32).to_be_bytes());
    }
}

fn pcap_refuses_an_unwritable_prefix_before_ready() {
    let tag = format!("dchcepc{}", std::process::id() % 100_000);
    let (a, b) = (format!("{tag}a"), format!("{tag}b"));
    for ns in [&a, &b] {
        sh(&["ip", "netns", "add", ns]);
    }
    let out = chanemu_between("urllc", (&a, "emu0"), (&b, "emu0"))
        .args(["--pcap", "/nonexistent-dir/cap"])
        .output()
        .unwrap();
    // the devices went with the process
    let links = std::process::Command::new("ip")
        .args(["-n", &a, "link", "show", "emu0"])
        .output()
        .unwrap();
    for ns in [&a, &b] {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", ns])
            .status();
    }
    let err = refused_before_ready(&out);
    assert!(
        err.contains("/nonexistent-dir/cap-uplink.pcap"),
        "error names the file: {err}"
    );
    assert!(!links.status.success(), "emu0 left behind in {a}");
}

dchannel_base::test_main! {
    tun: true,
    plain: [refuses_missing_namespace_before_ready, check_profile_prints_resolved_and_refuses_bad],
    namespaced: [ping_rtt_is_twice_fixed_one_way_delay, rtt_timeline_step_and_ramp_delays_follow_interpolation, tcp_goodput_matches_constant_12mbit, tcp_goodput_matches_mahimahi_trace, capacity_series_changes_rate_on_the_second, drop_tail_burst_loses_exactly_the_excess, one_percent_loss_is_inside_binomial_99_interval, drx_delays_downlink_after_idle_but_not_uplink, tcp_transfer_is_byte_exact_over_a_lossy_link, pcap_captures_each_direction_as_raw_ipv4, pcap_refuses_an_unwritable_prefix_before_ready],
}
