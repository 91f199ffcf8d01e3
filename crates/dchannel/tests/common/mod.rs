//! Namespace topology for the agent tests: `ue` and `gw` joined by two plain
//! veth links (HBC and LLC), `srv` behind `gw`. Names are unique per run
//! (pid + counter) and everything is removed on drop, also on test failure.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_dchannel");
pub const TOKEN: &str = "00112233aabbccdd";
pub const SRV: &str = "198.18.3.2";
pub const GW_HBC: &str = "198.18.1.1";
pub const GW_LLC: &str = "198.18.2.1";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// True when namespace tests can run (root, `ip` present); prints why not.
pub fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: namespace tests need root");
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipping: iproute2 `ip` not found");
        return false;
    }
    true
}

pub fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct Topo {
    pub tag: String,
    pub ue: String,
    pub gw: String,
    pub srv: String,
    /// Interface names in ue (HBC, LLC) and gw (HBC, LLC, towards srv).
    pub ue_hbc: String,
    pub ue_llc: String,
    pub dir: PathBuf,
}

impl Topo {
    pub fn new() -> Topo {
        let tag = format!(
            "{:x}{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let t = Topo {
            ue: format!("d4u{tag}"),
            gw: format!("d4g{tag}"),
            srv: format!("d4s{tag}"),
            ue_hbc: format!("d4h{tag}"),
            ue_llc: format!("d4l{tag}"),
            dir: std::env::temp_dir().join(format!("dch4-{tag}")),
            tag,
        };
        std::fs::create_dir_all(&t.dir).unwrap();
        for ns in [&t.ue, &t.gw, &t.srv] {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let tag = &t.tag;
        let links = [
            (
                format!("d4h{tag}"),
                &t.ue,
                format!("d4H{tag}"),
                &t.gw,
                "198.18.1.2/30",
                "198.18.1.1/30",
            ),
            (
                format!("d4l{tag}"),
                &t.ue,
                format!("d4L{tag}"),
                &t.gw,
                "198.18.2.2/30",
                "198.18.2.1/30",
            ),
            (
                format!("d4s{tag}"),
                &t.gw,
                format!("d4S{tag}"),
                &t.srv,
                "198.18.3.1/30",
                "198.18.3.2/30",
            ),
        ];
        for (a, ans, b, bns, aa, ba) in &links {
            sh(&["ip", "link", "add", a, "type", "veth", "peer", "name", b]);
            sh(&["ip", "link", "set", a, "netns", ans]);
            sh(&["ip", "link", "set", b, "netns", bns]);
            sh(&["ip", "-n", ans, "addr", "add", aa, "dev", a]);
            sh(&["ip", "-n", bns, "addr", "add", ba, "dev", b]);
            sh(&["ip", "-n", ans, "link", "set", a, "up"]);
            sh(&["ip", "-n", bns, "link", "set", b, "up"]);
        }
        sh(&[
            "ip",
            "netns",
            "exec",
            &t.gw,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ]);
        sh(&[
            "ip",
            "-n",
            &t.srv,
            "route",
            "add",
            "198.19.0.0/16",
            "via",
            "198.18.3.1",
        ]);
        t
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Starts gateway and client with `policy` and `extra` flags, waits for
    /// READY from both and installs the routes (the caller's job per contract).
    pub fn start(&self, policy: &str, extra: &[&str]) -> Agents {
        let tag = &self.tag;
        let gw_tun = format!("d4G{tag}");
        let ue_tun = format!("d4U{tag}");
        let gw_stats = self.path("gw.json");
        let ue_stats = self.path("ue.json");
        let gw_log = self.path("gw.csv");
        let ue_log = self.path("ue.csv");
        let gw_arr = self.path("gw-arrivals.csv");
        let ue_arr = self.path("ue-arrivals.csv");
        let mut g: Vec<String> = [
            "ip",
            "netns",
            "exec",
            &self.gw,
            BIN,
            "gateway",
            "--tun",
            &gw_tun,
            "--tun-addr",
            "198.19.0.1/32",
            "--listen-hbc",
            "198.18.1.1:4000",
            "--listen-llc",
            "198.18.2.1:4001",
            "--client",
            &format!("198.19.0.2={TOKEN}"),
            "--policy",
            policy,
            "--llc-mbit",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        g.extend(["--stats-json".into(), gw_stats.display().to_string()]);
        g.extend(["--decision-log".into(), gw_log.display().to_string()]);
        g.extend(["--arrival-log".into(), gw_arr.display().to_string()]);
        g.extend(extra.iter().map(|s| s.to_string()));
        let gateway = spawn_ready(&g);
        let mut c: Vec<String> = [
            "ip",
            "netns",
            "exec",
            &self.ue,
            BIN,
            "client",
            "--tun",
            &ue_tun,
            "--tun-addr",
            "198.19.0.2/32",
            "--hbc-dev",
            &self.ue_hbc,
            "--hbc-gateway",
            "198.18.1.1:4000",
            "--llc-dev",
            &self.ue_llc,
            "--llc-gateway",
            "198.18.2.1:4001",
            "--token",
            TOKEN,
            "--policy",
            policy,
            "--llc-mbit",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        c.extend(["--stats-json".into(), ue_stats.display().to_string()]);
        c.extend(["--decision-log".into(), ue_log.display().to_string()]);
        c.extend(["--arrival-log".into(), ue_arr.display().to_string()]);
        c.extend(extra.iter().map(|s| s.to_string()));
        let client = spawn_ready(&c);
        sh(&[
            "ip",
            "-n",
            &self.gw,
            "route",
            "add",
            "198.19.0.2/32",
            "dev",
            &gw_tun,
        ]);
        sh(&[
            "ip", "-n", &self.ue, "route", "add", "default", "dev", &ue_tun,
        ]);
        Agents {
            gateway: Some(gateway),
            client: Some(client),
            gw_stats,
            ue_stats,
            gw_log,
            ue_log,
            gw_arr,
            ue_arr,
        }
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ns in [&self.ue, &self.gw, &self.srv] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Spawns `argv`, waits (10 s at most) for the line READY on its stdout.
pub fn spawn_ready(argv: &[String]) -> Child {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .spawn()
        .expect("spawn agent");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l == "READY" => child,
        other => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("agent {:?} did not print READY: {other:?}", argv.join(" "));
        }
    }
}

pub struct Agents {
    pub gateway: Option<Child>,
    pub client: Option<Child>,
    pub gw_stats: PathBuf,
    pub ue_stats: PathBuf,
    pub gw_log: PathBuf,
    pub ue_log: PathBuf,
    pub gw_arr: PathBuf,
    pub ue_arr: PathBuf,
}

fn term(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    for _ in 0..100 {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait().unwrap()
}

impl Agents {
    /// SIGTERM both; asserts exit 0; returns (client stats, gateway stats).
    pub fn stop(&mut self) -> (serde_json::Value, serde_json::Value) {
        let c = term(self.client.as_mut().unwrap());
        let g = term(self.gateway.as_mut().unwrap());
        self.client = None;
        self.gateway = None;
        assert!(c.success(), "client exit {c:?}");
        assert!(g.success(), "gateway exit {g:?}");
        (read_json(&self.ue_stats), read_json(&self.gw_stats))
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for c in [self.client.as_mut(), self.gateway.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// Runs `f` on a thread that has entered network namespace `ns`; sockets it
/// creates live in that namespace.
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: setns on a valid namespace fd affects only this thread.
        let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}
