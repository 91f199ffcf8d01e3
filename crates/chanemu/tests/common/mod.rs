//! Test harness: two fresh namespaces joined by a running `chanemu`, removed on drop.
#![allow(dead_code)]

// Each test binary uses its own subset of the shared harness.
#[allow(unused_imports)]
pub use dchannel_base::testing::{self, in_ns, sh};

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub const ADDR_A: &str = "198.18.0.1";
pub const ADDR_B: &str = "198.18.0.2";

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Timing tests run one at a time (2-core machine).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when the prerequisites (root, /dev/net/tun, iproute2) are there; prints why not.
pub fn can_run() -> bool {
    testing::can_run(true)
}

/// `chanemu --profile … --ns-a … --dev-a … --ns-b … --dev-b …`, for the caller to add to and run.
pub fn chanemu_between(
    profile: &str,
    (ns_a, dev_a): (&str, &str),
    (ns_b, dev_b): (&str, &str),
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chanemu"));
    cmd.args([
        "--profile",
        profile,
        "--ns-a",
        ns_a,
        "--dev-a",
        dev_a,
        "--ns-b",
        ns_b,
        "--dev-b",
        dev_b,
    ]);
    cmd
}

pub struct Lab {
    pub ns_a: String,
    pub ns_b: String,
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub stats: PathBuf,
    pub log: PathBuf,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Lab {
    /// Start chanemu with `profile` (built-in or a path) and extra arguments.
    pub fn start(profile: &str, extra: &[&str]) -> Lab {
        Self::start_with(profile, extra, true)
    }

    /// As `start`; `log` = false runs without the per-packet log (benchmarks).
    pub fn start_with(profile: &str, extra: &[&str], log: bool) -> Lab {
        Self::start_in(tempfile::tempdir().unwrap(), profile, extra, log)
    }

    /// As `start_with`, keeping the stats, the log and whatever the caller put there
    /// (a profile and its traces) in `dir` for as long as the lab lives.
    pub fn start_in(dir: tempfile::TempDir, profile: &str, extra: &[&str], log: bool) -> Lab {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let tag = format!("dchce{}x{n}", std::process::id() % 100_000);
        let mut lab = Lab {
            ns_a: format!("{tag}a"),
            ns_b: format!("{tag}b"),
            child: None,
            stats: dir.path().join("stats.json"),
            log: dir.path().join("log.csv"),
            dir,
            stderr: None,
        };
        for ns in [&lab.ns_a, &lab.ns_b] {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            // no IPv6 chatter (router solicitations, MLD) on the emulated link
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
                // A new namespace copies the host's TCP buffer limits; a host tuned to
                // a 32 MiB receive buffer (seen here, 2026-11-23) let the receiver's
                // window outgrow the emulated queue, and TCP goodput over 12 Mbit/s fell
                // 6-32% short. The kernel's defaults keep the goodput tests about the
                // emulator, not the host's tuning.
                "net.ipv4.tcp_rmem=4096 131072 6291456",
                "net.ipv4.tcp_wmem=4096 16384 4194304",
            ]);
        }
        let mut child = chanemu_between(profile, (&lab.ns_a, "emu0"), (&lab.ns_b, "emu0"))
            .arg("--stats")
            .arg(&lab.stats)
            .args(if log {
                vec!["--log".into(), lab.log.clone().into_os_string()]
            } else {
                vec![]
            })
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chanemu");
        let mut err = child.stderr.take().unwrap();
        lab.stderr = Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        lab.child = Some(child);
        if line.trim() != "READY" {
            let status = lab.child.as_mut().unwrap().wait().unwrap();
            let err = lab.stderr.take().unwrap().join().unwrap();
            panic!("chanemu did not get READY ({status}): {err}");
        }
        sh(&[
            "ip",
            "-n",
            &lab.ns_a,
            "addr",
            "add",
            &format!("{ADDR_A}/30"),
            "dev",
            "emu0",
        ]);
        sh(&[
            "ip",
            "-n",
            &lab.ns_b,
            "addr",
            "add",
            &format!("{ADDR_B}/30"),
            "dev",
            "emu0",
        ]);
        lab
    }

    /// SIGTERM chanemu, check it exits 0, return its stats and the log rows.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn stop(&mut self) -> (serde_json::Value, Vec<LogRow>) {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        let err = self.stderr.take().unwrap().join().unwrap();
        assert!(status.success(), "chanemu exited {status}: {err}");
        assert!(
            err.contains("uplink:") && err.contains("downlink:"),
            "no human summary: {err}"
        );
        let stats: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&self.stats).unwrap()).unwrap();
        let log = std::fs::read_to_string(&self.log)
            .map(|l| parse_log(&l))
            .unwrap_or_default();
        (stats, log)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[derive(Debug, Clone)]
pub struct LogRow {
    pub dir: String,
    pub arrival_ms: f64,
    pub release_ms: Option<f64>,
    pub sent_ms: Option<f64>,
    pub outcome: String,
    pub size: u32,
    pub delay_ms: Option<f64>,
    pub queue: u32,
}

pub fn parse_log(text: &str) -> Vec<LogRow> {
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("dir,arrival_us,release_us,sent_us,outcome,size,delay_us,queue_pkts")
    );
    let opt = |s: &str| {
        if s.is_empty() {
            None
        } else {
            Some(s.parse::<f64>().unwrap() / 1000.0)
        }
    };
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            LogRow {
                dir: f[0].into(),
                arrival_ms: f[1].parse::<f64>().unwrap() / 1000.0,
                release_ms: opt(f[2]),
                sent_ms: opt(f[3]),
                outcome: f[4].into(),
                size: f[5].parse().unwrap(),
                delay_ms: opt(f[6]),
                queue: f[7].parse().unwrap(),
            }
        })
        .collect()
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}
