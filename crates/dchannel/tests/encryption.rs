//! The encrypted tunnel end to end: key tools and key-file permissions,
//! and in namespaces a capture of every datagram on both channels while a
//! known payload crosses the tunnel (it never appears in clear), then
//! replayed, truncated and forged datagrams injected at the gateway (dropped,
//! never answered, counted per reason) while a transfer stays byte-exact.

mod common;

use common::*;
use std::io::Write;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MARKER: &[u8] = b"dchannel-plaintext-marker-0123456789";

fn genkey_and_pubkey_and_key_file_permissions() {
    let dir = std::env::temp_dir().join(format!("dch-keys-{}", unique_tag()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("k");
    dchannel(&["genkey", "--out", key.to_str().unwrap()]);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let from_file = dchannel(&["pubkey", key.to_str().unwrap()]);
    assert_eq!(from_file.len(), 44);
    let mut child = Command::new(BIN)
        .arg("pubkey")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let text = std::fs::read(&key).unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), from_file);
    // two keys differ; stdout form is one line of 44 characters
    let a = dchannel(&["genkey"]);
    assert_eq!(a.len(), 44);
    assert_ne!(a, dchannel(&["genkey"]));

    // an agent refuses a key file group or others can read, naming it
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = Command::new(BIN)
        .args(CLIENT_ARGV_UNSTARTED)
        .args(["--key", key.to_str().unwrap(), "--gateway-key", &from_file])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        e.contains(key.to_str().unwrap()) && e.contains("readable by group or others"),
        "{e}"
    );

    // a gateway device without tunnel address is refused, naming file and field
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let devices = dir.join("devices.toml");
    std::fs::write(
        &devices,
        format!("[[device]]\nname = \"p\"\npublic_key = \"{from_file}\"\n"),
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(GATEWAY_ARGV_UNSTARTED)
        .args([
            "--key",
            key.to_str().unwrap(),
            "--devices",
            devices.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(devices.to_str().unwrap()) && e.contains("`address`"),
        "{e}"
    );

    // an all-zero key (of small order, low_order.rs) is refused: the device's
    // naming file, line and device at the gateway; the gateway's at the client
    const ZERO: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    std::fs::write(
        &devices,
        format!("[[device]]\nname = \"p\"\naddress = \"198.19.0.2\"\npublic_key = \"{ZERO}\"\n"),
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(GATEWAY_ARGV_UNSTARTED)
        .args(["--key", key.to_str().unwrap()])
        .args(["--devices", devices.to_str().unwrap()])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    let at = format!(
        "{}: line 4: device \"p\": field `public_key`",
        devices.display()
    );
    assert!(
        o.status.code() == Some(1) && e.contains(&at) && e.contains("small order"),
        "{e}"
    );
    let o = Command::new(BIN)
        .args(CLIENT_ARGV_UNSTARTED)
        .args(["--key", key.to_str().unwrap(), "--gateway-key", ZERO])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(1)
            && e.contains("bad key --gateway-key: AAAA")
            && e.contains("small order"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// UDP payloads of the dchannel datagrams (ports 4000/4001) seen in the gw
/// namespace, both directions, until `stop`: (dst port is the gateway's, payload).
/// Returns once the capture socket is open, so nothing sent afterwards is missed.
fn capture(ns: &str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(bool, Vec<u8>)>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = in_ns(ns, move || {
        // SAFETY: a plain socket call; the fd is owned right away.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM,
                // ETH_P_ALL: also the datagrams the gateway sends
                i32::from((libc::ETH_P_ALL as u16).to_be()),
            )
        };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fd is a fresh, valid descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 50_000,
        };
        set_socket_option(fd.as_raw_fd(), libc::SO_RCVTIMEO, &tv);
        // The socket sees every packet in the namespace (TUN, both veths), six
        // per echo; on a loaded machine this thread may sleep through the whole
        // exchange, and the default buffer (~200 KB) then drops the tail (CI saw
        // 56 of 80). 16 MiB holds all of it.
        let big: libc::c_int = 16 << 20;
        let rc = set_socket_option(fd.as_raw_fd(), libc::SO_RCVBUFFORCE, &big);
        assert_eq!(rc, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
        ready_tx.send(()).unwrap();
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: reading into our own buffer.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                continue;
            }
            let p = &buf[..n as usize];
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if p.len() < 20 || p[0] >> 4 != 4 || p[9] != 17 || p.len() < ihl + 8 {
                continue;
            }
            let sport = u16::from_be_bytes([p[ihl], p[ihl + 1]]);
            let dport = u16::from_be_bytes([p[ihl + 2], p[ihl + 3]]);
            let ours = |x: u16| x == 4000 || x == 4001;
            if ours(sport) || ours(dport) {
                out.push((ours(dport), p[ihl + 8..].to_vec()));
            }
        }
        let mut stats = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: valid fd; the kernel writes at most `len` bytes into `stats`.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        assert!(
            rc != 0 || stats.tp_drops == 0,
            "the capture socket dropped {} of {} packets: the count below would be wrong",
            stats.tp_drops,
            stats.tp_packets
        );
        out
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("capture socket open within 10 s");
    handle
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn no_plaintext_on_either_channel_and_bad_datagrams_are_dropped_and_counted() {
    let t = Topo::new();
    let stop = Arc::new(AtomicBool::new(false));
    let cap = capture(&t.gw, Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(100));
    // pkt-size:300 puts small packets on the LLC and large ones on the HBC, so
    // the marker travels on both channels
    let mut a = t.start("pkt-size:300", &[]);
    let srv = in_ns(&t.srv, || {
        let s = UdpSocket::bind((SRV, 7000)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = 0;
        let mut buf = [0u8; 2048];
        for _ in 0..40 {
            match s.recv_from(&mut buf) {
                Ok((n, from)) => {
                    assert!(contains(&buf[..n], MARKER));
                    s.send_to(&buf[..n], from).unwrap(); // echo: downlink too
                    got += 1;
                }
                Err(_) => break,
            }
        }
        got
    });
    std::thread::sleep(Duration::from_millis(100));
    let echoed = in_ns(&t.ue, || {
        let s = UdpSocket::bind(("198.19.0.2", 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut back = 0;
        for i in 0..40 {
            // sizes 40 .. 1240: both sides of the 300-byte threshold
            let mut msg = MARKER.to_vec();
            msg.resize(40 + i * 30, b'.');
            s.send_to(&msg, (SRV, 7000)).unwrap();
            let mut buf = [0u8; 2048];
            if let Ok(n) = s.recv(&mut buf) {
                back += usize::from(buf[..n] == msg[..]);
            }
        }
        back
    });
    assert_eq!(srv.join().unwrap(), 40);
    assert_eq!(echoed.join().unwrap(), 40);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let seen = cap.join().unwrap();
    let data: Vec<&(bool, Vec<u8>)> = seen
        .iter()
        .filter(|(_, p)| p[0] == 0x20 && p.len() > 13 + 16)
        .collect();
    // AF_PACKET sees each datagram once at the gateway (in or out)
    let up = data.iter().filter(|(to_gw, _)| *to_gw).count();
    assert!(
        data.len() >= 80,
        "captured {} data datagrams, {up} to the gateway",
        data.len()
    );
    for (_, p) in &seen {
        assert!(!contains(p, MARKER), "plaintext marker on the wire");
        assert!(matches!(p[0], 0x20..=0x22), "type byte {:#x}", p[0]);
    }
    let uplink: Vec<&Vec<u8>> = data
        .iter()
        .filter(|(to_gw, _)| *to_gw)
        .map(|(_, p)| p)
        .collect();
    let big = uplink
        .iter()
        .find(|p| p.len() > 300)
        .expect("an uplink datagram on the HBC");

    // inject, from the client's own HBC address: replay, truncation, forgery
    let (replay, short) = ((*big).clone(), big[..20].to_vec());
    let mut forged = (*big).clone();
    // a counter far ahead (fresh for the window), same index: fails the tag
    forged[5..13].copy_from_slice(&(1u64 << 40).to_be_bytes());
    // an initiation of the right size whose mac1 is not the gateway's
    let mut flipped_init = vec![0x21; dchannel_crypto::format::INITIATION_LEN];
    flipped_init[1] = 7;
    in_ns(&t.ue, move || {
        let s = UdpSocket::bind(("198.18.1.2", 0)).unwrap();
        for d in [&replay, &short, &forged, &flipped_init] {
            s.send_to(d, (GW_HBC, 4000)).unwrap();
        }
        // nothing comes back to a bad datagram
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut b = [0u8; 2048];
        assert!(s.recv(&mut b).is_err(), "an answer to a bad datagram");
    })
    .join()
    .unwrap();
    let (ue, gw) = {
        run_transfer(&t);
        a.stop()
    };
    let drops = &gw["crypto"]["drops"];
    for (k, n) in [
        ("replay", 1),
        ("auth_failed", 1),
        // the initiation: refused at mac1, before any Diffie-Hellman
        ("bad_mac1", 1),
        ("handshake_invalid", 0),
        // 20 bytes fit no message of the wire format: the kernel prefilter
        // (on by default) dropped it before the agent read it ...
        ("truncated", 0),
    ] {
        assert_eq!(drops[k].as_u64(), Some(n), "{k}: {drops}");
    }
    // ... and counted it at the HBC socket.
    assert_eq!(
        gw["channels"]["hbc"]["kernel_drops"].as_u64(),
        Some(1),
        "{gw}"
    );
    let total: u64 = drops
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 3, "{drops}");
    assert_eq!(gw["malformed"]["unauthentic"].as_u64(), Some(3));
    assert_eq!(
        ue["crypto"]["drops"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        0
    );
    for s in [&ue, &gw] {
        assert_eq!(s["malformed"]["no_session"].as_u64(), Some(0), "{s}");
        assert!(
            s["channels"]["llc"]["control_rx"].as_u64().unwrap()
                + s["channels"]["hbc"]["control_rx"].as_u64().unwrap()
                >= 1
        );
    }
    assert_eq!(
        ue["crypto"]["handshakes"]["completed_as_initiator"].as_u64(),
        Some(1)
    );
    assert_eq!(gw["crypto"]["handshakes"]["answered"].as_u64(), Some(1));
}

/// `--rekey-after-secs 1` (hidden, for tests whose devices must rekey every
/// few seconds: issue 37's flood check): the client handshakes again about
/// every second, and a 2 MiB download paced over ~2.5 s crosses those
/// rekeys byte-exact. Out of range (0, 121) or with `--insecure` it is
/// refused naming the flag.
fn a_short_rekey_time_rekeys_while_a_transfer_stays_byte_exact() {
    let t = Topo::new();
    let mut agents = t.start_argv(
        &t.gateway_argv("dchannel", &[]),
        &t.client_argv("dchannel", &["--rekey-after-secs", "1"]),
    );
    let started = std::time::Instant::now();
    let data = pattern(2 << 20, 11);
    // 32 pieces of 64 KiB, 80 ms apart
    let got = t.download_paced(None, data.clone(), 7011, Duration::from_millis(80));
    assert!(got == data, "not byte-exact across the rekeys");
    std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
    let secs = started.elapsed().as_secs_f64();
    let (ue, gw) = agents.stop();
    let completed = ue["crypto"]["handshakes"]["completed_as_initiator"]
        .as_u64()
        .unwrap();
    let answered = gw["crypto"]["handshakes"]["answered"].as_u64().unwrap();
    eprintln!("{secs:.1} s: {completed} handshakes completed, {answered} answered");
    // the first at start, then one per second of session age (plus its
    // round trip): at least 3 in 3 s; with the default (120 s) there is 1
    assert!(
        completed >= 3,
        "{completed} handshakes in {secs:.1} s: {ue}"
    );
    assert!(answered >= completed, "{answered} answered: {gw}");
    assert!(completed as f64 <= secs + 2.0, "{completed} in {secs:.1} s");
}

fn rekey_after_secs_out_of_range_or_insecure_is_refused() {
    for v in ["0", "121"] {
        let o = Command::new(BIN)
            .args(CLIENT_ARGV_UNSTARTED)
            .args(["--rekey-after-secs", v])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{v}: {err}");
        assert!(err.contains("--rekey-after-secs"), "{v}: {err}");
    }
    let o = Command::new(BIN)
        .args(CLIENT_ARGV_UNSTARTED)
        .args(["--insecure", "--token", "ab", "--rekey-after-secs", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("--rekey-after-secs: not with --insecure"),
        "{err}"
    );
}

/// A 1 MiB TCP transfer from srv to ue, checked byte for byte.
fn run_transfer(t: &Topo) {
    let expect = pattern(1 << 20, 7);
    let got = t.download(expect.clone(), 7001);
    assert!(
        got == expect,
        "transfer not byte-exact ({} bytes)",
        got.len()
    );
}

/// `setsockopt(fd, SOL_SOCKET, opt, value)`; returns its result (0: done).
fn set_socket_option<T>(fd: std::os::fd::RawFd, opt: libc::c_int, value: &T) -> libc::c_int {
    // SAFETY: `value` is a valid T for the call and the length is its size;
    // the caller passes the option's own type.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    }
}

dchannel_base::test_main! {
    tun: true,
    plain: [
        genkey_and_pubkey_and_key_file_permissions,
        rekey_after_secs_out_of_range_or_insecure_is_refused,
    ],
    namespaced: [
        no_plaintext_on_either_channel_and_bad_datagrams_are_dropped_and_counted,
        a_short_rekey_time_rekeys_while_a_transfer_stays_byte_exact,
    ],
}
