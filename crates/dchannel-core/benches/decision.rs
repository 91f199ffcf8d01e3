//! Cost of one steering decision: parse + flow lookup + policy + bookkeeping
//! (`Steerer::steer`), and the bare `dchannel` policy (Algorithm 1).
//! Run: cargo bench -p dchannel-core --bench decision

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dchannel_core::packet::{self, build};
use dchannel_core::policy::{parse_spec, Ctx};
use dchannel_core::steer::{ChannelView, SteerConfig, Steerer};
use dchannel_core::{flow_table::FlowState, Direction, MS};

fn bench(c: &mut Criterion) {
    let ack = build::tcp4([198, 19, 0, 2], [198, 18, 0, 1], 40000, 443, 0x10, &[]);
    let view = ChannelView::up(Some(20 * MS), Some(5 * MS));
    for spec in ["dchannel", "pkt-state", "asap"] {
        let mut s = Steerer::new(SteerConfig::default(), parse_spec(spec, 0.75).unwrap());
        let mut now = 0u64;
        c.bench_function(&format!("steer/{spec}"), |b| {
            b.iter(|| {
                now += 10_000;
                black_box(s.steer(now, black_box(&ack), &view).channel)
            })
        });
    }
    let info = packet::parse(&ack).unwrap();
    let mut p = parse_spec("dchannel", 0.75).unwrap();
    let mut flow = FlowState {
        id: 1,
        next_seq: 0,
        prev_c: 0.0,
        prev_size: 0,
        last_seen: 0,
    };
    let mut ctx = Ctx {
        now: 0,
        dir: Direction::Uplink,
        llc_queue: 300.0,
        llc_rate: 250.0 / MS as f64,
        hbc_owd: Some(20 * MS),
        llc_owd: Some(5 * MS),
        mtu: 1456,
        overhead: 44,
    };
    c.bench_function("policy/dchannel", |b| {
        b.iter(|| {
            ctx.now += 10_000;
            black_box(p.decide(black_box(&info), &ack, &mut flow, &ctx).channel)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
