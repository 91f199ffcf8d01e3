//! The reorder buffer's limits between devices (issue 37): per-device and
//! gateway-wide bounds on flows and memory, expiry in last-seen order,
//! memory counted as buffer capacity, eviction from the device over its share.
//! Synthetic time throughout.

use super::*;
use proptest::prelude::*;
use Channel::{Hbc, Llc};

type Key = (usize, u16);
type Rb = ReorderBuffer<Key, u32>;

/// Small limits so that the tests reach them with a handful of packets.
fn small() -> ReorderConfig {
    ReorderConfig {
        max_flow_bytes: 10_000,
        max_device_bytes: 20_000,
        max_total_bytes: 30_000,
        max_device_flows: 6,
        max_flows: 8,
        flow_idle: 1_000 * MS,
        max_timeout: 500 * MS,
        ..ReorderConfig::default()
    }
}

/// Whether `b` tracks flow `key`.
fn tracks(b: &Rb, key: Key) -> bool {
    b.flows.lookup(&key).1.is_some()
}

/// Holds one LLC packet (seq 1, waiting for seq 0) of `cost` bytes in flow `key`.
fn hold(b: &mut Rb, out: &mut Vec<u32>, now: Nanos, key: Key, cost: usize, id: u32) {
    b.push(now, key, 1, Llc, cost, id, out);
}

#[test]
fn idle_flows_expire_in_last_seen_order_and_no_further() {
    let mut b = Rb::new(small());
    let mut out = Vec::new();
    // flows seen at 0, 100, 200 ms; flow (0, 1) again at 300 ms
    for (i, t) in [0, 100, 200].into_iter().enumerate() {
        b.push(t * MS, (i % 2, i as u16 + 1), 0, Hbc, 100, 0, &mut out);
    }
    b.push(300 * MS, (0, 1), 1, Hbc, 100, 0, &mut out);
    // at 1,150 ms the flows seen at 100 ms (1,050 ms ago) is idle (> 1 s);
    // the one seen at 200 ms (950 ms ago) stops the walk
    b.expire(1_150 * MS, &mut out);
    assert!(!tracks(&b, (1, 2)));
    assert!(tracks(&b, (0, 3)) && tracks(&b, (0, 1)));
    // at 1,250 ms the one seen at 200 ms goes; the one seen at 300 ms stays
    b.expire(1_250 * MS, &mut out);
    assert!(!tracks(&b, (0, 3)));
    assert!(tracks(&b, (0, 1)));
    assert_eq!(b.flows(), 1);
}

#[test]
fn a_device_at_its_flow_limit_evicts_its_own_least_recent_flow() {
    let mut b = Rb::new(small());
    let mut out = Vec::new();
    b.push(0, (1, 100), 0, Hbc, 100, 0, &mut out);
    for f in 0..6u16 {
        b.push(MS + u64::from(f), (0, f), 0, Hbc, 100, 0, &mut out);
    }
    b.push(10 * MS, (0, 0), 1, Hbc, 100, 0, &mut out); // flow 0 seen again
    b.push(11 * MS, (0, 6), 0, Hbc, 100, 0, &mut out); // a 7th flow: limit 6
    assert!(!tracks(&b, (0, 1)), "device 0's least recently seen flow");
    assert!(tracks(&b, (0, 0)) && tracks(&b, (0, 6)));
    assert!(tracks(&b, (1, 100)), "device 1 untouched");
    let d0 = b.device_stats(0);
    assert_eq!((d0.flows, d0.device_flow_limit_evictions), (6, 1));
    assert_eq!(b.device_stats(1).device_flow_limit_evictions, 0);
}

