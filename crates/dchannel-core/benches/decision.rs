//! Cost of one steering decision: parse + flow lookup + policy + bookkeeping
//! (`Steerer::steer`), and the bare `dchannel` policy (Algorithm 1).
//! Run: cargo bench -p dchannel-core --bench decision

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dchannel_core::packet::{self, build};
use dchannel_core::policy::{parse_spec, testutil};
use dchannel_core::steer::{ChannelView, SteerConfig, Steerer};
use dchannel_core::{Direction, MS};

fn bench(c: &mut Criterion) {
    let ack = build::tcp4([198, 19, 0, 2], [198, 18, 0, 1], 40000, 443, 0x10, &[]);
    let view = ChannelView::up(Some(20 * MS), Some(5 * MS));
    // A QUIC short-header data packet (UDP from port 443, crate::quic): the QUIC rules of
    // pkt-state and pkt-control and the agents' packet class all look at its kind.
    let mut quic_payload = vec![0u8; 1200];
    quic_payload[0] = 0x40;
    let quic = build::udp4([198, 18, 0, 1], [198, 19, 0, 2], 443, 40000, &quic_payload);
    for (spec, pkt, name) in [
        ("dchannel", &ack, ""),
        ("pkt-state", &ack, ""),
        ("asap", &ack, ""),
        ("dchannel", &quic, " quic"),
        ("pkt-state", &quic, " quic"),
        ("pkt-control", &quic, " quic"),
    ] {
        let mut s = Steerer::new(SteerConfig::default(), parse_spec(spec, 0.75).unwrap());
        let mut now = 0u64;
        c.bench_function(&format!("steer/{spec}{name}"), |b| {
            b.iter(|| {
                now += 10_000;
                black_box(s.steer(now, black_box(pkt), &view).channel)
            })
        });
    }
    // Floods (issue 16): decisions per second when every packet belongs to a
    // flow never seen before (cycling over 1,000,000 distinct 5-tuples through
    // the default 65,536-flow table, so each one evicts the least recently seen
    // flow), against steady traffic over 1,000 established flows. The packet
    // is rewritten in place, as a TUN read leaves it in cache.
    for (name, flows) in [("steady 1k flows", 1_000u32), ("flood 1M flows", 1_000_000)] {
        let mut pkt = ack.clone();
        let mut s = Steerer::new(
            SteerConfig::default(),
            parse_spec("dchannel", 0.75).unwrap(),
        );
        let (mut now, mut i) = (0u64, 0u32);
        c.bench_function(&format!("steer/dchannel {name}"), |b| {
            b.iter(|| {
                now += 10_000;
                i = (i + 1) % flows;
                // 16 sources x 65,536 ports: the flow key of packet i
                pkt[12..16].copy_from_slice(&[198, 19, (i >> 16) as u8, 2]);
                pkt[20..22].copy_from_slice(&((i & 0xffff) as u16).to_be_bytes());
                black_box(s.steer(now, black_box(&pkt), &view).channel)
            })
        });
        let table = s.flow_table();
        println!(
            "{name}: {} flows in the table (capacity {}), {} created, {} forced evictions; \
             table bound {:.1} MiB",
            table.len(),
            SteerConfig::default().flow_capacity,
            table.stats.created,
            table.stats.forced_evictions,
            dchannel_core::flow_table::FlowTable::bytes_bound(SteerConfig::default().flow_capacity)
                as f64
                / 1048576.0
        );
    }

    let info = packet::parse(&ack).unwrap();
    let mut p = parse_spec("dchannel", 0.75).unwrap();
    let mut flow = testutil::flow();
    let mut ctx = testutil::ctx(0, Direction::Uplink);
    ctx.llc_queue = 300.0;
    ctx.overhead = 44;
    c.bench_function("policy/dchannel", |b| {
        b.iter(|| {
            ctx.now += 10_000;
            black_box(p.decide(black_box(&info), &ack, &mut flow, &ctx).channel)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
