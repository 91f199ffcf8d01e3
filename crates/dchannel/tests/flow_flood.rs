//! A million distinct flows through one client (issue 16.3, "Floods"): an
//! application in `ue` sends 1,048,560 UDP datagrams through the client agent
//! (policy `dchannel`, encrypted), first over 1,000 flows (steady), then each
//! on a flow never seen before (16 source ports × 65,535 destination ports),
//! so the 65,536-flow table evicts its least recently seen flow for every
//! packet. Asserted: the client survives, its flow table never holds more
//! than its capacity, every flow it created is still held or was evicted
//! (nothing leaks), and its peak memory grows by at most the table's bound
//! (`FlowTable::bytes_bound`). Printed (run with `--nocapture`), not
//! asserted: decisions per second of wall time and per CPU-second of the
//! client, steady against flood (docs/reliability.md, "Floods").

mod common;

use common::*;
use dchannel_core::flow_table::FlowTable;
use std::net::UdpSocket;
use std::time::Instant;

/// The default `--flow-capacity`.
const CAPACITY: usize = 65_536;

/// One phase: `sockets` × `ports` flows, each sent `repeat` times in turn.
struct Phase {
    name: &'static str,
    sockets: u16,
    ports: u16,
    repeat: u32,
}

/// What the client did in one phase.
struct Measured {
    sent: u64,
    secs: f64,
    cpu_s: f64,
    decisions: u64,
    flows: u64,
    created: u64,
    idle: u64,
    forced: u64,
    hwm_before_kib: u64,
    hwm_after_kib: u64,
}

/// Starts the agents without per-packet logs (a million-row decision log
/// would measure the disk, not the table).
fn start_quiet(t: &Topo) -> Agents {
    let strip = |argv: Vec<String>| -> Vec<String> {
        let mut out = Vec::new();
        let mut it = argv.into_iter();
        while let Some(a) = it.next() {
            if a == "--decision-log" || a == "--arrival-log" {
                it.next();
            } else {
                out.push(a);
            }
        }
        out
    };
    t.start_argv(
        &strip(t.gateway_argv("dchannel", &[])),
        &strip(t.client_argv("dchannel", &[])),
    )
}

fn run(t: &Topo, p: &Phase) -> Measured {
    let mut a = start_quiet(t);
    let pid = a.client.as_ref().unwrap().id();
    let hwm_before_kib = status_kib(pid, "VmHWM");
    let cpu0 = cpu_s(pid);
    let (sockets, ports, repeat) = (p.sockets, p.ports, p.repeat);
    let (sent, secs) = in_ns(&t.ue, move || {
        let socks: Vec<UdpSocket> = (0..sockets)
            .map(|_| UdpSocket::bind(("0.0.0.0", 0)).unwrap())
            .collect();
        let payload = [0x5au8; 32];
        let (mut sent, start) = (0u64, Instant::now());
        for _ in 0..repeat {
            for port in 1..=ports {
                for s in &socks {
                    // a full TUN queue drops silently; sendto only fails on
                    // local errors (ENOBUFS), which are not sent
                    if s.send_to(&payload, (SRV, port)).is_ok() {
                        sent += 1;
                    }
                }
            }
        }
        (sent, start.elapsed().as_secs_f64())
    })
    .join()
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300)); // the client drains its TUN
    let cpu_s = cpu_s(pid) - cpu0;
    let hwm_after_kib = status_kib(pid, "VmHWM");
    assert!(
        a.client.as_mut().unwrap().try_wait().unwrap().is_none(),
        "the client died under the {} phase",
        p.name
    );
    let (ue, _) = a.stop();
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let decisions = ue["decisions"].as_object().unwrap().values().map(n).sum();
    let ft = &ue["flow_table"];
    Measured {
        sent,
        secs,
        cpu_s,
        decisions,
        flows: n(&ue["flows"]),
        created: n(&ft["created"]),
        idle: n(&ft["idle_evictions"]),
        forced: n(&ft["forced_evictions"]),
        hwm_before_kib,
        hwm_after_kib,
    }
}

fn a_million_new_flows_keep_the_client_table_bounded() {
    let t = Topo::new();
    // the same 1,048,560 datagrams in the same loop shape, over 1,000 flows
    // and over 1,048,560 flows
    let phases = [
        Phase {
            name: "steady, 1,000 flows",
            sockets: 10,
            ports: 100,
            repeat: 1_048,
        },
        Phase {
            name: "flood, 1,048,560 new flows",
            sockets: 16,
            ports: 65_535,
            repeat: 1,
        },
    ];
    let bound_kib = (FlowTable::bytes_bound(CAPACITY) / 1024) as u64;
    let mut rates = Vec::new();
    for p in &phases {
        let m = run(&t, p);
        let (wall, per_cpu) = (
            m.decisions as f64 / m.secs,
            m.decisions as f64 / m.cpu_s.max(1e-3),
        );
        println!(
            "{}: {} datagrams sent in {:.2} s, {} decisions by the client ({:.0}/s of wall time, \
             {:.0} per CPU-second); flow table: {} flows, {} created, {} idle and {} forced \
             evictions; client VmHWM {} -> {} KiB (table bound {} KiB)",
            p.name,
            m.sent,
            m.secs,
            m.decisions,
            wall,
            per_cpu,
            m.flows,
            m.created,
            m.idle,
            m.forced,
            m.hwm_before_kib,
            m.hwm_after_kib,
            bound_kib
        );
        assert!(m.decisions > 0, "{}: the client steered nothing", p.name);
        assert!(
            m.flows as usize <= CAPACITY,
            "{}: {} flows held",
            p.name,
            m.flows
        );
        assert_eq!(
            m.created,
            m.flows + m.idle + m.forced,
            "{}: flows created must be held or evicted",
            p.name
        );
        assert!(
            m.hwm_after_kib <= m.hwm_before_kib + bound_kib + 8 * 1024,
            "{}: client peak memory {} -> {} KiB, more than the table's bound {} KiB",
            p.name,
            m.hwm_before_kib,
            m.hwm_after_kib,
            bound_kib
        );
        if p.sockets as u64 * p.ports as u64 > CAPACITY as u64 {
            // the flood reached the client and filled its table many times over
            assert!(
                m.created >= 4 * CAPACITY as u64 && m.forced > 0,
                "{}: {} flows created, {} forced evictions",
                p.name,
                m.created,
                m.forced
            );
        }
        rates.push((wall, per_cpu));
    }
    println!(
        "flood / steady: {:.0}% of the decisions per second of wall time, {:.0}% per CPU-second",
        100.0 * rates[1].0 / rates[0].0,
        100.0 * rates[1].1 / rates[0].1
    );
}

dchannel_base::test_main! {
    tun: true,
    plain: [],
    namespaced: [a_million_new_flows_keep_the_client_table_bounded],
}
