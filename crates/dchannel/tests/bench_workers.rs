//! Aggregate encrypted throughput and gateway CPU with 1, 2, 4 and 8 devices
//! transferring at once, gateway `--threads 1` and `--threads 2` (issue 37).
//! Not a pass/fail test: run it explicitly and read the numbers:
//!
//! cargo test --release -p dchannel --test bench_workers -- --ignored --nocapture
//!
//! One iperf3 TCP stream per device (srv → device with `-R`, the gateway
//! sealing: downlink; device → srv: uplink), all at once, policy all-hbc,
//! `DCH_BENCH_SECS` seconds each (default 5). CPU is the gateway process's
//! user + system time from /proc/PID/stat over the same interval (so other
//! load on the machine does not count, only what the gateway itself spent),
//! reported in cores and in cores per Gbit/s of goodput; the devices' agents
//! and iperf3 run on the same machine and compete for its cores.

mod common;

use common::fleet::Fleet;
use common::*;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Goodputs (bit/s) of one iperf3 stream per device `0..n`, all at once.
fn iperf_all(f: &Fleet, n: usize, reverse: bool, secs: u32) -> Vec<f64> {
    let servers: Vec<_> = (0..n)
        .map(|k| {
            let port = (5400 + k).to_string();
            Command::new("ip")
                .args(["netns", "exec", &f.srv, "iperf3", "-s", "-1", "-p", &port])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let clients: Vec<_> = (0..n)
        .map(|k| {
            let (port, secs) = ((5400 + k).to_string(), secs.to_string());
            let mut args = vec![
                "netns",
                "exec",
                &f.devices[k],
                "iperf3",
                "-c",
                SRV,
                "-p",
                &port,
                "-J",
                "-t",
                &secs,
            ];
            if reverse {
                args.push("-R");
            }
            Command::new("ip")
                .args(&args)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let rates = clients
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
            v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
        })
        .collect();
    for mut s in servers {
        let _ = s.wait();
    }
    rates
}

#[test]
#[ignore]
fn bench_workers() {
    if !can_run() {
        return;
    }
    let secs: u32 = std::env::var("DCH_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let f = Fleet::new(8);
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average before: {}", load().trim());
    println!(
        "threads devices direction  aggregate_gbit  per_device_gbit(min..max)  gw_cores  gw_cores_per_gbit  device_agents_cores"
    );
    for threads in ["1", "2"] {
        let mut a = f.start("all-hbc", &["--threads", threads]);
        let pid = a.gateway_pid();
        let devs: Vec<u32> = a.devices.iter().map(|c| c.id()).collect();
        let dev_cpu = || devs.iter().map(|&p| cpu_s(p)).sum::<f64>();
        for n in [1, 2, 4, 8] {
            for (dir, reverse) in [("down", true), ("up", false)] {
                let (c0, d0, t0) = (cpu_s(pid), dev_cpu(), Instant::now());
                let rates = iperf_all(&f, n, reverse, secs);
                let wall = t0.elapsed().as_secs_f64();
                let cores = (cpu_s(pid) - c0) / wall;
                let dev_cores = (dev_cpu() - d0) / wall;
                let total: f64 = rates.iter().sum::<f64>() / 1e9;
                let (lo, hi) = rates.iter().fold((f64::MAX, 0.0f64), |(lo, hi), r| {
                    (lo.min(r / 1e9), hi.max(r / 1e9))
                });
                println!(
                    "{threads:7} {n:7} {dir:9}  {total:14.2}  {lo:10.2}..{hi:<10.2}      {cores:8.2}  {:17.3}  {dev_cores:19.2}",
                    cores / total
                );
            }
        }
        a.stop();
    }
    println!("load average after: {}", load().trim());
}
