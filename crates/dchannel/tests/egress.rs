//! Safe egress by default (issue 37, item 5; dchannel_core::egress): through
//! the tunnel, a device reaches the internet (srv) but not a service of the
//! gateway's host (on its tunnel address or on its own address towards srv)
//! nor the cloud metadata address 169.254.169.254, although srv serves that
//! address and gw routes to it; every refused packet is counted as
//! `malformed.egress_denied`. `--egress-allow` opens exactly what it names.

mod common;

use common::*;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

const METADATA: &str = "169.254.169.254";
const PORT: u16 = 7101;

/// A UDP socket bound in `ns` to `0.0.0.0:PORT` (every address of the namespace).
fn udp_in(ns: &str) -> UdpSocket {
    let s = in_ns(ns, || UdpSocket::bind(("0.0.0.0", PORT)).unwrap())
        .join()
        .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    s
}

/// What `s` received within its timeouts, as (destination tag, count) lines.
fn received(s: &UdpSocket) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        match s.recv(&mut buf) {
            Ok(n) => got.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
    }
    got.sort();
    got
}

/// From ue, through the tunnel: 3 datagrams to each of `dsts`, payload the destination.
fn send_from_ue(t: &Topo, dsts: &[&'static str]) {
    let dsts = dsts.to_vec();
    in_ns(&t.ue, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for d in dsts {
            for _ in 0..3 {
                s.send_to(d.as_bytes(), (d, PORT)).unwrap();
            }
        }
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
}

/// Whether ue can open a TCP connection to `dst`:PORT within 1 s.
fn tcp_reaches(t: &Topo, dst: &'static str) -> bool {
    in_ns(&t.ue, move || {
        let to: SocketAddr = format!("{dst}:{PORT}").parse().unwrap();
        TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok()
    })
    .join()
    .unwrap()
}

fn egress_is_refused_by_default_and_opened_by_name() {
    let t = Topo::new();
    // srv also answers on the metadata address, and gw routes to it: without
    // the rule, a device would reach it.
    sh(&["ip", "-n", &t.srv, "addr", "add", METADATA, "dev", "lo"]);
    sh(&[
        "ip",
        "-n",
        &t.gw,
        "route",
        "add",
        METADATA,
        "via",
        "198.18.3.2",
    ]);
    let (gw_udp, srv_udp) = (udp_in(&t.gw), udp_in(&t.srv));
    let _gw_tcp = in_ns(&t.gw, || TcpListener::bind(("0.0.0.0", PORT)).unwrap())
        .join()
        .unwrap();
    let own = ["198.19.0.1", "198.18.3.1"]; // gw's TUN, gw's address towards srv

    let mut a = t.start("all-hbc", &[]);
    send_from_ue(&t, &[own[0], own[1], METADATA, SRV]);
    assert_eq!(
        received(&gw_udp),
        Vec::<String>::new(),
        "the gateway's host"
    );
    assert_eq!(received(&srv_udp), vec![SRV; 3], "srv, but not {METADATA}");
    for dst in own {
        assert!(!tcp_reaches(&t, dst), "a service of the gateway at {dst}");
    }
    let (_, gw) = a.stop();
    let denied = gw["malformed"]["egress_denied"].as_u64().unwrap();
    // 9 datagrams and at least one SYN per refused connection
    assert!(denied >= 9 + 2, "egress_denied {denied}");
    assert_eq!(gw["malformed"]["spoofed_source"], 0, "{gw}");

    // Allowed by name: the metadata address and the TUN's; the other own address stays shut.
    let mut a = t.start_with(
        "all-hbc",
        &[],
        &[
            "--egress-allow",
            METADATA,
            "--egress-allow",
            "198.19.0.1/32",
        ],
    );
    send_from_ue(&t, &[own[0], own[1], METADATA]);
    assert_eq!(received(&gw_udp), vec![own[0]; 3]);
    assert_eq!(received(&srv_udp), vec![METADATA; 3]);
    assert!(tcp_reaches(&t, own[0]));
    assert!(!tcp_reaches(&t, own[1]));
    let (_, gw) = a.stop();
    // 3 datagrams and at least one SYN to 198.18.3.1
    let denied = gw["malformed"]["egress_denied"].as_u64().unwrap();
    assert!(denied >= 4, "egress_denied {denied}");
}

fn bad_egress_flags_are_refused_naming_the_flag() {
    let run = |extra: &[&str]| {
        let o = std::process::Command::new(BIN)
            .args(GATEWAY_ARGV_UNSTARTED)
            .args(extra)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--egress-allow", "10.0.0.1/8"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--egress-allow <CIDR>")
            && err.contains("10.0.0.1/8: bits set past the prefix (did you mean 10.0.0.0/8?)"),
        "{err}"
    );
    let (code, err) = run(&["--egress-deny", "eth0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected ADDRESS/LEN"), "{err}");
    // the client has no egress rule to open
    let o = std::process::Command::new(BIN)
        .args(CLIENT_ARGV_UNSTARTED)
        .args(["--egress-allow", "10.0.0.0/8"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

dchannel_base::test_main! {
    tun: true,
    plain: [bad_egress_flags_are_refused_naming_the_flag],
    namespaced: [egress_is_refused_by_default_and_opened_by_name],
}
