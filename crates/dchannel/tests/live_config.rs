//! A running gateway's devices change without a restart (issue 37, item 4):
//! `dchannel set` over the control socket adds a device while another one
//! transfers, and that transfer goes on byte-exact on its untouched session;
//! a revoked device's next datagram is refused (and counted) within 1 s;
//! SIGHUP reloads the devices file and the device it adds connects and
//! transfers; `dchannel show` lists both devices with their bytes; with
//! `--threads 2`, devices added and re-keyed live reach their slot's worker.
//!
//! The second device is a second client agent in the same `ue` namespace,
//! on the same two links (its own sockets, TUN `d4V..`, tunnel address
//! 198.19.0.3, a source rule sending that address's traffic into its TUN);
//! the gateway routes the whole 198.19.0.0/24 into its TUN (`--tun-route`),
//! which is also the prefix a live-added address must be inside.

mod common;

use common::*;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The gateway's flags besides the harness's: its control socket in the
/// topology's directory, the tunnel prefix routed into its TUN, metrics.
fn gateway_extra(t: &Topo) -> Vec<String> {
    let sock = t.path("gw.sock").display().to_string();
    [
        "--control-socket",
        &sock,
        "--tun-route",
        "198.19.0.0/24",
        "--metrics-addr",
        "127.0.0.1:9100",
    ]
    .map(String::from)
    .to_vec()
}

/// Starts the gateway (with [`gateway_extra`]) and the first client.
fn start(t: &Topo) -> Agents {
    start_with(t, &[])
}

/// [`start`] with more gateway flags (`--threads 2`).
fn start_with(t: &Topo, more: &[&str]) -> Agents {
    let extra = gateway_extra(t);
    let mut extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    extra.extend_from_slice(more);
    t.start_argv(
        &t.gateway_argv("dchannel", &extra),
        &t.client_argv("dchannel", &[]),
    )
}