#[test]
fn at_the_gateway_flow_limit_the_device_with_the_most_flows_loses_one() {
    // 8 flows at most: device 0 has 6 (its own limit), device 1 has 2.
    let mut b = Rb::new(small());
    let mut out = Vec::new();
    b.push(0, (1, 1), 0, Hbc, 100, 0, &mut out);
    for f in 0..6u16 {
        b.push(MS + u64::from(f), (0, f), 0, Hbc, 100, 0, &mut out);
    }
    b.push(20 * MS, (1, 2), 0, Hbc, 100, 0, &mut out);
    assert_eq!(b.flows(), 8);
    // device 1's third flow: device 0 (6 flows, over its share of 4) gives one up
    b.push(21 * MS, (1, 3), 0, Hbc, 100, 0, &mut out);
    assert_eq!(b.flows(), 8);
    assert!(!tracks(&b, (0, 0)), "device 0's least recently seen flow");
    for f in 1..4 {
        assert!(tracks(&b, (1, f)), "device 1's flow {f} stays");
    }
    assert_eq!(b.device_stats(0).gateway_flow_limit_evictions, 1);
    // device 0 cycling new flow ids now only ever evicts its own
    for f in 10..1_000u16 {
        b.push(30 * MS + u64::from(f), (0, f), 0, Hbc, 100, 0, &mut out);
    }
    for f in 1..4 {
        assert!(
            tracks(&b, (1, f)),
            "device 1's flow {f} survives the cycling"
        );
    }
    assert_eq!(b.device_stats(1).flows, 3);
    assert_eq!(b.device_stats(0).flows, 5);
}

#[test]
fn memory_is_counted_as_buffer_capacity_not_inner_length() {
    // a 60-byte ACK held in a 1,564-byte receive buffer takes 1,564 bytes
    let mut b: ReorderBuffer<Key, Vec<u8>> = ReorderBuffer::new(ReorderConfig::default());
    let mut out = Vec::new();
    let mut ack = Vec::with_capacity(1564);
    ack.extend_from_slice(&[0u8; 60]);
    let cost = ack.footprint();
    assert!(cost >= 1564);
    b.push(0, (0, 1), 1, Llc, cost, ack, &mut out);
    assert_eq!(b.occupancy(), cost);
    assert_eq!(b.device_stats(0).memory_bytes, cost);
    assert_eq!(b.memory(), cost);
    b.push(MS, (0, 1), 0, Hbc, 1564, vec![1u8; 10], &mut out);
    assert_eq!(b.occupancy(), 0);
    assert_eq!(out.len(), 2);
}

#[test]
fn gaps_take_memory_too() {
    // HBC seq 1, 3, 5 with 0, 2, 4 missing: three gaps remembered
    let mut b = Rb::new(small());
    let mut out = Vec::new();
    for s in [1, 3, 5] {
        b.push(0, (0, 1), s, Hbc, 100, s, &mut out);
    }
    assert_eq!(b.memory(), 3 * GAP_BYTES);
    assert_eq!(b.occupancy(), 0);
    // seq 0 fills the first gap: next passes 1 (delivered), two gaps remain
    b.push(MS, (0, 1), 0, Hbc, 100, 0, &mut out);
    assert_eq!(b.memory(), 2 * GAP_BYTES);
}

#[test]
fn a_device_at_its_memory_limit_releases_its_own_packets_only() {
    let mut b = Rb::new(small());
    let mut out = Vec::new();
    hold(&mut b, &mut out, 0, (1, 1), 5_000, 100);
    // device 0 fills its 20,000 bytes with four flows of 5,000
    for f in 0..4u16 {
        hold(&mut b, &mut out, MS, (0, f), 5_000, u32::from(f));
    }
    assert!(out.is_empty());
    hold(&mut b, &mut out, 2 * MS, (0, 9), 5_000, 9);
    assert_eq!(out, vec![9], "its own packet released at once");
    assert_eq!(b.device_stats(0).device_memory_limit_hits, 1);
    assert_eq!(
        b.device_stats(1).memory_bytes,
        5_000,
        "device 1 still holds"
    );
    assert_eq!(b.device_stats(1).gateway_memory_limit_hits, 0);
}

