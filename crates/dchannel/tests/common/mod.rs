//! Namespace topology for the agent tests: `ue` and `gw` joined by two plain
//! veth links (HBC and LLC), `srv` behind `gw`. Names are unique per run
//! (pid + counter) and everything is removed on drop, also on test failure.
//! The agents run encrypted with a fresh key pair per topology (made with
//! `dchannel genkey` / `dchannel pubkey`); `--insecure` among the extra flags
//! runs the plaintext token mode instead.
#![allow(dead_code)]

// Each test binary uses its own subset of the shared harness.
#[allow(unused_imports)]
pub use dchannel_base::testing::{self, in_ns, pattern, sh, spawn_ready, terminate, unique_tag};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

pub mod fleet;

pub const BIN: &str = env!("CARGO_BIN_EXE_dchannel");
pub const TOKEN: &str = "00112233aabbccdd";
pub const SRV: &str = "198.18.3.2";
pub const GW_HBC: &str = "198.18.1.1";
pub const GW_LLC: &str = "198.18.2.1";
/// A client command line that parses but is never started (for the tests of
/// refused flags): made-up devices and gateways.
pub const CLIENT_ARGV_UNSTARTED: [&str; 13] = [
    "client",
    "--tun",
    "x",
    "--tun-addr",
    "198.19.0.2/32",
    "--hbc-dev",
    "a",
    "--hbc-gateway",
    "198.18.1.1:1",
    "--llc-dev",
    "b",
    "--llc-gateway",
    "198.18.2.1:1",
];

/// A gateway command line that parses but is never started (no key given:
/// the run stops before touching the system), for the tests of refused flags.
pub const GATEWAY_ARGV_UNSTARTED: [&str; 9] = [
    "gateway",
    "--tun",
    "x",
    "--tun-addr",
    "198.19.0.1/32",
    "--listen-hbc",
    "127.0.0.1:1",
    "--listen-llc",
    "127.0.0.1:2",
];

/// True when namespace tests can run (root, `ip`, /dev/net/tun); prints why not.
pub fn can_run() -> bool {
    testing::can_run(true)
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
    /// The gateway's public key (base64).
    pub gw_public: String,
}

