//! Memory per device at the gateway, measured with a counting allocator:
//! 10,000 configured devices without sessions, then 1,000 of them with an
//! established session. Prints the figures (docs/benchmarks.md) and checks
//! the bounds stated there.

mod common;

use common::handshake;
use dchannel_crypto::devices::{format_devices, parse_devices, Device};
use dchannel_crypto::ratelimit::RateLimit;
use dchannel_crypto::{Config, Opened, Peers, PrivateKey};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: p was allocated by System with layout l.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn memory_per_device_and_per_session() {
    const N: usize = 10_000;
    const ACTIVE: usize = 1_000;
    let keys: Vec<PrivateKey> = (0..ACTIVE).map(|_| PrivateKey::generate()).collect();
    let devices: Vec<Device> = (0..N)
        .map(|i| Device {
            name: format!("device-{i:05}"),
            public_key: if i < ACTIVE {
                keys[i].public_key()
            } else {
                PrivateKey::generate().public_key()
            },
            address: None,
        })
        .collect();
    let text = format_devices(&devices);
    drop(devices);
    let cfg = Config {
        rate_limit: RateLimit {
            per_source_burst: 1_000_000,
            global_burst: 1_000_000,
            ..RateLimit::default()
        },
        ..Config::default()
    };
    let gw_key = PrivateKey::generate();
    let t = std::time::Instant::now();
    let base = live();
    let mut gw = Peers::new(gw_key.clone(), cfg);
    {
        let parsed = parse_devices(&text, "devices.toml").unwrap();
        gw.reserve(parsed.len());
        for d in parsed {
            gw.add_peer(d.public_key, d.name, false).unwrap();
        }
    }
    let load = t.elapsed();
    let idle = (live() - base) as f64 / N as f64;

    // ACTIVE devices complete a handshake and confirm the session
    let before = live();
    for k in &keys {
        let mut dev = Peers::new(k.clone(), cfg);
        let g = dev.add_peer(gw_key.public_key(), "gw", true).unwrap();
        assert!(matches!(
            handshake(&mut dev, &mut gw, g),
            Ok(Opened::Keepalive { .. })
        ));
    }
    let per_session = (live() - before) as f64 / ACTIVE as f64;
    eprintln!(
        "{N} devices loaded in {load:?}: {idle:.0} B per device without session; \
         {per_session:.0} B more per device with a session"
    );
    assert_eq!(gw.len(), N);
    // bounds stated in docs/benchmarks.md
    assert!(idle < 256.0, "{idle} B per idle device");
    assert!(per_session < 4096.0, "{per_session} B per session");
    assert!(load < std::time::Duration::from_secs(1), "{load:?}");
}
