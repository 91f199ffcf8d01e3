//! The endpoint's authentication layer backed by this crate: [`AeadAuth`]
//! implements `dchannel_core::endpoint::DatagramAuth`, so the agent's two
//! halves seal and open every datagram with the per-channel AEAD transport
//! and run the Noise IK handshake through their own `poll_transmit` and
//! timers.
//!
//! On the wire (docs/wire.md, "Encrypted datagrams"), a dchannel datagram
//! becomes `0x20 | receiver index | counter | header (16, in clear,
//! authenticated) | encrypted body | tag (16)`: the endpoint leaves
//! [`PREFIX_LEN`] bytes of headroom in front of the header and [`TAG_LEN`]
//! bytes of tailroom after the body. Handshake messages (`0x21`, `0x22`) and
//! keepalives (a transport datagram without header and body) are consumed
//! here and reported as `Opened::Control`.
//!
//! Endpoint peer `i` is [`PeerId`]`(i)`: the constructors build the table in
//! the order of the endpoint's peer list. The halves (two threads, or more
//! at a gateway with several workers) share one [`Peers`] table, which locks
//! per peer: sealing needs that peer's send counters, opening its replay
//! windows, both short, allocation-free critical sections; a handshake's
//! Diffie-Hellman work holds no lock (see [`Peers`]).

use crate::devices::Device;
use crate::format::{COOKIE_REPLY_LEN, INITIATION_LEN, KEEPALIVE_LEN, MAX_HANDSHAKE_LEN};
use crate::format::{PREFIX_LEN, RESPONSE_LEN, TAG_LEN, TYPE_COOKIE_REPLY, TYPE_INITIATION};
use crate::format::{TYPE_RESPONSE, TYPE_TRANSPORT};
use crate::peers::{DuplicatePeer, Stats};
use crate::SealError;
use crate::{Config, CryptoDrop, DropCounts, Nanos, Opened, PeerId, Peers, PrivateKey, PublicKey};
use dchannel_core::endpoint::{
    self, AuthTransmit, DatagramAuth, DropReason, Outgoing, Shape, Source,
};
use dchannel_core::wire::{Header, HEADER_LEN};
use std::sync::{Arc, Mutex};

/// The counter of a refused datagram in the endpoint's terms: one
/// `unauthentic` counter; the layer counts `d` itself (`crypto.drops`).
pub fn drop_reason(_d: CryptoDrop) -> DropReason {
    DropReason::Unauthentic
}

/// AEAD sealing and opening for a `dchannel_core` endpoint; clones share the
/// session state (one clone per half).
#[derive(Clone)]
pub struct AeadAuth {
    peers: Arc<Peers>,
    /// Peers this side starts handshakes with (the client's gateway).
    initiators: Arc<[PeerId]>,
    /// Held by [`AeadAuth::with_peers`]: one change of the table (and of the
    /// endpoint's peers that follow it) at a time.
    changes: Arc<Mutex<()>>,
}

impl AeadAuth {
    /// The device side: one peer, the gateway with static key `gateway`, to
    /// which a handshake is started at once (at the first
    /// `handle_timeout`). `cfg.header_len` is set to the dchannel header's.
    pub fn client(local: PrivateKey, gateway: PublicKey, cfg: Config) -> AeadAuth {
        let peers = Peers::new(local, with_header(cfg));
        let id = peers
            .add_peer(gateway, "gateway", true)
            .expect("an empty table has no duplicate");
        peers.connect(0, id);
        AeadAuth {
            peers: Arc::new(peers),
            initiators: Arc::from([id]),
            changes: Arc::default(),
        }
    }

    /// The operator side: one responder-only peer per device, in the order
    /// of `devices` (the endpoint's peer list must follow the same order).
    pub fn gateway(
        local: PrivateKey,
        devices: &[Device],
        cfg: Config,
    ) -> Result<AeadAuth, DuplicatePeer> {
        let peers = Peers::from_devices(local, with_header(cfg), devices)?;
        Ok(AeadAuth {
            peers: Arc::new(peers),
            initiators: Arc::from([]),
            changes: Arc::default(),
        })
    }

    /// The session table the clones share.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// Datagrams refused so far, per reason.
    pub fn drops(&self) -> DropCounts {
        self.peers.drops()
    }

    /// Handshake counters.
    pub fn stats(&self) -> Stats {
        self.peers.stats()
    }

    /// Whether a session with endpoint peer `peer` exists.
    pub fn has_session(&self, peer: usize) -> bool {
        self.peers
            .peer(PeerId(peer as u32))
            .is_some_and(|p| p.has_session())
    }