/// `dchannel ARGS` must succeed; its stdout, trimmed.
pub fn dchannel(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().unwrap();
    assert!(o.status.success(), "dchannel {args:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

impl Topo {
    pub fn new() -> Topo {
        let tag = unique_tag();
        let mut t = Topo {
            ue: format!("d4u{tag}"),
            gw: format!("d4g{tag}"),
            srv: format!("d4s{tag}"),
            ue_hbc: format!("d4h{tag}"),
            ue_llc: format!("d4l{tag}"),
            dir: std::env::temp_dir().join(format!("dch4-{tag}")),
            gw_public: String::new(),
            tag,
        };
        std::fs::create_dir_all(&t.dir).unwrap();
        let mut public = Vec::new();
        for who in ["gw", "ue"] {
            let key = t.path(&format!("{who}.key"));
            dchannel(&["genkey", "--out", key.to_str().unwrap()]);
            public.push(dchannel(&["pubkey", key.to_str().unwrap()]));
        }
        t.gw_public = public[0].clone();
        std::fs::write(
            t.path("devices.toml"),
            format!(
                "[[device]]\nname = \"ue\"\npublic_key = \"{}\"\naddress = \"198.19.0.2\"\n",
                public[1]
            ),
        )
        .unwrap();
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
        route_tunnels_through_gw(&t.gw, &t.srv);
        t
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Starts gateway and client with `policy` and `extra` flags, waits for
    /// READY from both and installs the routes (the caller's job per contract).
    pub fn start(&self, policy: &str, extra: &[&str]) -> Agents {
        self.start_with(policy, extra, &[])
    }

    /// [`Topo::start`] with `gateway_only` flags for the gateway besides `extra`
    /// (e.g. `--egress-allow`, which the client does not take).
    pub fn start_with(&self, policy: &str, extra: &[&str], gateway_only: &[&str]) -> Agents {
        self.start_argv(
            &self.gateway_argv(policy, &[extra, gateway_only].concat()),
            &self.client_argv(policy, extra),
        )
    }

    /// Starts the gateway and the client with these command lines (the
    /// output files are the ones [`Topo::gateway_argv`] and
    /// [`Topo::client_argv`] name), waits for READY from both and installs
    /// the routes.
    pub fn start_argv(&self, gateway: &[String], client: &[String]) -> Agents {
        let gateway = spawn_ready(gateway);
        let client = spawn_ready(client);
        self.route_gateway();
        self.route_client();
        Agents {
            gateway: Some(gateway),
            client: Some(client),
            gw_stats: self.path("gw.json"),
            ue_stats: self.path("ue.json"),
            gw_log: self.path("gw.csv"),
            ue_log: self.path("ue.csv"),
            gw_arr: self.path("gw-arrivals.csv"),
            ue_arr: self.path("ue-arrivals.csv"),
        }
    }

    /// The gateway's TUN (in gw) and the client's (in ue).
    pub fn tuns(&self) -> (String, String) {
        (format!("d4G{}", self.tag), format!("d4U{}", self.tag))
    }

    /// `ip netns exec gw dchannel gateway ...` with `policy` and `extra` flags.
    pub fn gateway_argv(&self, policy: &str, extra: &[&str]) -> Vec<String> {
        let client_token = format!("198.19.0.2={TOKEN}");
        let (gw_key, devices) = (
            self.path("gw.key").display().to_string(),
            self.path("devices.toml").display().to_string(),
        );
        let tun = self.tuns().0;
        let mut flags = vec![
            ("--tun", tun.as_str()),
            ("--tun-addr", "198.19.0.1/32"),
            ("--listen-hbc", "198.18.1.1:4000"),
            ("--listen-llc", "198.18.2.1:4001"),
        ];
        if extra.contains(&"--insecure") {
            flags.push(("--client", &client_token));
        } else {
            flags.extend([("--key", gw_key.as_str()), ("--devices", &devices)]);
        }
        self.agent_argv(&self.gw, "gateway", "gw", &flags, policy, extra)
    }

    /// `ip netns exec ue dchannel client ...` with `policy` and `extra` flags.
    pub fn client_argv(&self, policy: &str, extra: &[&str]) -> Vec<String> {
        let ue_key = self.path("ue.key").display().to_string();
        let tun = self.tuns().1;
        let mut flags = vec![
            ("--tun", tun.as_str()),
            ("--tun-addr", "198.19.0.2/32"),
            ("--hbc-dev", &self.ue_hbc),
            ("--hbc-gateway", "198.18.1.1:4000"),
            ("--llc-dev", &self.ue_llc),
            ("--llc-gateway", "198.18.2.1:4001"),
        ];
        if extra.contains(&"--insecure") {
            flags.push(("--token", TOKEN));
        } else {
            flags.extend([
                ("--key", ue_key.as_str()),
                ("--gateway-key", &self.gw_public),
            ]);
        }
        self.agent_argv(&self.ue, "client", "ue", &flags, policy, extra)
    }

    /// `ip netns exec NS dchannel ROLE FLAGS... --policy POLICY --llc-mbit 2`,
    /// the output files `WHO.json`, `WHO.csv` and `WHO-arrivals.csv`, then
    /// `extra`.
    fn agent_argv(
        &self,
        ns: &str,
        role: &str,
        who: &str,
        flags: &[(&str, &str)],
        policy: &str,
        extra: &[&str],
    ) -> Vec<String> {
        let mut argv: Vec<String> = ["ip", "netns", "exec", ns, BIN, role]
            .map(String::from)
            .to_vec();
        let outputs = [
            ("--stats-json", format!("{who}.json")),
            ("--decision-log", format!("{who}.csv")),
            ("--arrival-log", format!("{who}-arrivals.csv")),
        ]
        .map(|(flag, file)| (flag, self.path(&file).display().to_string()));
        let pairs = flags
            .iter()
            .copied()
            .chain([("--policy", policy), ("--llc-mbit", "2")])
            .chain(outputs.iter().map(|(flag, path)| (*flag, path.as_str())));
        for (flag, value) in pairs {
            argv.extend([flag.to_string(), value.to_string()]);
        }
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }

    /// Sends `data` over TCP from srv (port `port`) to ue through the tunnel;
    /// returns what ue received.
    pub fn download(&self, data: Vec<u8>, port: u16) -> Vec<u8> {
        self.download_paced(None, data, port, std::time::Duration::ZERO)
    }

    /// [`Topo::download`] to ue's tunnel address `from` (`None`: the one
    /// routing picks), written in 64 KiB pieces `gap` apart (a transfer that
    /// is still running while a test changes something).
    pub fn download_paced(
        &self,
        from: Option<std::net::IpAddr>,
        data: Vec<u8>,
        port: u16,
        gap: std::time::Duration,
    ) -> Vec<u8> {
        use std::io::{Read, Write};
        use std::net::{SocketAddr, TcpListener, TcpStream};
        let l = in_ns(&self.srv, move || TcpListener::bind((SRV, port)).unwrap())
            .join()
            .unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            for piece in data.chunks(64 << 10) {
                s.write_all(piece).unwrap();
                if !gap.is_zero() {
                    std::thread::sleep(gap);
                }
            }
        });
        let got = in_ns(&self.ue, move || {
            let to: SocketAddr = (SRV.parse::<std::net::IpAddr>().unwrap(), port).into();
            let mut s = match from {
                None => TcpStream::connect(to).unwrap(),
                Some(ip) => {
                    let sock =
                        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                            .unwrap();
                    sock.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
                    sock.connect(&to.into()).unwrap();
                    sock.into()
                }
            };
            s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
                .unwrap();
            let mut v = Vec::new();
            s.read_to_end(&mut v).unwrap();
            v
        })
        .join()
        .unwrap();
        server.join().unwrap();
        got
    }

    /// gw routes the client's tunnel address into its TUN (again after a restart).
    pub fn route_gateway(&self) {
        route_into_tun(&self.gw, "198.19.0.2/32", &self.tuns().0);
    }

    /// ue's default route into its TUN (again after a restart).
    pub fn route_client(&self) {
        route_into_tun(&self.ue, "default", &self.tuns().1);
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        remove_namespaces([&self.ue, &self.gw, &self.srv], &self.dir);
    }
}

/// Namespace `ns` routes `prefix` into the agent's TUN `tun`; `replace`, so that it
/// serves again after a restart, which made the TUN anew.
pub fn route_into_tun(ns: &str, prefix: &str, tun: &str) {
    sh(&["ip", "-n", ns, "route", "replace", prefix, "dev", tun]);
}

/// `gw` forwards, and `srv` (at 198.18.3.2, gw at 198.18.3.1) reaches the
/// tunnel addresses (198.19.0.0/16) through it.
pub fn route_tunnels_through_gw(gw: &str, srv: &str) {
    sh(&[
        "ip",
        "netns",
        "exec",
        gw,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ]);
    sh(&[
        "ip",
        "-n",
        srv,
        "route",
        "add",
        "198.19.0.0/16",
        "via",
        "198.18.3.1",
    ]);
}

/// Deletes namespaces `names` and directory `dir` (a topology's teardown;
/// what is already gone is no error).
pub fn remove_namespaces<'a>(names: impl IntoIterator<Item = &'a String>, dir: &Path) {
    for ns in names {
        let _ = Command::new("ip").args(["netns", "del", ns]).output();
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Kills and reaps `children` (agents left running by a failed test).
pub fn kill_all<'a>(children: impl IntoIterator<Item = &'a mut Child>) {
    for c in children {
        let _ = c.kill();
        let _ = c.wait();
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

impl Agents {
    /// SIGTERM both; asserts exit 0; returns (client stats, gateway stats).
    pub fn stop(&mut self) -> (serde_json::Value, serde_json::Value) {
        let c = terminate(self.client.as_mut().unwrap());
        let g = terminate(self.gateway.as_mut().unwrap());
        self.client = None;
        self.gateway = None;
        assert!(c.success(), "client exit {c:?}");
        assert!(g.success(), "gateway exit {g:?}");
        (read_json(&self.ue_stats), read_json(&self.gw_stats))
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        kill_all(
            [self.client.as_mut(), self.gateway.as_mut()]
                .into_iter()
                .flatten(),
        );
    }
}

pub fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// CPU seconds (user + system, all threads) `pid` has used so far (proc(5):
/// utime and stime are fields 14 and 15, after the parenthesised command).
pub fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    // SAFETY: sysconf with a valid name has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (field(14).unwrap_or(0.0) + field(15).unwrap_or(0.0)) / hz
}

/// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
pub fn status_kib(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{key} not in /proc/{pid}/status"))
}