#[test]
fn gateway_memory_pressure_takes_from_the_device_over_its_share() {
    // 30,000 bytes in total: device 0 holds 20,000, device 2 holds 5,000
    let mut b = Rb::new(small());
    let mut out = Vec::new();
    for f in 0..4u16 {
        hold(&mut b, &mut out, MS, (0, f), 5_000, u32::from(f));
    }
    hold(&mut b, &mut out, 2 * MS, (2, 1), 5_000, 200);
    assert_eq!(b.memory(), 25_000);
    // device 1 needs 10,000: device 0's oldest holding flows release, not device 2's
    hold(&mut b, &mut out, 3 * MS, (1, 1), 5_000, 100);
    hold(&mut b, &mut out, 3 * MS, (1, 2), 5_000, 101);
    assert_eq!(out, vec![0], "device 0's first flow made room");
    assert_eq!(b.device_stats(0).gateway_memory_limit_hits, 1);
    assert_eq!(b.device_stats(1).memory_bytes, 10_000);
    assert_eq!(b.device_stats(2).memory_bytes, 5_000);
    assert_eq!(b.memory(), 30_000);
    // device 2 (5,000) now asks for more: the largest is device 0 (15,000)
    hold(&mut b, &mut out, 4 * MS, (2, 2), 5_000, 201);
    assert_eq!(out, vec![0, 1]);
    assert_eq!(b.device_stats(2).memory_bytes, 10_000);
    // the largest asking for more overflows its own flow instead
    hold(&mut b, &mut out, 5 * MS, (0, 7), 5_000, 7);
    assert_eq!(out, vec![0, 1, 7]);
    assert_eq!(b.device_stats(0).gateway_memory_limit_hits, 3);
    assert!(b.memory() <= 30_000);
}

/// One step of the property test.
#[derive(Clone, Debug)]
enum Op {
    Push {
        device: usize,
        flow: u16,
        seq: u32,
        llc: bool,
        cost: usize,
    },
    Tick(u64),
    Expire,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..3usize, 0..12u16, 0..40u32, any::<bool>(), 0..4_000usize).prop_map(
            |(device, flow, seq, llc, cost)| Op::Push { device, flow, seq, llc, cost }
        ),
        1 => (1..200u64).prop_map(Op::Tick),
        1 => Just(Op::Expire),
    ]
}

proptest! {
    /// The accounted occupancy equals the buffers held, the accounted memory
    /// equals them plus the gaps, nothing exceeds its bound, and every packet
    /// comes out exactly once.
    #[test]
    fn accounting_equals_what_is_held_and_stays_under_the_caps(
        ops in proptest::collection::vec(op(), 1..300)
    ) {
        let cfg = ReorderConfig {
            max_flow_bytes: 9_000,
            max_device_bytes: 14_000,
            max_total_bytes: 24_000,
            max_device_flows: 7,
            max_flows: 12,
            flow_idle: 300 * MS,
            max_timeout: 200 * MS,
            ..ReorderConfig::default()
        };
        let mut b = Rb::new(cfg.clone());
        let mut out = Vec::new();
        let mut now = 0;
        let mut pushed = 0u32;
        for op in ops {
            match op {
                Op::Push { device, flow, seq, llc, cost } => {
                    let ch = if llc { Llc } else { Hbc };
                    b.push(now, (device, flow), seq, ch, cost, pushed, &mut out);
                    pushed += 1;
                }
                Op::Tick(ms) => {
                    now += ms * MS;
                    b.handle_timeout(now, &mut out);
                }
                Op::Expire => b.expire(now, &mut out),
            }
            let mut held = 0;
            let mut memory = 0;
            let mut per_device = [0usize; 3];
            let mut flows = [0usize; 3];
            for (device, accounted, f) in b.flows.iter() {
                let costs: usize = f.held.values().map(|h| h.cost).sum();
                prop_assert_eq!(costs, f.held_bytes);
                prop_assert_eq!(accounted, f.memory());
                held += costs;
                memory += f.memory();
                per_device[device] += f.memory();
                flows[device] += 1;
            }
            prop_assert_eq!(b.occupancy(), held);
            prop_assert_eq!(b.memory(), memory);
            prop_assert!(memory <= cfg.max_total_bytes, "{} > total cap", memory);
            prop_assert!(b.flows() <= cfg.max_flows);
            for d in 0..3 {
                let s = b.device_stats(d);
                prop_assert_eq!(s.memory_bytes, per_device[d]);
                prop_assert!(s.memory_bytes <= cfg.max_device_bytes);
                prop_assert_eq!(s.flows, flows[d]);
                prop_assert!(s.flows <= cfg.max_device_flows);
            }
        }
        // the rest comes out at the timeouts; every packet exactly once
        b.handle_timeout(now + 10_000 * MS, &mut out);
        prop_assert_eq!(b.occupancy(), 0);
        out.sort_unstable();
        prop_assert_eq!(out, (0..pushed).collect::<Vec<_>>());
    }
}