    /// Runs `f` on the peer table with every other change to it held off:
    /// the gateway's live configuration adds, removes and re-keys devices
    /// with [`Peers::add_peer`] and [`Peers::remove_peer`] (endpoint peer `i`
    /// stays [`PeerId`]`(i)`) and publishes the matching endpoint peers inside
    /// `f`. Datagrams are not held off: other peers' go on meanwhile, a
    /// removed peer's are refused from its `remove_peer` on, and a new peer's
    /// initiation answered before the endpoint has its slot is answered all
    /// the same (the response goes to the initiation's source); the
    /// endpoint's receive half picks the new slot up at the peer's first
    /// authenticated datagram.
    pub fn with_peers<R>(&self, f: impl FnOnce(&Peers) -> R) -> R {
        let _one_change_at_a_time = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        f(&self.peers)
    }

    /// The static key of endpoint peer `peer`, if it exists.
    pub fn public_key(&self, peer: usize) -> Option<PublicKey> {
        self.peers.peer(PeerId(peer as u32)).map(|p| p.public_key)
    }

    /// When the current session with endpoint peer `peer` was established
    /// (the agent's clock), if there is one.
    pub fn session_created(&self, peer: usize) -> Option<Nanos> {
        self.peers
            .peer(PeerId(peer as u32))
            .and_then(|p| p.session_created())
    }
}

fn with_header(cfg: Config) -> Config {
    Config {
        header_len: HEADER_LEN,
        ..cfg
    }
}

impl DatagramAuth for AeadAuth {
    /// docs/wire.md "Encrypted datagrams": a transport datagram (a keepalive
    /// at the least), an initiation, a response or a cookie reply, each of
    /// its exact size.
    fn shapes(&self) -> Vec<Shape> {
        let exact = |first: u8, len: usize| Shape {
            mask: 0xff,
            first,
            min_len: len,
            max_len: len,
        };
        vec![
            Shape {
                max_len: u16::MAX as usize,
                ..exact(TYPE_TRANSPORT, KEEPALIVE_LEN)
            },
            exact(TYPE_INITIATION, INITIATION_LEN),
            exact(TYPE_RESPONSE, RESPONSE_LEN),
            exact(TYPE_COOKIE_REPLY, COOKIE_REPLY_LEN),
        ]
    }

    fn headroom(&self) -> usize {
        PREFIX_LEN
    }

    fn tailroom(&self) -> usize {
        TAG_LEN
    }

    fn seal(&mut self, now: Nanos, out: Outgoing, buf: &mut [u8]) -> Result<usize, DropReason> {
        // The auth field stays 0: authenticity is the tag's job.
        Header {
            token: 0,
            ..out.header
        }
        .encode(&mut buf[PREFIX_LEN..PREFIX_LEN + HEADER_LEN]);
        let peer = PeerId(out.peer as u32);
        match self.peers.seal(now, peer, out.channel, buf, out.body_len) {
            Ok(n) => Ok(n),
            Err(SealError::NoSession | SealError::UnknownPeer) => Err(DropReason::NoSession),
            Err(SealError::BufferTooSmall { .. }) => Err(DropReason::Truncated),
        }
    }

    fn open(
        &mut self,
        now: Nanos,
        source: Source,
        datagram: &mut [u8],
    ) -> Result<endpoint::Opened, DropReason> {
        let opened = self
            .peers
            .open(now, source.channel, source.addr, datagram)
            .map_err(drop_reason)?;
        match opened {
            Opened::Data {
                peer,
                header,
                payload,
            } => Ok(endpoint::Opened::Datagram {
                peer: peer.0 as usize,
                header: Header::decode(&datagram[header])?,
                body: payload,
            }),
            Opened::Keepalive { peer } | Opened::Handshake { peer, .. } => {
                Ok(endpoint::Opened::Control {
                    peer: peer.0 as usize,
                })
            }
        }
    }

    fn can_seal(&self, peer: usize) -> bool {
        self.has_session(peer)
    }

    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<AuthTransmit> {
        let t = self.peers.poll_transmit(buf)?;
        Some(AuthTransmit {
            peer: t.peer.map(|p| p.0 as usize),
            channel: t.channel,
            to: t.to,
            len: t.len,
        })
    }

    fn max_transmit_len(&self) -> usize {
        MAX_HANDSHAKE_LEN
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.peers.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        let p = &self.peers;
        p.handle_timeout(now);
        // A device never stops trying to reach its gateway: a handshake round
        // given up (90 s without answer) starts over at once.
        for &id in self.initiators.iter() {
            let lost = p
                .peer(id)
                .is_some_and(|x| !x.has_session() && !x.handshake_pending());
            if lost {
                p.connect(now, id);
                p.handle_timeout(now);
            }
        }
    }
}
