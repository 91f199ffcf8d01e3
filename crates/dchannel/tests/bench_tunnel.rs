//! Throughput and added latency of the client/gateway pair over plain veth
//! (no emulation), encrypted (the default) and `--insecure`, with and without
//! TUN offload, in the same run.
//! Not a pass/fail test: run it explicitly and read the numbers:
//!
//! cargo test --release -p dchannel --test bench_tunnel -- --ignored --nocapture
//!
//! With `DCH_WIREGUARD_GO=/path/to/wireguard-go` it also measures wireguard-go
//! (userspace WireGuard, built by you beside the project: docs/benchmarks.md) on
//! the same veth path in the same run: the same iperf3 and ping, through a
//! WireGuard tunnel between ue and gw instead of the dchannel pair.

mod common;

use common::*;
use dchannel_crypto::PrivateKey;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};

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

/// The pings go to the gateway's tunnel address (as over plain veth to the
/// gateway, and as with wireguard-go): one of its own addresses, which a
/// gateway refuses to devices unless allowed (dchannel_core::egress).
const PING_GATEWAY: [&str; 2] = ["--egress-allow", "198.19.0.1"];

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

/// One mode's figures (see `Figures`).
fn measure(t: &Topo, policy: &str, extra: &[&str], secs: u32) -> Figures {
    let pk = |s: &serde_json::Value| {
        s["channels"]["hbc"]["tx_pkts"].as_u64().unwrap()
            + s["channels"]["llc"]["tx_pkts"].as_u64().unwrap()
    };
    let pids = |a: &Agents| [a.client.as_ref(), a.gateway.as_ref()].map(|c| c.unwrap().id());
    let mut a = t.start(policy, extra);
    let (up, up_cpu) = with_cpu(&pids(&a), || iperf(t, false, secs));
    let (ue, _) = a.stop();
    let up_pps = pk(&ue) as f64 / f64::from(secs);
    let mut a = t.start(policy, extra);
    let (down, down_cpu) = with_cpu(&pids(&a), || iperf(t, true, secs));
    let (_, gw) = a.stop();
    let down_pps = pk(&gw) as f64 / f64::from(secs);
    let mut a = t.start_with(policy, extra, &PING_GATEWAY);
    let rtts = ping_us(t, "198.19.0.1", 1000);
    a.stop();
    Figures {
        up,
        down,
        up_pps,
        down_pps,
        up_cores_per_gbit: up_cpu / (up / 1e9),
        down_cores_per_gbit: down_cpu / (down / 1e9),
        rtts,
    }
}

/// What one mode measured.
struct Figures {
    /// One TCP stream's goodput, bit/s.
    up: f64,
    down: f64,
    /// Datagrams per second through the sending agent.
    up_pps: f64,
    down_pps: f64,
    /// CPU of both tunnel processes (all threads, user + system) while the stream
    /// ran, in cores, per Gbit/s of goodput.
    up_cores_per_gbit: f64,
    down_cores_per_gbit: f64,
    /// Ping round trips through the tunnel, µs.
    rtts: Vec<f64>,
}

/// Runs `f` and returns its result with the cores `pids` used meanwhile (CPU
/// seconds over wall seconds).
fn with_cpu<T>(pids: &[u32], f: impl FnOnce() -> T) -> (T, f64) {
    let cpu = || pids.iter().map(|&p| cpu_s(p)).sum::<f64>();
    let (c0, t0) = (cpu(), std::time::Instant::now());
    let r = f();
    (r, (cpu() - c0) / t0.elapsed().as_secs_f64())
}

/// One mode's ping line: RTTs over plain veth and through the tunnel, and what
/// the tunnel adds.
fn print_ping(mode: &str, plain: &[f64], tunnel: &[f64]) {
    println!(
        "{mode:31} ping plain veth p50 {:.0} us p99 {:.0} us; through the pair p50 {:.0} us p99 {:.0} us; added p50 {:.0} us p99 {:.0} us",
        pct(plain, 0.5),
        pct(plain, 0.99),
        pct(tunnel, 0.5),
        pct(tunnel, 0.99),
        pct(tunnel, 0.5) - pct(plain, 0.5),
        pct(tunnel, 0.99) - pct(plain, 0.99)
    );
}

