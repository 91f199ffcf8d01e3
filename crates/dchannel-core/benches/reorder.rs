//! Per-packet cost of the reorder buffer while one device cycles flow ids as
//! fast as it can (issue 37, "Isolation between devices"): the buffer is full
//! (`flows` flows tracked), every packet of device 0 opens a new flow (so the
//! buffer evicts one per packet), and after each of them device 1 sends the
//! next in-order packet of its one long flow. One iteration is that pair of
//! packets; the cost should not grow with `flows` (no scan of the flows).
//! `reorder/steady` is device 1's packet alone, for comparison.
//! Run: cargo bench -p dchannel-core --bench reorder (docs/benchmarks.md)

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use dchannel_core::reorder::{ReorderBuffer, ReorderConfig};
use dchannel_core::Channel;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("reorder");
    for flows in [1_024usize, 4_096, 16_384] {
        let cfg = ReorderConfig {
            max_flows: flows,
            ..ReorderConfig::default()
        };
        let mut b: ReorderBuffer<(usize, u16), u32> = ReorderBuffer::new(cfg);
        let mut out = Vec::new();
        let mut now = 0u64;
        // fill the buffer with device 0's flows
        for id in 0..flows as u16 {
            now += 1_000;
            b.push(now, (0, id), 0, Channel::Hbc, 1564, 0, &mut out);
        }
        let mut next_id = flows as u16;
        let mut seq = 0u32;
        g.bench_with_input(BenchmarkId::new("cycling", flows), &flows, |bench, _| {
            bench.iter(|| {
                now += 1_000;
                next_id = next_id.wrapping_add(1);
                b.push(now, (0, next_id), 0, Channel::Hbc, 1564, 0, &mut out);
                seq += 1;
                b.push(now, (1, 1), seq, Channel::Hbc, 1564, seq, &mut out);
                black_box(out.len());
                out.clear();
            })
        });
        g.bench_with_input(BenchmarkId::new("steady", flows), &flows, |bench, _| {
            bench.iter(|| {
                now += 1_000;
                seq += 1;
                b.push(now, (1, 1), seq, Channel::Hbc, 1564, seq, &mut out);
                black_box(out.len());
                out.clear();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
