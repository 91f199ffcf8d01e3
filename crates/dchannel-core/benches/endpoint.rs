//! Cost of the endpoint per packet, without I/O: the send half steering and
//! encapsulating a TCP ACK in place (`handle_tun`), and the receive half
//! admitting the datagram and handing it to the reorder buffer
//! (`handle_datagram` + draining `deliveries`), buffers recycled as the
//! driver does. Run: cargo bench -p dchannel-core --bench endpoint

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use dchannel_core::endpoint::{self, Config, PeerConfig, Received, Role, TokenAuth, HEADROOM};
use dchannel_core::packet::build;
use dchannel_core::policy::parse_spec;
use dchannel_core::Channel;
use std::net::SocketAddr;

fn bench(c: &mut Criterion) {
    let gw: [SocketAddr; 2] = [
        "198.18.1.1:4000".parse().unwrap(),
        "198.18.2.1:4001".parse().unwrap(),
    ];
    let peers = vec![PeerConfig {
        name: "gateway".into(),
        token: 0x0011_2233_aabb_ccdd,
        tunnel_addr: None,
        endpoints: [Some(gw[0]), Some(gw[1])],
    }];
    let auth = TokenAuth::new(&peers).unwrap();
    let (mut tx, mut rx) =
        endpoint::new::<Vec<u8>, _>(Config::new(Role::Client), peers, auth, || {
            parse_spec("dchannel", 0.75).unwrap()
        })
        .unwrap();
    let ack = build::tcp4([198, 19, 0, 2], [198, 18, 3, 2], 40000, 443, 0x10, &[]);
    let mut buf = vec![0u8; 2048];
    let mut now = 0u64;
    c.bench_function("endpoint/handle_tun", |b| {
        b.iter(|| {
            now += 10_000;
            buf[HEADROOM..HEADROOM + ack.len()].copy_from_slice(&ack);
            black_box(tx.handle_tun(now, &mut buf, ack.len()).unwrap().len)
        })
    });
    let t = tx.handle_tun(now, &mut buf, ack.len()).unwrap();
    let datagram = buf[..t.len].to_vec();
    let mut spare = datagram.clone();
    let mut seq = 0u32;
    c.bench_function("endpoint/handle_datagram", |b| {
        b.iter(|| {
            now += 10_000;
            seq += 1;
            spare.copy_from_slice(&datagram);
            spare[4..8].copy_from_slice(&seq.to_be_bytes());
            let d = std::mem::take(&mut spare);
            let r = rx.handle_datagram(now, Channel::Hbc, gw[0], d);
            assert!(matches!(r, Received::Data(_)));
            for d in rx.deliveries() {
                spare = d.buf;
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