/// wireguard-go in ue and gw (one process each, interfaces named apart, since
/// the control socket is named after the interface), configured over its UAPI
/// socket: ue 198.19.0.2 → gw 198.19.0.1 over the HBC veth, srv routed through it.
struct WireGuard {
    procs: Vec<Child>,
}

impl WireGuard {
    fn start(t: &Topo, bin: &str) -> WireGuard {
        let key = |seed: u8| {
            let mut b = [0u8; 32];
            for (i, x) in b.iter_mut().enumerate() {
                *x = seed.wrapping_mul(31).wrapping_add(i as u8 * 7);
            }
            PrivateKey::from_bytes(b)
        };
        let hex = |b: &[u8; 32]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        // gw, then ue: namespace, interface, key, tunnel address, and the UAPI
        // settings of its own and of its peer (the other end)
        let ends = [
            (
                &t.gw,
                format!("d4wg{}", t.tag),
                key(1),
                "198.19.0.1",
                "listen_port=51820\n",
                "allowed_ip=198.19.0.2/32\n".to_string(),
            ),
            (
                &t.ue,
                format!("d4wu{}", t.tag),
                key(2),
                "198.19.0.2",
                "",
                format!("endpoint={GW_HBC}:51820\nallowed_ip=0.0.0.0/0\n"),
            ),
        ];
        let mut procs = Vec::new();
        for (ns, ifname, ..) in &ends {
            let child = Command::new("ip")
                .args(["netns", "exec", ns, bin, "-f", ifname])
                .env("LOG_LEVEL", "error")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("DCH_WIREGUARD_GO runs");
            procs.push(child);
        }
        let wg = WireGuard { procs };
        let uapi = |ifname: &str, conf: String| {
            let path = format!("/var/run/wireguard/{ifname}.sock");
            let mut s = (0..100)
                .find_map(|_| {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    UnixStream::connect(&path).ok()
                })
                .unwrap_or_else(|| panic!("{path}: wireguard-go did not come up"));
            s.write_all(format!("set=1\n{conf}\n").as_bytes()).unwrap();
            // The daemon answers "errno=N" and a blank line, and keeps the
            // connection open for the next request: read up to the blank line.
            let mut reply = Vec::new();
            let mut byte = [0u8; 1];
            while !reply.ends_with(b"\n\n") && s.read(&mut byte).unwrap() == 1 {
                reply.push(byte[0]);
            }
            let reply = String::from_utf8_lossy(&reply);
            assert!(reply.contains("errno=0"), "{ifname}: {reply}");
        };
        for (i, (_, ifname, key, _, own, peer)) in ends.iter().enumerate() {
            let peer_key = ends[1 - i].2.public_key();
            uapi(
                ifname,
                format!(
                    "private_key={}\n{own}public_key={}\n{peer}",
                    hex(key.as_bytes()),
                    hex(peer_key.as_bytes())
                ),
            );
        }
        for (ns, ifname, _, addr, ..) in &ends {
            let cidr = format!("{addr}/32");
            sh(&["ip", "-n", ns, "addr", "add", &cidr, "dev", ifname]);
            sh(&["ip", "-n", ns, "link", "set", ifname, "up"]);
        }
        // each end routes the other's tunnel address into its interface
        for (i, (ns, ifname, ..)) in ends.iter().enumerate() {
            let peer_addr = format!("{}/32", ends[1 - i].3);
            sh(&["ip", "-n", ns, "route", "add", &peer_addr, "dev", ifname]);
        }
        let (ue, ifu) = (&t.ue, &ends[1].1);
        sh(&[
            "ip",
            "-n",
            ue,
            "route",
            "add",
            SRV,
            "dev",
            ifu,
            "src",
            "198.19.0.2",
        ]);
        wg
    }

    fn stop(mut self, t: &Topo) {
        for p in &mut self.procs {
            terminate(p);
        }
        // Their TUNs went with them; the route to srv did too.
        let _ = Command::new("ip")
            .args(["-n", &t.ue, "route", "del", SRV])
            .output();
    }
}

