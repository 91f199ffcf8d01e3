//! `Peers::open` never panics, whatever arrives, and never answers garbage
//! (property test; proptest's default 256 cases per property, each against a
//! gateway with a freshly established session).

mod common;

use common::{handshake, pair};
use dchannel_crypto::format::{MAX_HANDSHAKE_LEN, PREFIX_LEN, TAG_LEN};
use dchannel_crypto::{Channel, Config, Opened, Peers, PrivateKey};
use proptest::prelude::*;
use std::net::SocketAddr;

/// A gateway with one established device session; returns the gateway and a
/// genuine transport datagram (whose index and layout the mutations reuse).
fn setup() -> (Peers, Vec<u8>) {
    let dk = PrivateKey::from_bytes([1; 32]);
    let gk = PrivateKey::from_bytes([2; 32]);
    let (mut dev, mut gw, g) = pair(&dk, &gk, Config::default());
    assert!(matches!(
        handshake(&mut dev, &mut gw, g),
        Ok(Opened::Keepalive { .. })
    ));
    let mut d = vec![0u8; PREFIX_LEN + 16 + 100 + TAG_LEN];
    let n = dev.seal(1, g, Channel::Hbc, &mut d, 100).unwrap();
    d.truncate(n);
    (gw, d)
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 0x1fu8..0x24) {
        let (gw, _) = setup();
        let mut b = bytes;
        if let Some(first) = b.first_mut() {
            *first = ty;
        }
        let from: SocketAddr = "198.18.0.9:9".parse().unwrap();
        let r = gw.open(5, Channel::Llc, from, &mut b);
        prop_assert!(r.is_err());
        let mut buf = [0u8; MAX_HANDSHAKE_LEN];
        prop_assert!(gw.poll_transmit(&mut buf).is_none());
    }

    #[test]
    fn mutated_genuine_datagrams_never_panic_and_never_authenticate(
        at in 0usize..145, bit in 0u8..8, cut in 0usize..145,
    ) {
        let (gw, d) = setup();
        let mut m = d.clone();
        let at = at % m.len();
        m[at] ^= 1 << bit;
        m.truncate(cut.max(1).min(m.len()));
        let from: SocketAddr = "198.18.0.9:9".parse().unwrap();
        prop_assert!(gw.open(5, Channel::Hbc, from, &mut m).is_err());
        // the genuine one still goes through afterwards
        let mut ok = d;
        prop_assert!(gw.open(5, Channel::Hbc, from, &mut ok).is_ok());
    }
}