#[test]
fn a_forgotten_device_hands_back_what_it_held_and_its_slot_starts_over() {
    // a peer removed from the gateway's table (Shared::change_peers): its
    // flows, memory and counters go; the other device's stay as they were
    let cfg = ReorderConfig {
        max_device_flows: 2,
        ..small()
    };
    let mut b = Rb::new(cfg);
    let mut out = Vec::new();
    hold(&mut b, &mut out, 0, (0, 1), 1_000, 1);
    hold(&mut b, &mut out, MS, (0, 2), 1_000, 2);
    hold(&mut b, &mut out, 2 * MS, (1, 1), 1_000, 3);
    // a third flow of device 0 (limit 2) evicts its oldest, releasing id 1
    hold(&mut b, &mut out, 3 * MS, (0, 3), 1_000, 4);
    assert_eq!(out, [1]);
    assert_eq!(b.device_stats(0).device_flow_limit_evictions, 1);
    let other = b.device_stats(1);
    b.forget_device(0, &mut out);
    assert_eq!(out, [1, 2, 4], "device 0's held packets, oldest flow first");
    assert_eq!(b.device_stats(0), DeviceReorderStats::default());
    assert_eq!(b.device_stats(1), other);
    assert_eq!((b.flows(), b.occupancy()), (1, 1_000));
    assert_eq!(b.memory(), other.memory_bytes);
    assert!(tracks(&b, (1, 1)));
    // a peer in the reused slot: its flow (0, 2) is new, seq 0 goes at once
    b.push(4 * MS, (0, 2), 0, Hbc, 100, 5, &mut out);
    assert_eq!(out, [1, 2, 4, 5]);
    let fresh = b.device_stats(0);
    assert_eq!((fresh.flows, fresh.device_flow_limit_evictions), (1, 0));
    // the forgotten packets' deadlines release nothing twice
    b.handle_timeout(10_000 * MS, &mut out);
    assert_eq!(out, [1, 2, 4, 5, 3]);
    assert_eq!(b.occupancy(), 0);
}

#[test]
fn the_default_bounds_as_docs_reliability_states_them() {
    // the agent's payload: the receive half's delivery of a 1,564-byte buffer
    // (--outer-mtu 1500 + 64: main.rs max_datagram)
    type Agent = ReorderBuffer<Key, crate::endpoint::Deliver<Vec<u8>>>;
    let cfg = ReorderConfig::default();
    let (device, total) = Agent::bytes_bound(&cfg, 1564);
    let flow = Flows::<Key, FlowRx<crate::endpoint::Deliver<Vec<u8>>>>::bytes_per_flow();
    println!("reorder: per flow {flow} B; per device {device} B; all devices {total} B");
    // docs/reliability.md: at most 13 MiB per device and 96 MiB in all
    assert!(device <= 13 << 20, "{device}");
    assert!(total <= 96 << 20, "{total}");
    let sender = crate::flow_table::FlowTable::bytes_bound(65_536);
    println!(
        "sender flow table: 65,536 flows {sender} B; per flow {} B",
        sender / 65_536
    );
}