/// wireguard-go's figures on the same path (pkt/s not counted: zero).
fn measure_wireguard(t: &Topo, bin: &str, secs: u32) -> Figures {
    let wg = WireGuard::start(t, bin);
    let pids: Vec<u32> = wg.procs.iter().map(|c| c.id()).collect();
    let (up, up_cpu) = with_cpu(&pids, || iperf(t, false, secs));
    let (down, down_cpu) = with_cpu(&pids, || iperf(t, true, secs));
    let rtts = ping_us(t, "198.19.0.1", 1000);
    wg.stop(t);
    Figures {
        up,
        down,
        up_pps: 0.0,
        down_pps: 0.0,
        up_cores_per_gbit: up_cpu / (up / 1e9),
        down_cores_per_gbit: down_cpu / (down / 1e9),
        rtts,
    }
}

/// The topology, the policy (`DCH_BENCH_POLICY`, default all-hbc) and the
/// RTTs over plain veth that the tunnel's are compared with; `None` (the
/// benchmark is skipped) where namespace tests cannot run.
fn setup() -> Option<(Topo, String, Vec<f64>)> {
    if !can_run() {
        return None;
    }
    let t = Topo::new();
    let policy = std::env::var("DCH_BENCH_POLICY").unwrap_or_else(|_| "all-hbc".into());
    let plain = ping_us(&t, GW_HBC, 1000);
    Some((t, policy, plain))
}

/// Encrypted (the default) and `--insecure`, each with TUN offload (the default)
/// and without, and encrypted with busy-poll, on the same topology, same run.
#[test]
#[ignore]
fn bench_tunnel() {
    let Some((t, policy, plain)) = setup() else {
        return;
    };
    let secs = 10;
    println!("policy {policy}");
    let modes: [(&str, &[&str]); 5] = [
        ("encrypted", &[]),
        (
            "encrypted, --busy-poll-us 3000",
            &["--busy-poll-us", "3000"],
        ),
        ("encrypted, --tun-offload off", &["--tun-offload", "off"]),
        ("insecure", &["--insecure"]),
        (
            "insecure, --tun-offload off",
            &["--insecure", "--tun-offload", "off"],
        ),
    ];
    for (mode, extra) in modes {
        let f = measure(&t, &policy, extra, secs);
        println!(
            "{mode:31} uplink   single TCP stream: {:.2} Gbit/s, {:.0} kpkt/s through the client agent, {:.2} cores per Gbit/s (both agents)",
            f.up / 1e9,
            f.up_pps / 1e3,
            f.up_cores_per_gbit
        );
        println!(
            "{mode:31} downlink single TCP stream: {:.2} Gbit/s, {:.0} kpkt/s through the gateway agent, {:.2} cores per Gbit/s (both agents)",
            f.down / 1e9,
            f.down_pps / 1e3,
            f.down_cores_per_gbit
        );
        print_ping(mode, &plain, &f.rtts);
    }
    if let Ok(bin) = std::env::var("DCH_WIREGUARD_GO") {
        let f = measure_wireguard(&t, &bin, secs);
        println!(
            "{:31} uplink   single TCP stream: {:.2} Gbit/s, {:.2} cores per Gbit/s; downlink {:.2} Gbit/s, {:.2} cores per Gbit/s (both daemons)",
            "wireguard-go",
            f.up / 1e9,
            f.up_cores_per_gbit,
            f.down / 1e9,
            f.down_cores_per_gbit
        );
        print_ping("wireguard-go", &plain, &f.rtts);
    }
}

/// Only the added ping latency, for each agent argument set in
/// `DCH_BENCH_ARGS` (sets separated by `;`, arguments by spaces; an empty set
/// is the default agents), e.g.
/// `DCH_BENCH_ARGS=';--busy-poll-us 200' cargo test --release -p dchannel
/// --test bench_tunnel ping_only -- --ignored --nocapture`.
#[test]
#[ignore]
fn ping_only() {
    let Some((t, policy, plain)) = setup() else {
        return;
    };
    let sets = std::env::var("DCH_BENCH_ARGS").unwrap_or_default();
    for set in sets.split(';') {
        let extra: Vec<&str> = set.split_whitespace().collect();
        let mut a = t.start_with(&policy, &extra, &PING_GATEWAY);
        let tunnel = ping_us(&t, "198.19.0.1", 1000);
        a.stop();
        let name = if set.trim().is_empty() {
            "default"
        } else {
            set.trim()
        };
        print_ping(name, &plain, &tunnel);
    }
}
