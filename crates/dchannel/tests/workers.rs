//! A gateway with `--threads 2` serving two encrypted devices at once (issue
//! 37): both transfer byte-exact (sha256 each way), each device's datagrams
//! reach the worker that serves it (the kernel steers by session index: a
//! datagram at the wrong worker would be dropped as `other_worker` and the
//! transfer would stall), and both workers' threads exist. Skips cleanly
//! when not root.

mod common;

use common::fleet::Fleet;
use common::*;
use sha2::{Digest, Sha256};

const BYTES: usize = 3 * 1024 * 1024;

fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// The names of `pid`'s threads (/proc/PID/task/*/comm).
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

fn two_devices_transfer_byte_exact_through_two_workers() {
    let f = Fleet::new(2);
    let mut a = f.start("dchannel", &["--threads", "2"]);
    let names = thread_names(a.gateway_pid());
    for w in ["tun->udp/0", "tun->udp/1", "udp->tun/0", "udp->tun/1"] {
        assert!(names.iter().any(|n| n == w), "no thread {w} in {names:?}");
    }
    let f = std::sync::Arc::new(f);
    let transfers: Vec<_> = (0..2)
        .map(|k| {
            let f = std::sync::Arc::clone(&f);
            std::thread::spawn(move || {
                let (up, down) = (pattern(BYTES, 10 + k as u64), pattern(BYTES, 20 + k as u64));
                let (up_sha, down_sha) = (sha(&up), sha(&down));
                let (got_up, got_down) = f.exchange(k, 5300 + k as u16, up, down);
                assert_eq!(sha(&got_up), up_sha, "device {k}: uplink bytes differ");
                assert_eq!(
                    sha(&got_down),
                    down_sha,
                    "device {k}: downlink bytes differ"
                );
            })
        })
        .collect();
    for t in transfers {
        t.join().unwrap();
    }
    let gw = a.stop();
    assert_eq!(gw["malformed"]["other_worker"], 0, "{gw}");
    // both devices' uplink payload came through the gateway's sockets
    let rx: u64 = ["hbc", "llc"]
        .iter()
        .map(|ch| gw["channels"][ch]["rx_bytes"].as_u64().unwrap())
        .sum();
    assert!(
        rx as usize >= 2 * BYTES,
        "gateway received {rx} bytes: {gw}"
    );
}

/// `--threads` outside 1..=256 is refused naming the flag, and a device
/// (client) has no such flag.
fn threads_out_of_range_or_at_a_device_is_refused() {
    for v in ["0", "257"] {
        let o = std::process::Command::new(BIN)
            .args(GATEWAY_ARGV_UNSTARTED)
            .args(["--threads", v])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "--threads {v}: {err}");
        assert!(err.contains("--threads"), "--threads {v}: {err}");
    }
    let o = std::process::Command::new(BIN)
        .args(CLIENT_ARGV_UNSTARTED)
        .args(["--threads", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--threads"), "{err}");
}

dchannel_base::test_main! {
    tun: true,
    plain: [threads_out_of_range_or_at_a_device_is_refused],
    namespaced: [two_devices_transfer_byte_exact_through_two_workers],
}
