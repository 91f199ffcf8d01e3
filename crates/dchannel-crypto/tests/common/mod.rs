//! Scaffolding shared by the integration tests and the benchmark (which
//! includes this file with `#[path]`): a device and a gateway table that know
//! each other, and the three-message handshake that gives them a session.
// Each test binary uses its own subset.
#![allow(dead_code)]

use dchannel_crypto::format::MAX_HANDSHAKE_LEN;
use dchannel_crypto::{Config, CryptoDrop, Opened, PeerId, Peers, PrivateKey, Transmit};
use std::net::SocketAddr;

/// The device's address in the tests.
pub fn dev_addr() -> SocketAddr {
    "198.18.0.2:4000".parse().unwrap()
}

/// The gateway's address in the tests.
pub fn gw_addr() -> SocketAddr {
    "198.18.0.1:5000".parse().unwrap()
}

/// Everything `p` has queued to send, with its bytes.
pub fn take_all(p: &mut Peers) -> Vec<(Transmit, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = [0u8; MAX_HANDSHAKE_LEN];
    while let Some(t) = p.poll_transmit(&mut buf) {
        out.push((t, buf[..t.len].to_vec()));
    }
    out
}

/// A device and a gateway that know each other (fresh keys; the device's peer
/// "gateway", the gateway's "phone"), the ids on each side and the device's key.
pub struct Pair {
    pub dev: Peers,
    pub gw: Peers,
    /// The gateway as the device's peer.
    pub gw_id: PeerId,
    /// The device as the gateway's peer.
    pub dev_id: PeerId,
    pub dev_key: PrivateKey,
}

/// A [`Pair`] whose tables both have configuration `cfg`.
pub fn pair_with(cfg: Config) -> Pair {
    let dev_key = PrivateKey::generate();
    let gw_key = PrivateKey::generate();
    let dev = Peers::new(dev_key.clone(), cfg);
    let gw = Peers::new(gw_key.clone(), cfg);
    let gw_id = dev.add_peer(gw_key.public_key(), "gateway", true).unwrap();
    let dev_id = gw.add_peer(dev_key.public_key(), "phone", false).unwrap();
    Pair {
        dev,
        gw,
        gw_id,
        dev_id,
        dev_key,
    }
}

/// The device's table (its one peer, the gateway, is the one it initiates
/// with), the gateway's table (its one peer, the device) and the gateway's id
/// in the device's table. Unlike [`pair_with`], from keys the caller holds (the fuzz
/// test fixes them: reproducible cases), and without the device's id.
pub fn pair(dev_key: &PrivateKey, gw_key: &PrivateKey, cfg: Config) -> (Peers, Peers, PeerId) {
    let dev = Peers::new(dev_key.clone(), cfg);
    let gw = Peers::new(gw_key.clone(), cfg);
    let g = dev.add_peer(gw_key.public_key(), "gw", true).unwrap();
    gw.add_peer(dev_key.public_key(), "dev", false).unwrap();
    (dev, gw, g)
}

/// Runs a handshake at time 0, every datagram from one source address: the
/// device's initiation to `gw` (its peer `g`), the gateway's response, the
/// device's confirming keepalive. Returns what the gateway made of that
/// keepalive (`Ok(Opened::Keepalive)` once both sides have the session).
pub fn handshake(dev: &mut Peers, gw: &mut Peers, g: PeerId) -> Result<Opened, CryptoDrop> {
    let from: SocketAddr = "198.18.0.2:1".parse().unwrap();
    let mut buf = [0u8; MAX_HANDSHAKE_LEN];
    dev.connect(0, g);
    dev.handle_timeout(0);
    let t = dev.poll_transmit(&mut buf).unwrap();
    gw.open(0, t.channel, from, &mut buf[..t.len]).unwrap();
    let t = gw.poll_transmit(&mut buf).unwrap();
    dev.open(0, t.channel, from, &mut buf[..t.len]).unwrap();
    let t = dev.poll_transmit(&mut buf).unwrap();
    gw.open(0, t.channel, from, &mut buf[..t.len])
}
