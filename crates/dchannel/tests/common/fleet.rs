//! A gateway with several devices in network namespaces: `gw` and `srv` as in
//! [`super::Topo`], and `n` device namespaces, each joined to `gw` by its own
//! two veth links (HBC, LLC), whose `gw` ends sit in one bridge per channel
//! holding the gateway's addresses (198.18.1.1/24, 198.18.2.1/24). Device `k`
//! has 198.18.1.(10+k) and 198.18.2.(10+k) outside, tunnel address
//! 198.19.0.(10+k), and its own key; the devices file lists them in order
//! (device `k` is the gateway's peer `k`). Everything is removed on drop.

use super::{dchannel, route_into_tun, sh, spawn_ready, terminate, unique_tag, BIN, SRV};
use std::path::PathBuf;
use std::process::Child;

pub struct Fleet {
    pub tag: String,
    pub gw: String,
    pub srv: String,
    /// The device namespaces, in peer order.
    pub devices: Vec<String>,
    pub dir: PathBuf,
    gw_public: String,
}

/// Device `k`'s tunnel address.
pub fn device_addr(k: usize) -> String {
    format!("198.19.0.{}", 10 + k)
}

impl Fleet {
    pub fn new(n: usize) -> Fleet {
        assert!(n <= 100, "addresses 198.18.x.(10+k) hold 100 devices");
        let tag = unique_tag();
        let f = Fleet {
            gw: format!("d5g{tag}"),
            srv: format!("d5s{tag}"),
            devices: (0..n).map(|k| format!("d5d{k}x{tag}")).collect(),
            dir: std::env::temp_dir().join(format!("dch5-{tag}")),
            gw_public: String::new(),
            tag,
        };
        std::fs::create_dir_all(&f.dir).unwrap();
        let mut f = f;
        let key = |who: &str| {
            let path = f.dir.join(format!("{who}.key"));
            dchannel(&["genkey", "--out", path.to_str().unwrap()]);
            dchannel(&["pubkey", path.to_str().unwrap()])
        };
        f.gw_public = key("gw");
        let devices_toml: String = (0..n)
            .map(|k| {
                format!(
                    "[[device]]\nname = \"dev{k}\"\npublic_key = \"{}\"\naddress = \"{}\"\n",
                    key(&format!("dev{k}")),
                    device_addr(k)
                )
            })
            .collect();
        std::fs::write(f.dir.join("devices.toml"), devices_toml).unwrap();
        for ns in [&f.gw, &f.srv].into_iter().chain(&f.devices) {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let (gw, tag) = (&f.gw, &f.tag);
        for (br, addr) in [("h", "198.18.1.1/24"), ("l", "198.18.2.1/24")] {
            let br = format!("d5b{br}{tag}");
            sh(&["ip", "-n", gw, "link", "add", &br, "type", "bridge"]);
            sh(&["ip", "-n", gw, "addr", "add", addr, "dev", &br]);
            sh(&["ip", "-n", gw, "link", "set", &br, "up"]);
        }
        for (k, ns) in f.devices.iter().enumerate() {
            for (ch, net) in [("h", 1), ("l", 2)] {
                let (dev_end, gw_end) = (format!("d5{ch}{k}x{tag}"), format!("d5{ch}{k}y{tag}"));
                sh(&[
                    "ip", "link", "add", &dev_end, "type", "veth", "peer", "name", &gw_end,
                ]);
                sh(&["ip", "link", "set", &dev_end, "netns", ns]);
                sh(&["ip", "link", "set", &gw_end, "netns", gw]);
                let addr = format!("198.18.{net}.{}/24", 10 + k);
                sh(&["ip", "-n", ns, "addr", "add", &addr, "dev", &dev_end]);
                sh(&["ip", "-n", ns, "link", "set", &dev_end, "up"]);
                let br = format!("d5b{ch}{tag}");
                sh(&["ip", "-n", gw, "link", "set", &gw_end, "master", &br]);
                sh(&["ip", "-n", gw, "link", "set", &gw_end, "up"]);
            }
        }
        let (a, b) = (format!("d5v{tag}"), format!("d5w{tag}"));
        sh(&["ip", "link", "add", &a, "type", "veth", "peer", "name", &b]);
        sh(&["ip", "link", "set", &a, "netns", gw]);
        sh(&["ip", "link", "set", &b, "netns", &f.srv]);
        sh(&["ip", "-n", gw, "addr", "add", "198.18.3.1/30", "dev", &a]);
        sh(&[
            "ip",
            "-n",
            &f.srv,
            "addr",
            "add",
            "198.18.3.2/30",
            "dev",
            &b,
        ]);
        sh(&["ip", "-n", gw, "link", "set", &a, "up"]);
        sh(&["ip", "-n", &f.srv, "link", "set", &b, "up"]);
        super::route_tunnels_through_gw(gw, &f.srv);
        f
    }

    /// The gateway with `policy` and `extra` flags, then every device; waits
    /// for READY from each and installs the routes.
    pub fn start(&self, policy: &str, extra: &[&str]) -> FleetAgents {
        let s = |p: &str| self.dir.join(p).display().to_string();
        let gw_tun = format!("d5G{}", self.tag);
        let mut argv: Vec<String> = ["ip", "netns", "exec", &self.gw, BIN, "gateway"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        for (flag, v) in [
            ("--tun", gw_tun.clone()),
            ("--tun-addr", "198.19.0.1/32".into()),
            ("--listen-hbc", "198.18.1.1:4000".into()),
            ("--listen-llc", "198.18.2.1:4001".into()),
            ("--key", s("gw.key")),
            ("--devices", s("devices.toml")),
            ("--policy", policy.into()),
            ("--llc-mbit", "2".into()),
            ("--stats-json", s("gw.json")),
        ] {
            argv.extend([flag.to_string(), v]);
        }
        argv.extend(extra.iter().map(|x| x.to_string()));
        let gateway = spawn_ready(&argv);
        // every device's tunnel address (Topo's gateway routes its one client's /32)
        route_into_tun(&self.gw, "198.19.0.0/24", &gw_tun);
        let tag = &self.tag;
        let devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(k, ns)| {
                let tun = format!("d5U{k}x{tag}");
                let argv: Vec<String> = [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    BIN,
                    "client",
                    "--tun",
                    &tun,
                    "--tun-addr",
                    &format!("{}/32", device_addr(k)),
                    "--hbc-dev",
                    &format!("d5h{k}x{tag}"),
                    "--hbc-gateway",
                    "198.18.1.1:4000",
                    "--llc-dev",
                    &format!("d5l{k}x{tag}"),
                    "--llc-gateway",
                    "198.18.2.1:4001",
                    "--key",
                    &s(&format!("dev{k}.key")),
                    "--gateway-key",
                    &self.gw_public,
                    "--policy",
                    policy,
                    "--llc-mbit",
                    "2",
                ]
                .iter()
                .map(|x| x.to_string())
                .collect();
                let c = spawn_ready(&argv);
                route_into_tun(ns, "default", &tun);
                c
            })
            .collect();
        FleetAgents {
            gateway: Some(gateway),
            devices,
            gw_stats: self.dir.join("gw.json"),
        }
    }

    /// Sends `up` from device `k` to srv (port `port`) over TCP, and srv
    /// answers with `down`; returns (what srv received, what the device received).
    pub fn exchange(&self, k: usize, port: u16, up: Vec<u8>, down: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::time::Duration;
        let l = super::in_ns(&self.srv, move || TcpListener::bind((SRV, port)).unwrap())
            .join()
            .unwrap();
        let up_len = up.len();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut got = vec![0u8; up_len];
            s.read_exact(&mut got).unwrap();
            s.write_all(&down).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            got
        });
        let device = super::in_ns(&self.devices[k], move || {
            let mut s = TcpStream::connect((SRV, port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s.write_all(&up).unwrap();
            let mut v = Vec::new();
            s.read_to_end(&mut v).unwrap();
            v
        });
        let got_down = device.join().unwrap();
        (server.join().unwrap(), got_down)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        super::remove_namespaces(
            [&self.gw, &self.srv].into_iter().chain(&self.devices),
            &self.dir,
        );
    }
}

pub struct FleetAgents {
    pub gateway: Option<Child>,
    pub devices: Vec<Child>,
    pub gw_stats: PathBuf,
}

impl FleetAgents {
    /// The gateway's pid.
    pub fn gateway_pid(&self) -> u32 {
        self.gateway.as_ref().unwrap().id()
    }

    /// SIGTERM every device, then the gateway; asserts exit 0; returns the
    /// gateway's stats.
    pub fn stop(&mut self) -> serde_json::Value {
        for c in &mut self.devices {
            assert!(terminate(c).success(), "device exit");
        }
        self.devices.clear();
        let g = terminate(self.gateway.as_mut().unwrap());
        self.gateway = None;
        assert!(g.success(), "gateway exit {g:?}");
        super::read_json(&self.gw_stats)
    }
}

impl Drop for FleetAgents {
    fn drop(&mut self) {
        super::kill_all(self.devices.iter_mut().chain(self.gateway.as_mut()));
    }
}
