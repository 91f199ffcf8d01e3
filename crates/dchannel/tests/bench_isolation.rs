//! One authenticated device cycling flow ids as fast as it can (issue 37,
//! "Isolation between devices"), two encrypted devices at one gateway: device
//! 0 sends UDP datagrams each on a 5-tuple never seen before (so its client
//! agent gives each a new flow id, and the gateway's reorder buffer meets a new
//! flow per datagram), while device 1 uploads `BYTES` over TCP, byte-exact.
//! Same run, alternating, three rounds: device 1's upload alone, while device
//! 0 floods 16 flows, while device 0 cycles flow ids. Asserted: uploads are
//! byte-exact; per round, device 1's throughput while device 0 cycles flow
//! ids is at least 90% of that while device 0 sends on 16 flows (median of
//! the rounds): flow state costs the other device nothing beyond the
//! datagram rate itself; device 0 reached its own reorder flow limit and
//! lost only its own flows (device 1: no eviction, no limit hit); the
//! gateway's peak memory rose by less than the two devices' stated bounds
//! (docs/reliability.md, "Isolation between devices"). Printed: each
//! upload's throughput, against device 1 alone too, and device 0's datagram
//! rate.
//!
//! A benchmark, not in CI (`#[ignore]`): on the shared 2-core VM the
//! throughput ratio swung from 0.12 to 4.27 between runs with the same code
//! (the other agents' load, not the gateway), so the 90% check says nothing
//! there. Run it on an otherwise idle machine, as root:
//!
//! cargo test --release -p dchannel --test bench_isolation -- --ignored --nocapture

mod common;

use common::fleet::Fleet;
use common::*;
use dchannel_core::flow_table::FlowTable;
use dchannel_core::reorder::{ReorderBuffer, ReorderConfig};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

const BYTES: usize = 24 * 1024 * 1024;

/// Device 1's upload of `BYTES` to srv, byte-exact; its throughput in Mbit/s.
fn upload_mbit(f: &Fleet, port: u16) -> f64 {
    let up = pattern(BYTES, u64::from(port));
    let t = Instant::now();
    let (got, _) = f.exchange(1, port, up.clone(), Vec::new());
    let secs = t.elapsed().as_secs_f64();
    assert!(got == up, "device 1's upload differs");
    BYTES as f64 * 8.0 / secs / 1e6
}

/// Device 0 sends 32-byte UDP datagrams to srv from 16 sockets until
/// `stop`; returns how many it sent. With `cycle` each datagram goes to the
/// next destination port (a new 5-tuple each time), else all to one port
/// (16 flows).
fn flood(f: &Fleet, cycle: bool, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    in_ns(&f.devices[0], move || {
        let socks: Vec<UdpSocket> = (0..16)
            .map(|_| UdpSocket::bind("0.0.0.0:0").unwrap())
            .collect();
        let (mut sent, mut port) = (0u64, 1u16);
        while !stop.load(Relaxed) {
            for s in &socks {
                if s.send_to(&[0u8; 32], (SRV, port)).is_ok() {
                    sent += 1;
                }
            }
            if cycle {
                port = port.checked_add(1).unwrap_or(1);
            }
        }
        sent
    })
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "benchmark: its throughput ratio is noise on a shared machine (module docs); run on an idle one"]
fn a_device_cycling_flow_ids_leaves_the_other_its_throughput() {
    if !can_run() {
        return;
    }
    let f = Fleet::new(2);
    let mut a = f.start("dchannel", &[]);
    let pid = a.gateway_pid();
    let hwm_before = status_kib(pid, "VmHWM");
    let (mut alone, mut steady, mut cycling) = (Vec::new(), Vec::new(), Vec::new());
    let mut port = 5400;
    for round in 0..3 {
        alone.push(upload_mbit(&f, port));
        for (cycle, results) in [(false, &mut steady), (true, &mut cycling)] {
            port += 1;
            let stop = Arc::new(AtomicBool::new(false));
            let blaster = flood(&f, cycle, Arc::clone(&stop));
            std::thread::sleep(std::time::Duration::from_millis(500));
            let t = Instant::now();
            results.push(upload_mbit(&f, port));
            let secs = t.elapsed().as_secs_f64() + 0.5;
            stop.store(true, Relaxed);
            let sent = blaster.join().unwrap() as f64;
            println!(
                "round {round}: device 0 on {}: {:.0} datagrams/s",
                if cycle {
                    "a new flow each datagram"
                } else {
                    "16 flows"
                },
                sent / secs
            );
        }
        port += 1;
        println!(
            "round {round}: device 1 alone {:.0} Mbit/s; device 0 flooding 16 flows {:.0}; cycling flow ids {:.0}",
            alone[round], steady[round], cycling[round]
        );
    }
    let hwm_after = status_kib(pid, "VmHWM");
    let gw = a.stop();
    let (m_alone, m_steady, m_cycling) = (median(&alone), median(&steady), median(&cycling));
    println!(
        "median Mbit/s: alone {m_alone:.0}; device 0 flooding 16 flows {m_steady:.0} ({:.0}%); cycling flow ids {m_cycling:.0} ({:.0}%; {:.0}% of the 16-flow flood); gateway VmHWM {hwm_before} -> {hwm_after} KiB",
        100.0 * m_steady / m_alone,
        100.0 * m_cycling / m_alone,
        100.0 * m_cycling / m_steady
    );
    let limits = |k: usize| gw["peers"][k]["limits"].clone();
    println!(
        "device 0 limits: {}\ndevice 1 limits: {}",
        limits(0),
        limits(1)
    );
    let cycler = limits(0);
    assert!(
        cycler["reorder_device_flow_limit_evictions"]
            .as_u64()
            .unwrap()
            > 0,
        "device 0 never reached its reorder flow limit: {cycler}"
    );
    let other = limits(1);
    for key in [
        "reorder_device_flow_limit_evictions",
        "reorder_gateway_flow_limit_evictions",
        "reorder_device_memory_limit_hits",
        "reorder_gateway_memory_limit_hits",
        "sender_flow_limit_evictions",
        "sender_gateway_flow_limit_evictions",
    ] {
        assert_eq!(other[key], 0, "device 1 lost state ({key}): {other}");
    }
    // the stated bounds of two devices: reorder buffer and sender flow table each
    type Agent = ReorderBuffer<(usize, u16), dchannel_core::endpoint::Deliver<Vec<u8>>>;
    let (reorder_device, _) = Agent::bytes_bound(&ReorderConfig::default(), 1564);
    let sender_device = 2 * FlowTable::bytes_bound(65_536);
    let bound_kib = (2 * (reorder_device + sender_device) / 1024) as u64;
    assert!(
        hwm_after - hwm_before <= bound_kib,
        "gateway VmHWM rose {} KiB, bound {bound_kib} KiB",
        hwm_after - hwm_before
    );
    // Flow-id cycling itself must cost device 1 nothing beyond what the same
    // datagram rate on a few flows costs it (paired per round: the load of a
    // shared machine drifts between rounds more than within one).
    let ratios: Vec<f64> = cycling.iter().zip(&steady).map(|(c, s)| c / s).collect();
    let ratio = median(&ratios);
    println!("device 1 while device 0 cycles flow ids / while it floods 16 flows, per round: {ratios:.2?}, median {ratio:.2}");
    assert!(
        ratio >= 0.9,
        "device 1 while device 0 cycles flow ids: {ratio:.2} of its throughput under a 16-flow flood ({ratios:.2?})"
    );
}
