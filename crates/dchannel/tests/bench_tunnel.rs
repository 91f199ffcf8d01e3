//! Throughput and added latency of the client/gateway pair over plain veth
//! (no emulation), encrypted (the default) and `--insecure`, with and without
//! TUN offload, in the same run.
//! Not a pass/fail test: run it explicitly and read the numbers:
//!
//! cargo test --release -p dchannel --test bench_tunnel -- --ignored --nocapture

mod common;

use common::*;
use std::process::{Command, Stdio};

fn iperf(t: &Topo, reverse: bool, secs: u32) -> f64 {
    let mut server = Command::new("ip")
        .args(["netns", "exec", &t.srv, "iperf3", "-s", "-1", "-p", "5201"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut args = vec![
        "netns", "exec", &t.ue, "iperf3", "-c", SRV, "-p", "5201", "-J",
    ];
    let secs = secs.to_string();
    args.extend(["-t", &secs]);
    if reverse {
        args.push("-R");
    }
    let out = Command::new("ip").args(&args).output().unwrap();
    let _ = server.wait();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap()
}

/// RTTs (µs) of `n` pings from ue to `dst`, 2 ms apart.
fn ping_us(t: &Topo, dst: &str, n: u32) -> Vec<f64> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.ue,
            "ping",
            "-c",
            &n.to_string(),
            "-i",
            "0.002",
            dst,
        ])
        .output()
        .unwrap();
    let mut v: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|s| s.trim_end_matches(" ms").parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn pct(v: &[f64], p: f64) -> f64 {
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// One mode's figures: (uplink bit/s, downlink bit/s, uplink pkt/s, downlink pkt/s, ping RTTs).
fn measure(t: &Topo, policy: &str, extra: &[&str], secs: u32) -> (f64, f64, f64, f64, Vec<f64>) {
    let pk = |s: &serde_json::Value| {
        s["channels"]["hbc"]["tx_pkts"].as_u64().unwrap()
            + s["channels"]["llc"]["tx_pkts"].as_u64().unwrap()
    };
    let mut a = t.start(policy, extra);
    let up = iperf(t, false, secs);
    let (ue, _) = a.stop();
    let up_pps = pk(&ue) as f64 / f64::from(secs);
    let mut a = t.start(policy, extra);
    let down = iperf(t, true, secs);
    let (_, gw) = a.stop();
    let down_pps = pk(&gw) as f64 / f64::from(secs);
    let mut a = t.start(policy, extra);
    let tunnel = ping_us(t, "198.19.0.1", 1000);
    a.stop();
    (up, down, up_pps, down_pps, tunnel)
}

/// Encrypted (the default) and `--insecure`, each with TUN offload (the default)
/// and without, on the same topology, same run.
#[test]
#[ignore]
fn bench_tunnel() {
    if !can_run() {
        return;
    }
    let t = Topo::new();
    let policy = std::env::var("DCH_BENCH_POLICY").unwrap_or_else(|_| "all-hbc".into());
    let secs = 10;
    let plain = ping_us(&t, GW_HBC, 1000);
    println!("policy {policy}");
    let modes: [(&str, &[&str]); 4] = [
        ("encrypted", &[]),
        ("encrypted, --tun-offload off", &["--tun-offload", "off"]),
        ("insecure", &["--insecure"]),
        (
            "insecure, --tun-offload off",
            &["--insecure", "--tun-offload", "off"],
        ),
    ];
    for (mode, extra) in modes {
        let (up, down, up_pps, down_pps, tunnel) = measure(&t, &policy, extra, secs);
        println!(
            "{mode:28} uplink   single TCP stream: {:.2} Gbit/s, {:.0} kpkt/s through the client agent",
            up / 1e9,
            up_pps / 1e3
        );
        println!(
            "{mode:28} downlink single TCP stream: {:.2} Gbit/s, {:.0} kpkt/s through the gateway agent",
            down / 1e9,
            down_pps / 1e3
        );
        println!(
            "{mode:28} ping plain veth p50 {:.0} us p99 {:.0} us; through the pair p50 {:.0} us p99 {:.0} us; added p50 {:.0} us p99 {:.0} us",
            pct(&plain, 0.5),
            pct(&plain, 0.99),
            pct(&tunnel, 0.5),
            pct(&tunnel, 0.99),
            pct(&tunnel, 0.5) - pct(&plain, 0.5),
            pct(&tunnel, 0.99) - pct(&plain, 0.99)
        );
    }
}
