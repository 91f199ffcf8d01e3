//! Benchmark of the chanemu binary between two namespaces (needs root):
//! maximum throughput through an unlimited link with 1500-byte packets, CPU per
//! Gbit/s, and release-time error against the schedule at 100 Mbit/s and 1 Gbit/s.
//!
//! Run: `cargo bench -p chanemu --bench tun` (results in docs/benchmarks.md).

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAYLOAD: usize = 1500 - 28; // 1500-byte IP packets

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 14 and 15 of stat are at 11 and 12 after the state field
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Send 1500-byte packets from A to B for `secs` at `rate_bps` (None: as fast as
/// possible); returns (packets received at B in the measuring window, window length s).
fn blast(lab: &Lab, secs: f64, rate_bps: Option<f64>, senders: usize) -> (u64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rx = in_ns(&lab.ns_b, move || {
        let s = UdpSocket::bind((ADDR_B, 9700)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let (mut n, mut first, mut last) = (0u64, None, Instant::now());
        while !s2.load(Ordering::Relaxed) {
            if s.recv(&mut buf).is_ok() {
                let now = Instant::now();
                // skip the first 0.3 s (start-up) and count the rest
                let f = *first.get_or_insert(now);
                if (now - f).as_secs_f64() > 0.3 {
                    n += 1;
                    last = now;
                }
            }
        }
        let f = first.unwrap();
        (n, (last - f).as_secs_f64() - 0.3)
    });
    std::thread::sleep(Duration::from_millis(50));
    let tx: Vec<_> = (0..senders)
        .map(|_| {
            in_ns(&lab.ns_a, move || {
                let s = UdpSocket::bind((ADDR_A, 0)).unwrap();
                s.connect((ADDR_B, 9700)).unwrap();
                let pkt = [0u8; PAYLOAD];
                let t0 = Instant::now();
                let mut sent = 0u64;
                while t0.elapsed().as_secs_f64() < secs {
                    for _ in 0..16 {
                        let _ = s.send(&pkt);
                    }
                    sent += 16;
                    if let Some(r) = rate_bps {
                        let due = Duration::from_secs_f64(
                            sent as f64 * 1500.0 * 8.0 * senders as f64 / r,
                        );
                        if let Some(d) = due.checked_sub(t0.elapsed()) {
                            std::thread::sleep(d);
                        }
                    }
                }
            })
        })
        .collect();
    for t in tx {
        t.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    rx.join().unwrap()
}

/// The sans-I/O pipeline alone: push + pop of 1500-byte packets through a
/// 1 Gbit/s link with 10 ms delay, no I/O.
fn pipeline_only() {
    let p = chanemu::profile::Profile::resolve("fixed:20ms/1000mbit").unwrap();
    let mut pipe = p.pipeline::<u32>(chanemu::profile::Direction::Downlink, 1, 0);
    let n = 5_000_000u64;
    let t0 = Instant::now();
    for i in 0..n {
        let now = i * 12_000; // exactly line rate
        let _ = pipe.push(now, 1500, i as u32);
        while pipe.pop_due(now).is_some() {}
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    println!(
        "pipeline only: {ns:.1} ns per packet (push + pop) = {:.1} M packets/s on one core",
        1e3 / ns
    );
}

fn main() {
    pipeline_only();
    if !can_run() {
        return;
    }
    let _g = serial();
    println!("chanemu benchmark (1500-byte UDP packets, namespaces, this machine)");

    // extra chanemu arguments for every run, e.g. CHANEMU_BENCH_ARGS="--pcap /tmp/cap"
    let extra: Vec<String> = std::env::var("CHANEMU_BENCH_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    println!("extra chanemu arguments: {extra:?}");

    // 1. unlimited link: how much gets through
    let mut lab = Lab::start_with("fixed:0ms/unlimited", &extra, false);
    let pid = lab.pid();
    let c0 = cpu_seconds(pid);
    let w0 = Instant::now();
    let blast_s = 4.0;
    let (n, secs) = blast(&lab, blast_s, None, 2);
    let cpu_s = cpu_seconds(pid) - c0;
    let (stats, _) = lab.stop();
    let _ = w0;
    // forwarded by the emulator (written into namespace B) while the senders ran
    let out = stats["uplink"]["pkts_out"].as_u64().unwrap() as f64;
    let gbit = out * 1500.0 * 8.0 / blast_s / 1e9;
    println!(
        "unlimited: chanemu forwarded {gbit:.2} Gbit/s = {:.0} packets/s (uplink in {} out {}); \
         the UDP receiver in B counted {:.2} Gbit/s; chanemu CPU {:.2} cores → {:.2} cores per Gbit/s",
        out / blast_s,
        stats["uplink"]["pkts_in"],
        stats["uplink"]["pkts_out"],
        n as f64 * 1500.0 * 8.0 / secs / 1e9,
        cpu_s / blast_s,
        cpu_s / blast_s / gbit,
    );

    if let Some(p) = stats.get("pcap") {
        println!("pcap: {p}");
    }

    // 2. release-time error at 100 Mbit/s and 1 Gbit/s, link driven at 95 % of its rate
    for (profile, rate) in [
        ("fixed:10ms/100mbit", 100e6),
        ("fixed:10ms/1000mbit", 1000e6),
    ] {
        let mut lab = Lab::start_with(profile, &extra, false);
        let (n, secs) = blast(&lab, 4.0, Some(rate * 0.95), 1);
        let (stats, _) = lab.stop();
        let e = &stats["uplink"]["release_error_ms"];
        println!(
            "{profile}: offered 95 %, delivered {:.1} Mbit/s; release error ms p50 {} p99 {} max {}; drops {}",
            n as f64 * 1500.0 * 8.0 / secs / 1e6,
            e["p50"],
            e["p99"],
            e["max"],
            stats["uplink"]["pkts_dropped_queue"]
        );
        if let Some(p) = stats.get("pcap") {
            println!("pcap: {p}");
        }
    }
}
