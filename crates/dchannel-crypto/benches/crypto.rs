//! Cost of sealing and opening one datagram (1400 B and 64 KiB payloads):
//! the raw AEADs (ring AES-256-GCM, ring ChaCha20-Poly1305, RustCrypto
//! chacha20poly1305) and the full `Peers::seal` / `Peers::open` path (index
//! lookup, replay window, counters), plus one complete handshake and what a
//! junk initiation costs the gateway.
//!
//! `cargo bench -p dchannel-crypto --bench crypto`; numbers in docs/benchmarks.md.

#[path = "../tests/common/mod.rs"]
mod common;

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use common::{handshake, pair};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use dchannel_crypto::aead::TransportKey;
use dchannel_crypto::format::{field, INITIATION_LEN, MAX_HANDSHAKE_LEN, PREFIX_LEN, TAG_LEN};
use dchannel_crypto::{mac, Channel, Cipher, Config, PeerId, Peers, PrivateKey};
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

const SIZES: [(usize, &str); 2] = [(1400, "1400B"), (65_536, "64KiB")];
const H: usize = 16;

fn raw_aead(c: &mut Criterion) {
    let mut g = c.benchmark_group("aead");
    for (size, label) in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            let k = TransportKey::new(cipher, &mut [9u8; 32]);
            let mut data = vec![0x5au8; size];
            let mut tag = [0u8; TAG_LEN];
            let ad = [1u8; PREFIX_LEN + H];
            let mut ctr = 0u64;
            g.bench_function(format!("seal/ring-{}/{label}", cipher.as_str()), |b| {
                b.iter(|| {
                    ctr += 1;
                    k.seal(Channel::Hbc, ctr, &ad, &mut data, &mut tag);
                    black_box(&tag);
                })
            });
            let mut sealed = vec![0x5au8; size + TAG_LEN];
            let (d, t) = sealed.split_at_mut(size);
            k.seal(Channel::Hbc, 1, &ad, d, t);
            g.bench_function(format!("open/ring-{}/{label}", cipher.as_str()), |b| {
                b.iter_batched_ref(
                    || sealed.clone(),
                    |buf| k.open(Channel::Hbc, 1, &ad, buf).unwrap(),
                    BatchSize::SmallInput,
                )
            });
        }
        let rc = chacha20poly1305::ChaCha20Poly1305::new(&[9u8; 32].into());
        let mut data = vec![0x5au8; size];
        let ad = [1u8; PREFIX_LEN + H];
        g.bench_function(format!("seal/rustcrypto-chacha20poly1305/{label}"), |b| {
            b.iter(|| {
                let t = rc
                    .encrypt_in_place_detached(&[0u8; 12].into(), &ad, &mut data)
                    .unwrap();
                black_box(t);
            })
        });
    }
    g.finish();
}

struct Ends {
    dev: Peers,
    gw: Peers,
    g: PeerId,
}

fn ends(cipher: Cipher) -> Ends {
    let (dk, gk) = (PrivateKey::generate(), PrivateKey::generate());
    let cfg = Config {
        cipher,
        ..Config::default()
    };
    let (mut dev, mut gw, g) = pair(&dk, &gk, cfg);
    handshake(&mut dev, &mut gw, g).unwrap();
    Ends { dev, gw, g }
}

fn peers_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("peers");
    let from: SocketAddr = "198.18.0.2:1".parse().unwrap();
    for (size, label) in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            let mut e = ends(cipher);
            let mut buf = vec![0u8; PREFIX_LEN + H + size + TAG_LEN];
            g.bench_function(format!("seal/{}/{label}", cipher.as_str()), |b| {
                b.iter(|| e.dev.seal(1, e.g, Channel::Hbc, &mut buf, size).unwrap())
            });
            let Ends { dev, gw, g: gid } = &mut e;
            g.bench_function(format!("open/{}/{label}", cipher.as_str()), |b| {
                b.iter_batched_ref(
                    || {
                        let mut d = vec![0u8; PREFIX_LEN + H + size + TAG_LEN];
                        dev.seal(1, *gid, Channel::Llc, &mut d, size).unwrap();
                        d
                    },
                    |d| gw.open(1, Channel::Llc, from, d).unwrap(),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

fn handshake_cost(c: &mut Criterion) {
    let (dk, gk) = (PrivateKey::generate(), PrivateKey::generate());
    let cfg = Config {
        rate_limit: dchannel_crypto::ratelimit::RateLimit {
            per_source_burst: u64::MAX / 4_000_000_000,
            global_burst: u64::MAX / 4_000_000_000,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut gw = Peers::new(gk.clone(), cfg);
    gw.add_peer(dk.public_key(), "dev", false).unwrap();
    let mut t = 0;
    c.bench_function("handshake/complete (both ends)", |b| {
        b.iter(|| {
            t += 1;
            let mut dev = Peers::new(
                dk.clone(),
                Config {
                    wall_clock_at_zero: t * 1_000_000_000,
                    ..cfg
                },
            );
            let g = dev.add_peer(gk.public_key(), "gw", true).unwrap();
            handshake(&mut dev, &mut gw, g).unwrap();
        })
    });
}

/// What one junk initiation costs the gateway's `open` (docs/wire.md
/// "Handshake floods"): refused at mac1; with a valid mac1 under load
/// (a cookie reply, taken out of the queue as the agent does); with a valid
/// mac1 and no load (Noise refuses it after the Diffie-Hellman).
fn junk_cost(c: &mut Criterion) {
    let gk = PrivateKey::generate();
    let mut junk = [0u8; INITIATION_LEN];
    junk.iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i as u8).wrapping_mul(37));
    junk[0] = 0x21;
    let from: SocketAddr = "10.0.0.1:1024".parse().unwrap();
    let mut out = [0u8; MAX_HANDSHAKE_LEN];
    let gw = Peers::new(gk.clone(), Config::default());
    c.bench_function("handshake/junk initiation, bad mac1", |b| {
        b.iter(|| {
            gw.open(0, Channel::Llc, from, &mut black_box(junk))
                .unwrap_err()
        })
    });
    mac::write(
        &mac::mac1_key(&gk.public_key()),
        &mut junk,
        field::INIT_MAC1,
    );
    // a budget of 10 that never refills: under load after 6 offers, for good
    let finite = Config {
        rate_limit: dchannel_crypto::ratelimit::RateLimit {
            global_burst: 10,
            global_per_s: 0,
            ..Default::default()
        },
        ..Config::default()
    };
    let gw = Peers::new(gk.clone(), finite);
    for _ in 0..6 {
        let _ = gw.open(0, Channel::Llc, from, &mut junk.clone());
    }
    c.bench_function("handshake/keyed junk under load, cookie reply", |b| {
        b.iter(|| {
            let r = gw.open(0, Channel::Llc, from, &mut black_box(junk));
            assert_eq!(r, Err(dchannel_crypto::CryptoDrop::CookieReplied));
            gw.poll_transmit(&mut out).unwrap()
        })
    });
    let generous = Config {
        rate_limit: dchannel_crypto::ratelimit::RateLimit {
            per_source_burst: u64::MAX / 4_000_000_000,
            global_burst: u64::MAX / 4_000_000_000,
            ..Default::default()
        },
        ..Config::default()
    };
    let gw = Peers::new(gk, generous);
    c.bench_function("handshake/keyed junk, no load, DH then refused", |b| {
        b.iter(|| {
            gw.open(0, Channel::Llc, from, &mut black_box(junk))
                .unwrap_err()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = raw_aead, peers_path, handshake_cost, junk_cost
}
criterion_main!(benches);
