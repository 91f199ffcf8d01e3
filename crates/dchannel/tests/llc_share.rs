//! Rule (b) of a shared LLC (issue 41's check, docs/llc_sharing.md): a gateway
//! serving three encrypted devices with `--llc-share token-bucket
//! --llc-capacity 3000000` (1 Mbit/s each) under `all-llc`, while each device
//! downloads 2 MiB at once. Checks, from the gateway's per-device counters,
//! its per-channel counters and its decision log:
//! * no device's LLC bytes exceed its share by more than one packet in any
//!   interval: for every pair of its LLC packets i ≤ j, the bytes of i..j are at
//!   most r·(t_j − t_i) + B (B = --outer-mtu = one full packet);
//! * the packets over the share went on the HBC (counted per device and as the
//!   `over_share` decision, and sent on the HBC socket), none dropped: every
//!   transfer is byte-exact;
//! * every device got onto the LLC and had packets diverted (the share bit).
//!
//! Skips cleanly when not root.

mod common;

use common::fleet::Fleet;
use common::*;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

const BYTES: usize = 2 * 1024 * 1024;
const DEVICES: usize = 3;
/// The LLC's capacity, split equally: 1 Mbit/s per device.
const CAPACITY: u64 = 3_000_000;
/// The bucket's depth: the default, one packet of --outer-mtu.
const BURST: u64 = 1500;

/// (monotonic ns, IP bytes) of each packet the gateway sent on the LLC, per peer.
fn llc_rows(log: &std::path::Path) -> HashMap<usize, Vec<(u64, u64)>> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|c| *c == name).unwrap();
    let (peer, size, channel, t) = (col("peer"), col("size"), col("channel"), col("t_mono_ns"));
    let mut out: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        if f[channel] == "llc" {
            out.entry(f[peer].parse().unwrap())
                .or_default()
                .push((f[t].parse().unwrap(), f[size].parse().unwrap()));
        }
    }
    out
}

fn over_share_packets_go_to_the_hbc_and_no_device_exceeds_its_share() {
    let f = Fleet::new(DEVICES);
    let log = f.dir.join("gw.decisions.csv");
    let capacity = CAPACITY.to_string();
    let mut a = f.start(
        "all-llc",
        &[
            "--llc-share",
            "token-bucket",
            "--llc-capacity",
            &capacity,
            "--decision-log",
            log.to_str().unwrap(),
        ],
    );
    let f = std::sync::Arc::new(f);
    let transfers: Vec<_> = (0..DEVICES)
        .map(|k| {
            let f = std::sync::Arc::clone(&f);
            std::thread::spawn(move || {
                let down = pattern(BYTES, 40 + k as u64);
                let want: [u8; 32] = Sha256::digest(&down).into();
                let (_, got) = f.exchange(k, 5400 + k as u16, b"get".to_vec(), down);
                let got: [u8; 32] = Sha256::digest(&got).into();
                assert_eq!(got, want, "device {k}: downlink bytes differ");
            })
        })
        .collect();
    for t in transfers {
        t.join().unwrap();
    }
    let gw = a.stop();
    let rate = CAPACITY / DEVICES as u64; // bits/s
    let rows = llc_rows(&log);
    let (mut admitted, mut diverted) = (0, 0);
    for k in 0..DEVICES {
        let share = &gw["peers"][k]["limits"];
        let n = |key: &str| share[key].as_u64().unwrap();
        let (pkts, bytes) = (n("llc_share_packets"), n("llc_share_bytes"));
        assert!(
            pkts > 0 && n("llc_share_diverted_packets") > 0,
            "device {k}: {share}"
        );
        admitted += pkts;
        diverted += n("llc_share_diverted_packets");
        // the log's LLC packets are the admitted ones; their wire bytes are the
        // IP bytes plus one fixed per-packet overhead
        let mine = &rows[&k];
        assert_eq!(mine.len() as u64, pkts, "device {k}");
        let ip: u64 = mine.iter().map(|r| r.1).sum();
        assert_eq!((bytes - ip) % pkts, 0, "device {k}: overhead per packet");
        let overhead = (bytes - ip) / pkts;
        // every interval [t_i, t_j] between two of its LLC packets: within
        // r·(t_j − t_i) + B (in bits, exact integers)
        for i in 0..mine.len() {
            let mut sum = 0u128;
            for j in i..mine.len() {
                sum += u128::from(mine[j].1 + overhead) * 8;
                let dt = u128::from(mine[j].0 - mine[i].0);
                let allowed = u128::from(rate) * dt / 1_000_000_000 + u128::from(BURST) * 8 + 8;
                assert!(
                    sum <= allowed,
                    "device {k}: {sum} bits on the LLC in {dt} ns (allowed {allowed})"
                );
            }
        }
    }
    // the over-share packets are the `over_share` decisions, sent on the HBC
    assert_eq!(
        gw["decisions"]["hbc:over_share"].as_u64(),
        Some(diverted),
        "{gw}"
    );
    assert_eq!(
        gw["decisions"]["llc:fixed"].as_u64(),
        Some(admitted),
        "{gw}"
    );
    let hbc_tx = gw["channels"]["hbc"]["tx_pkts"].as_u64().unwrap();
    assert!(hbc_tx >= diverted, "hbc tx {hbc_tx} < diverted {diverted}");
    // and nothing was lost: the transfers above are byte-exact, and without
    // the share all 6 MiB would have gone on the LLC
    assert!(
        diverted > admitted,
        "{admitted} admitted, {diverted} diverted"
    );
}

dchannel_base::test_main! {
    tun: true,
    plain: [],
    namespaced: [over_share_packets_go_to_the_hbc_and_no_device_exceeds_its_share],
}