/// `dchannel ARGS --socket <the gateway's>` (root's tools talk to the socket
/// from outside the namespaces: it is a file); exit status and output.
fn ctl(t: &Topo, args: &[&str]) -> (bool, String) {
    let o = Command::new(BIN)
        .args(args)
        .args(["--socket", t.path("gw.sock").to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text.trim().to_string())
}

/// `dchannel set` adds device ue2 (`public` key) at 198.19.0.3.
fn add_ue2(t: &Topo, public: &str) -> (bool, String) {
    ctl(
        t,
        &[
            "set",
            "--device",
            "ue2",
            "--public-key",
            public,
            "--address",
            "198.19.0.3",
        ],
    )
}

/// A new key pair in the topology's directory: (key file, public key).
fn new_key(t: &Topo, name: &str) -> (String, String) {
    let key = t.path(&format!("{name}.key")).display().to_string();
    dchannel(&["genkey", "--out", &key]);
    let public = dchannel(&["pubkey", &key]);
    (key, public)
}

/// The second device's client: the first one's command line with its own
/// TUN, tunnel address, key and output files; and its source route.
fn start_second_client(t: &Topo, key: &str) -> Child {
    let child = second_client(t, key);
    sh(&[
        "ip",
        "-n",
        &t.ue,
        "rule",
        "add",
        "from",
        "198.19.0.3",
        "lookup",
        "103",
        "priority",
        "100",
    ]);
    child
}

/// [`start_second_client`] without the source rule (there from a previous
/// second client: the rule outlives the TUN, its route does not).
fn second_client(t: &Topo, key: &str) -> Child {
    let mut argv = t.client_argv("dchannel", &[]);
    let tun = format!("d4V{}", t.tag);
    let outputs = |f: &str| t.path(f).display().to_string();
    for (flag, value) in [
        ("--tun", tun.clone()),
        ("--tun-addr", "198.19.0.3/32".into()),
        ("--key", key.into()),
        ("--stats-json", outputs("ue2.json")),
        ("--decision-log", outputs("ue2.csv")),
        ("--arrival-log", outputs("ue2-arrivals.csv")),
    ] {
        let at = argv.iter().position(|a| a == flag).unwrap() + 1;
        argv[at] = value;
    }
    let child = spawn_ready(&argv);
    let ue = &t.ue;
    sh(&[
        "ip", "-n", ue, "route", "add", "default", "dev", &tun, "table", "103",
    ]);
    child
}

/// [`Topo::download_paced`] to ue's tunnel address `from`.
fn paced_download(t: &Topo, from: &str, port: u16, data: Vec<u8>, gap: Duration) -> Vec<u8> {
    t.download_paced(Some(from.parse().unwrap()), data, port, gap)
}

fn sha256(b: &[u8]) -> Vec<u8> {
    Sha256::digest(b).to_vec()
}

/// The gateway's `dchannel show --json` over its control socket (no
/// metrics address: devices only).
fn show_json(t: &Topo) -> serde_json::Value {
    let (ok, text) = ctl(t, &["show", "--json", "--metrics", "127.0.0.1:1"]);
    assert!(ok, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn adding_a_device_while_another_transfers_leaves_the_transfer_whole() {
    let t = Topo::new();
    let mut agents = start(&t);
    let (_, public2) = new_key(&t, "ue2");
    let data = pattern(4 << 20, 7);
    let want = sha256(&data);
    // 64 pieces 25 ms apart: the transfer takes at least 1.6 s
    let got = std::thread::scope(|s| {
        let transfer =
            s.spawn(|| paced_download(&t, "198.19.0.2", 7101, data, Duration::from_millis(25)));
        std::thread::sleep(Duration::from_millis(400));
        // refused whole, naming the field: a bad key, an address outside the
        // tunnel's prefixes, the address of the transferring device
        for (args, says) in [
            (
                ["--public-key", "AAAA", "--address", "198.19.0.3"],
                "--public-key",
            ),
            (
                ["--public-key", &public2, "--address", "10.0.0.5"],
                "--address (device \"ue2\"): 10.0.0.5 is outside the tunnel's prefixes",
            ),
            (
                ["--public-key", &public2, "--address", "198.19.0.2"],
                "198.19.0.2 is already the address of device \"ue\"",
            ),
        ] {
            let (ok, text) = ctl(&t, &[&["set", "--device", "ue2"][..], &args].concat());
            assert!(!ok && text.contains(says), "{says:?} not in {text}");
        }
        let (ok, text) = add_ue2(&t, &public2);
        assert!(ok, "{text}");
        assert_eq!(text, "added: ue2; removed: -; re-keyed: -; re-addressed: -");
        assert!(
            !transfer.is_finished(),
            "the change came after the transfer"
        );
        transfer.join().unwrap()
    });
    assert_eq!(got.len(), 4 << 20);
    assert!(sha256(&got) == want, "the transfer is not byte-exact");
    let j = show_json(&t);
    let names: Vec<&str> = j["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ue", "ue2"], "{j}");
    let (_, gw) = agents.stop();
    // ue's session was never set up again: one handshake answered in all
    assert_eq!(gw["crypto"]["handshakes"]["answered"], 1, "{gw}");
}

/// The gateway's `dchannel_crypto_drops_total{reason}` (its metrics, in gw).
fn crypto_drops(t: &Topo, reason: &str) -> u64 {
    let text = in_ns(&t.gw, || {
        let mut c = TcpStream::connect("127.0.0.1:9100").unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    })
    .join()
    .unwrap();
    let series = format!("dchannel_crypto_drops_total{{role=\"gateway\",reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {text}"))
}

fn a_revoked_device_is_dropped_within_a_second() {
    let t = Topo::new();
    let mut agents = start(&t);
    let srv = in_ns(&t.srv, || {
        let s = UdpSocket::bind((SRV, 7201)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        s
    })
    .join()
    .unwrap();
    let send = |msg: &'static [u8]| {
        in_ns(&t.ue, move || {
            let s = UdpSocket::bind("198.19.0.2:0").unwrap();
            s.send_to(msg, (SRV, 7201)).unwrap();
        })
        .join()
        .unwrap()
    };
    let mut buf = [0u8; 64];
    send(b"before");
    let n = srv
        .recv(&mut buf)
        .expect("through the tunnel before the revocation");
    assert_eq!(&buf[..n], b"before");
    let before = crypto_drops(&t, "unknown_index");
    let (ok, text) = ctl(&t, &["set", "--remove", "ue"]);
    assert!(ok && text.starts_with("added: -; removed: ue;"), "{text}");
    let revoked = Instant::now();
    send(b"after");
    // refused (its session's index is forgotten) and counted within 1 s
    while crypto_drops(&t, "unknown_index") == before {
        assert!(
            revoked.elapsed() < Duration::from_secs(1),
            "no refused datagram counted 1 s after the revocation"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "revoked device: refused datagram counted {} ms after `set --remove` returned",
        revoked.elapsed().as_millis()
    );
    assert!(
        srv.recv(&mut buf).is_err(),
        "a revoked device's datagram got through"
    );
    assert_eq!(show_json(&t)["devices"], serde_json::json!([]));
    // the client finds its session dead (nothing heard for 3 probe
    // intervals, 1.5 s) and handshakes again: refused, its key is unknown
    while crypto_drops(&t, "unknown_peer") == 0 {
        assert!(
            revoked.elapsed() < Duration::from_secs(10),
            "no refused handshake"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, gw) = agents.stop();
    assert_eq!(gw["crypto"]["handshakes"]["answered"], 1, "{gw}");
}

fn sighup_reload_adds_a_device_and_show_lists_both_with_bytes() {
    let t = Topo::new();
    let mut agents = start(&t);
    let (key2, public2) = new_key(&t, "ue2");
    let devices = t.path("devices.toml");
    let mut text = std::fs::read_to_string(&devices).unwrap();
    text += &format!(
        "\n[[device]]\nname = \"ue2\"\npublic_key = \"{public2}\"\naddress = \"198.19.0.3\"\n"
    );
    std::fs::write(&devices, text).unwrap();
    let gw = agents.gateway.as_ref().unwrap().id() as i32;
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(gw, libc::SIGHUP) };
    let start = Instant::now();
    loop {
        let j = show_json(&t);
        if j["devices"].as_array().unwrap().len() == 2 {
            assert_eq!(j["devices"][1]["name"], "ue2", "{j}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "SIGHUP: no ue2 in {j}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut second = start_second_client(&t, &key2);
    for (from, port) in [("198.19.0.2", 7301), ("198.19.0.3", 7302)] {
        let data = pattern(256 << 10, port as u64);
        let got = paced_download(&t, from, port, data.clone(), Duration::ZERO);
        assert!(got == data, "{from}: not byte-exact");
    }
    let j = show_json(&t);
    for d in j["devices"].as_array().unwrap() {
        let sum = |k: &str| -> u64 {
            ["hbc", "llc"]
                .iter()
                .map(|ch| d["channels"][ch][k].as_u64().unwrap())
                .sum()
        };
        assert!(sum("rx_bytes") > 0 && sum("rx_packets") > 0, "{d}");
        assert!(sum("tx_bytes") > 256 << 10 && sum("tx_packets") > 0, "{d}");
        assert!(d["latest_handshake_s"].as_f64().is_some(), "{d}");
        assert!(d["channels"]["hbc"]["endpoint"].is_string(), "{d}");
    }
    let (ok, text) = ctl(&t, &["show", "--metrics", "127.0.0.1:1"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("device ue: address 198.19.0.2")
            && text.contains("device ue2: address 198.19.0.3"),
        "{text}"
    );
    assert!(terminate(&mut second).success());
    agents.stop();
}

/// Live changes with `--threads 2` (docs/agent.md "Workers"): a device
/// added live takes slot 1 and so worker 1 (ue, slot 0, is worker 0's), and
/// re-keyed it takes slot 1 again; each time both devices transfer
/// byte-exact and no datagram reaches a worker that does not serve its
/// device (the kernel steers by session index, ≡ slot (mod 2): a datagram at
/// the wrong worker is dropped as `malformed.other_worker` and the transfer
/// would stall).
fn with_two_workers_added_and_rekeyed_devices_reach_their_slots_worker() {
    let t = Topo::new();
    let mut agents = start_with(&t, &["--threads", "2"]);
    let both_transfer = |round: u16| {
        for (from, port) in [("198.19.0.2", 7401), ("198.19.0.3", 7402)] {
            let port = port + 10 * round;
            let data = pattern(256 << 10, port as u64);
            let got = paced_download(&t, from, port, data.clone(), Duration::ZERO);
            assert!(got == data, "round {round}, {from}: not byte-exact");
        }
    };
    let (key2, public2) = new_key(&t, "ue2");
    let (ok, text) = add_ue2(&t, &public2);
    assert!(ok, "{text}");
    let mut second = start_second_client(&t, &key2);
    both_transfer(0);
    let (key3, public3) = new_key(&t, "ue2-new");
    let (ok, text) = ctl(&t, &["set", "--device", "ue2", "--public-key", &public3]);
    assert!(ok, "{text}");
    assert_eq!(text, "added: -; removed: -; re-keyed: ue2; re-addressed: -");
    assert!(terminate(&mut second).success());
    let mut second = second_client(&t, &key3);
    both_transfer(1);
    let names: Vec<String> = show_json(&t)["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["ue", "ue2"]);
    assert!(terminate(&mut second).success());
    let (_, gw) = agents.stop();
    assert_eq!(gw["malformed"]["other_worker"], 0, "{gw}");
}

dchannel_base::test_main! {
    tun: true,
    plain: [],
    namespaced: [
        adding_a_device_while_another_transfers_leaves_the_transfer_whole,
        a_revoked_device_is_dropped_within_a_second,
        sighup_reload_adds_a_device_and_show_lists_both_with_bytes,
        with_two_workers_added_and_rekeyed_devices_reach_their_slots_worker,
    ],
}
