//! The table of peers and the entry points a driver calls: [`Peers::seal`],
//! [`Peers::open`], [`Peers::poll_transmit`], [`Peers::poll_timeout`] and
//! [`Peers::handle_timeout`].
//!
//! The device has one peer (the gateway, `initiates = true`); the gateway has
//! one per configured device (`initiates = false`: it answers handshakes and
//! never starts one, so it needs no device address before the device speaks).
//! Peers are found by static public key (handshakes) or by session index
//! (transport datagrams: the index is random, chosen by us, so the index map
//! uses it as its own hash).

use crate::aead::Cipher;
use crate::cookie::{Cookie, CookieChecker};
use crate::format::{
    field, read_u32, COOKIE_REPLY_LEN, KEEPALIVE_LEN, MAX_HANDSHAKE_LEN, PREFIX_LEN, TAG_LEN,
    TYPE_COOKIE_REPLY, TYPE_INITIATION, TYPE_RESPONSE, TYPE_TRANSPORT,
};
use crate::handshake::{self, InFlight};
use crate::keys::{PrivateKey, PublicKey};
use crate::peer::{Peer, Pending};
use crate::ratelimit::{Limiter, RateLimit};
use crate::session::Session;
use crate::{Channel, CryptoDrop, DropCounts, Nanos, SealError, SECOND};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;
use std::ops::Range;

/// Session lifetimes and retry timing (WireGuard's values where it has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The initiating side rekeys a session this old (120 s).
    pub rekey_after_time: Nanos,
    /// A session this old is no longer used to send or receive (180 s).
    pub reject_after_time: Nanos,
    /// The initiating side rekeys once a channel's send counter reaches this (2^60).
    pub rekey_after_messages: u64,
    /// Counters at or above this are never sent or accepted (2^64 − 2^13 − 1).
    pub reject_after_messages: u64,
    /// An unanswered initiation is retried after this, on the other channel (1 s).
    pub rekey_timeout: Nanos,
    /// A handshake round is given up after this long without answer (90 s).
    pub rekey_attempt_time: Nanos,
    /// A replaced session still opens datagrams this long (10 s).
    pub previous_grace: Nanos,
    /// An initiator that keeps sending but has opened nothing from its peer for
    /// this long starts a new handshake: the peer has lost the session (it
    /// restarted) and drops everything sealed with it. `None` (the default):
    /// only rekeys by time and volume. The dchannel agent sets three probe
    /// intervals: a live gateway answers every probe round.
    pub stale_after: Option<Nanos>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            rekey_after_time: 120 * SECOND,
            reject_after_time: 180 * SECOND,
            rekey_after_messages: 1 << 60,
            reject_after_messages: u64::MAX - (1 << 13),
            rekey_timeout: SECOND,
            rekey_attempt_time: 90 * SECOND,
            previous_grace: 10 * SECOND,
            stale_after: None,
        }
    }
}

/// Settings of a [`Peers`] table.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Bytes of the dchannel header carried (authenticated, in clear) after the
    /// prefix of every transport datagram.
    pub header_len: usize,
    /// Transport cipher this side proposes when it initiates.
    pub cipher: Cipher,
    /// Session lifetimes.
    pub limits: Limits,
    /// Handshake flood bounds (responder side).
    pub rate_limit: RateLimit,
    /// Wall-clock time (ns since the UNIX epoch) at `now` = 0: initiation
    /// stamps are `wall_clock_at_zero + now`, so they keep increasing across
    /// restarts of the initiator.
    pub wall_clock_at_zero: u64,
    /// Channel of a handshake's first attempt (retries alternate).
    pub handshake_channel: Channel,
    /// Most handshake datagrams waiting for [`Peers::poll_transmit`].
    pub max_queued: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            header_len: 16,
            cipher: Cipher::default(),
            limits: Limits::default(),
            rate_limit: RateLimit::default(),
            wall_clock_at_zero: 0,
            handshake_channel: Channel::Llc,
            max_queued: 1024,
        }
    }
}

/// Index of a peer in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub u32);

/// What [`Peers::open`] found in a datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// An authenticated transport datagram: `header` and `payload` are byte
    /// ranges of the (now decrypted) buffer.
    Data {
        /// Sender.
        peer: PeerId,
        /// The dchannel header (was authenticated in clear).
        header: Range<usize>,
        /// The decrypted payload.
        payload: Range<usize>,
    },
    /// An authenticated keepalive (no header, no payload).
    Keepalive {
        /// Sender.
        peer: PeerId,
    },
    /// A handshake message was consumed; see [`Peers::poll_transmit`] for the
    /// answer. `established`: this side now has a session to send on.
    Handshake {
        /// The peer it came from.
        peer: PeerId,
        /// Whether a sending session was established.
        established: bool,
    },
}

impl Opened {
    /// The authenticated peer.
    pub fn peer(&self) -> PeerId {
        match self {
            Opened::Data { peer, .. }
            | Opened::Keepalive { peer }
            | Opened::Handshake { peer, .. } => *peer,
        }
    }
}

/// A datagram to send, written by [`Peers::poll_transmit`] into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The peer it is for; `None`: a cookie reply, which answers an
    /// initiation not yet authenticated (`to` is its source).
    pub peer: Option<PeerId>,
    /// The channel to send it on.
    pub channel: Channel,
    /// Destination, when known from the datagram it answers; `None`: the
    /// peer's address on that channel as the driver knows it.
    pub to: Option<SocketAddr>,
    /// Bytes written to the buffer.
    pub len: usize,
}

/// Handshake counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Initiations sent (first attempts and retries).
    pub initiations_sent: u64,
    /// Of those, retries after a timeout.
    pub retries: u64,
    /// Handshake rounds given up after the attempt time.
    pub gave_up: u64,
    /// Handshakes this side initiated that completed.
    pub completed_as_initiator: u64,
    /// Initiations this side answered.
    pub answered: u64,
    /// Handshakes started because the peer had gone silent ([`Limits::stale_after`]).
    pub stale: u64,
    /// Handshake datagrams not queued because the queue was full.
    pub queue_overflow: u64,
}

#[derive(Default)]
struct IndexHasher(u64);

impl Hasher for IndexHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u32(&mut self, i: u32) {
        // random indices: spread them over the high bits hashbrown uses too
        self.0 = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type IndexMap = HashMap<u32, PeerId, BuildHasherDefault<IndexHasher>>;

struct Queued {
    peer: Option<PeerId>,
    channel: Channel,
    to: Option<SocketAddr>,
    len: usize,
    bytes: [u8; MAX_HANDSHAKE_LEN],
}

/// All peers of one side and their crypto state.
pub struct Peers {
    cfg: Config,
    local: PrivateKey,
    local_public: PublicKey,
    params: snow::params::NoiseParams,
    peers: Vec<Peer>,
    /// Slots of removed peers, reused by [`Peers::add_peer`] (ids stay dense).
    free: Vec<PeerId>,
    by_key: HashMap<PublicKey, PeerId>,
    by_index: IndexMap,
    limiter: Limiter,
    cookies: CookieChecker,
    queue: VecDeque<Queued>,
    timers: BinaryHeap<Reverse<(Nanos, u32)>>,
    last_stamp_sent: u64,
    drops: DropCounts,
    stats: Stats,
}

/// A static key added twice to a [`Peers`] table.
#[derive(Debug, thiserror::Error)]
#[error("peer {0} is already in the table")]
pub struct DuplicatePeer(pub PublicKey);

impl Peers {
    /// An empty table for the side whose static key is `local`.
    pub fn new(local: PrivateKey, cfg: Config) -> Peers {
        Peers {
            local_public: local.public_key(),
            cookies: CookieChecker::new(&local.public_key()),
            local,
            params: handshake::params(),
            peers: Vec::new(),
            free: Vec::new(),
            by_key: HashMap::new(),
            by_index: IndexMap::default(),
            limiter: Limiter::new(cfg.rate_limit, 0),
            queue: VecDeque::new(),
            timers: BinaryHeap::new(),
            last_stamp_sent: 0,
            drops: DropCounts::default(),
            stats: Stats::default(),
            cfg,
        }
    }

    /// A gateway's table: one responder-only peer per configured device
    /// ([`crate::devices::read_devices`]), in file order (peer id = position).
    pub fn from_devices(
        local: PrivateKey,
        cfg: Config,
        devices: &[crate::devices::Device],
    ) -> Result<Peers, DuplicatePeer> {
        let mut p = Peers::new(local, cfg);
        p.reserve(devices.len());
        for d in devices {
            p.add_peer(d.public_key, d.name.clone(), false)?;
        }
        Ok(p)
    }

    /// Reserves room for `n` more peers (a gateway loading its device file).
    pub fn reserve(&mut self, n: usize) {
        self.peers.reserve(n);
        self.by_key.reserve(n);
    }

    /// Adds a peer. `initiates`: this side starts handshakes with it. Its id
    /// is the slot of the latest removed peer if there is one, else the next.
    pub fn add_peer(
        &mut self,
        public_key: PublicKey,
        name: impl Into<String>,
        initiates: bool,
    ) -> Result<PeerId, DuplicatePeer> {
        if self.by_key.contains_key(&public_key) {
            return Err(DuplicatePeer(public_key));
        }
        let peer = Peer::new(public_key, name.into(), initiates);
        let id = match self.free.pop() {
            Some(id) => {
                self.peers[id.0 as usize] = peer;
                id
            }
            None => {
                self.peers.push(peer);
                PeerId(self.peers.len() as u32 - 1)
            }
        };
        self.by_key.insert(public_key, id);
        Ok(id)
    }

    /// Removes a peer at once (a revoked or re-keyed device): its sessions
    /// and handshake are forgotten, so its next datagram is refused
    /// (`unknown_index`, or `unknown_peer` for a handshake) and nothing more
    /// is sealed for it. Other peers are untouched. Returns its static key;
    /// `None` if there is no such peer.
    pub fn remove_peer(&mut self, id: PeerId) -> Option<PublicKey> {
        let p = self.peers.get_mut(id.0 as usize).filter(|p| !p.removed)?;
        let key = p.public_key;
        let indices = [
            p.current.as_ref().map(|s| s.local_index),
            p.previous.as_ref().map(|(s, _)| s.local_index),
            p.next.as_ref().map(|s| s.local_index),
            p.pending.as_ref().map(|x| x.hs.local_index),
        ];
        *p = Peer::new(key, String::new(), false);
        p.removed = true; // its stale timer entries find `scheduled` None: skipped
        for i in indices.into_iter().flatten() {
            self.by_index.remove(&i);
        }
        self.by_key.remove(&key);
        self.queue.retain(|q| q.peer != Some(id));
        self.free.push(id);
        Some(key)
    }

    /// Our static public key.
    pub fn public_key(&self) -> PublicKey {
        self.local_public
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Number of peers (removed ones not counted).
    pub fn len(&self) -> usize {
        self.peers.len() - self.free.len()
    }

    /// Whether the table has no peers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A peer by id (`None` once removed).
    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id.0 as usize).filter(|p| !p.removed)
    }

    /// The peer with this static key.
    pub fn find(&self, key: &PublicKey) -> Option<PeerId> {
        self.by_key.get(key).copied()
    }

    /// CryptoDrop counters (every refused datagram is counted here).
    pub fn drops(&self) -> &DropCounts {
        &self.drops
    }

    /// Handshake counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The handshake rate limiter (its state shows what reached it).
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// Bytes of a transport datagram for `payload_len` bytes of payload.
    pub fn datagram_len(&self, payload_len: usize) -> usize {
        PREFIX_LEN + self.cfg.header_len + payload_len + TAG_LEN
    }

    /// Asks for a handshake with `peer` now (if this side initiates with it and
    /// none is in flight); the initiation comes out of [`Peers::poll_transmit`]
    /// after [`Peers::handle_timeout`].
    pub fn connect(&mut self, now: Nanos, peer: PeerId) {
        if let Some(p) = self.peers.get_mut(peer.0 as usize) {
            if p.initiates && p.pending.is_none() {
                p.want_handshake = true;
                self.schedule(peer, now);
            }
        }
    }

    fn schedule(&mut self, id: PeerId, at: Nanos) {
        let p = &mut self.peers[id.0 as usize];
        if p.scheduled.is_none_or(|s| at < s) {
            p.scheduled = Some(at);
            self.timers.push(Reverse((at, id.0)));
        }
    }

    fn reschedule(&mut self, id: PeerId) {
        if let Some(d) = self.peers[id.0 as usize].deadline(&self.cfg.limits) {
            self.schedule(id, d);
        }
    }

    /// Seals one transport datagram in place.
    ///
    /// Layout of `buf` on entry: [`PREFIX_LEN`] bytes of room, then the
    /// dchannel header (`header_len` bytes), then `payload_len` bytes of
    /// payload, then at least [`TAG_LEN`] spare bytes. On return the first
    /// `len` bytes are the datagram to send on `channel`. Allocates nothing.
    ///
    /// `Err(NoSession)`: nothing to send with yet; a handshake is queued if this
    /// side initiates with the peer. Rekeying by time or volume is also
    /// triggered from here (the datagram still goes out on the current session).
    pub fn seal(
        &mut self,
        now: Nanos,
        peer: PeerId,
        channel: Channel,
        buf: &mut [u8],
        payload_len: usize,
    ) -> Result<usize, SealError> {
        let h = self.cfg.header_len;
        let need = PREFIX_LEN + h + payload_len + TAG_LEN;
        if buf.len() < need {
            return Err(SealError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let l = self.cfg.limits;
        let p = self
            .peers
            .get_mut(peer.0 as usize)
            .ok_or(SealError::UnknownPeer)?;
        let usable = p.current.as_ref().is_some_and(|s| {
            now < s.created + l.reject_after_time
                && s.next_counter(channel) < l.reject_after_messages
        });
        if !usable {
            if p.initiates && p.pending.is_none() && !p.want_handshake {
                p.want_handshake = true;
                self.schedule(peer, now);
            }
            return Err(SealError::NoSession);
        }
        let s = p.current.as_mut().expect("usable");
        let n = s.seal(channel, buf, h, payload_len);
        let stale = l
            .stale_after
            .zip(p.last_heard)
            .is_some_and(|(after, heard)| now >= heard + after);
        let rekey = p.initiates
            && p.pending.is_none()
            && !p.want_handshake
            && (stale
                || s.max_sent() >= l.rekey_after_messages
                || now >= s.created + l.rekey_after_time);
        if rekey {
            if stale {
                self.stats.stale += 1;
            }
            p.want_handshake = true;
            self.schedule(peer, now);
        }
        Ok(n)
    }

    /// Authenticates and decrypts a received datagram in place, or consumes a
    /// handshake message. `channel` is the channel it arrived on, `from` its
    /// source (handshake rate limits and cookies are per source address). On
    /// `Err` the datagram is counted under its reason and must not be answered
    /// (`CookieReplied`: this table queued the cookie reply itself).
    pub fn open(
        &mut self,
        now: Nanos,
        channel: Channel,
        from: SocketAddr,
        dgram: &mut [u8],
    ) -> Result<Opened, CryptoDrop> {
        let r = match dgram.first() {
            None => Err(CryptoDrop::Truncated),
            Some(&TYPE_TRANSPORT) => self.open_transport(now, channel, dgram),
            Some(&(TYPE_INITIATION | TYPE_RESPONSE)) => {
                self.on_handshake(now, channel, from, dgram)
            }
            Some(&TYPE_COOKIE_REPLY) => self.on_cookie_reply(now, channel, dgram),
            Some(_) => Err(CryptoDrop::UnknownType),
        };
        if let Err(reason) = r {
            self.drops.add(reason);
        }
        r
    }

    fn open_transport(
        &mut self,
        now: Nanos,
        channel: Channel,
        dgram: &mut [u8],
    ) -> Result<Opened, CryptoDrop> {
        let len = dgram.len();
        let h = if len == KEEPALIVE_LEN {
            0
        } else if len >= PREFIX_LEN + self.cfg.header_len + TAG_LEN {
            self.cfg.header_len
        } else {
            return Err(CryptoDrop::Truncated);
        };
        let index = read_u32(dgram, field::RECEIVER_INDEX);
        let id = *self.by_index.get(&index).ok_or(CryptoDrop::UnknownIndex)?;
        let l = self.cfg.limits;
        let p = &mut self.peers[id.0 as usize];
        let (slot, s): (u8, &mut Session) =
            if let Some(s) = p.current.as_deref_mut().filter(|s| s.local_index == index) {
                (0, s)
            } else if let Some(s) = p.next.as_deref_mut().filter(|s| s.local_index == index) {
                (1, s)
            } else if let Some((s, _)) = p
                .previous
                .as_mut()
                .filter(|(s, retire)| s.local_index == index && now < *retire)
            {
                (2, &mut **s)
            } else {
                return Err(CryptoDrop::UnknownIndex);
            };
        if now >= s.created + l.reject_after_time {
            return Err(CryptoDrop::Expired);
        }
        s.open(channel, dgram, h, l.reject_after_messages)?;
        p.last_heard = Some(now);
        if slot == 1 {
            // key confirmation: the answered session becomes the one we send on
            let next = p.next.take();
            let old = std::mem::replace(&mut p.current, next);
            self.retire(id, old, now);
            self.reschedule(id);
        }
        Ok(if h == 0 {
            Opened::Keepalive { peer: id }
        } else {
            Opened::Data {
                peer: id,
                header: PREFIX_LEN..PREFIX_LEN + h,
                payload: PREFIX_LEN + h..len - TAG_LEN,
            }
        })
    }

    /// Moves a replaced current session to `previous` (dropping the older one).
    fn retire(&mut self, id: PeerId, old: Option<Box<Session>>, now: Nanos) {
        let grace = self.cfg.limits.previous_grace;
        let p = &mut self.peers[id.0 as usize];
        let dropped = match old {
            Some(s) => p.previous.replace((s, now + grace)).map(|(s, _)| s),
            None => None,
        };
        if let Some(s) = dropped {
            self.by_index.remove(&s.local_index);
        }
    }

    fn new_index(&mut self, id: PeerId) -> u32 {
        loop {
            let i = getrandom::u32().expect("operating system random generator");
            if let std::collections::hash_map::Entry::Vacant(e) = self.by_index.entry(i) {
                e.insert(id);
                return i;
            }
        }
    }

    fn enqueue(&mut self, q: Queued) {
        if self.queue.len() >= self.cfg.max_queued {
            self.stats.queue_overflow += 1;
        } else {
            self.queue.push_back(q);
        }
    }

    /// Consumes a handshake message and queues its answer, which goes back on
    /// the channel it came in on, to its source: the response to an
    /// initiation, or the keepalive that confirms a response's new session to
    /// the responder.
    fn on_handshake(
        &mut self,
        now: Nanos,
        channel: Channel,
        from: SocketAddr,
        dgram: &[u8],
    ) -> Result<Opened, CryptoDrop> {
        // Length and mac1 first (cookie.rs): no token, state or DH before.
        self.cookies.check_mac1(dgram)?;
        let mut answer = [0; MAX_HANDSHAKE_LEN];
        let (id, len, established) = if dgram[field::TYPE] == TYPE_INITIATION {
            // Under load mac2 (else a cookie reply), then the rate limits.
            let admitted = self
                .cookies
                .admit(now, from, dgram, &mut self.limiter, &mut answer);
            if admitted == Err(CryptoDrop::CookieReplied) {
                self.enqueue(Queued {
                    peer: None,
                    channel,
                    to: Some(from),
                    len: COOKIE_REPLY_LEN,
                    bytes: answer,
                });
            }
            admitted?;
            let id = self.answer_initiation(now, dgram, &mut answer)?;
            (id, crate::format::RESPONSE_LEN, false)
        } else {
            let id = self.complete_handshake(now, channel, dgram, &mut answer)?;
            (id, KEEPALIVE_LEN, true)
        };
        self.enqueue(Queued {
            peer: Some(id),
            channel,
            to: Some(from),
            len,
            bytes: answer,
        });
        self.reschedule(id);
        Ok(Opened::Handshake {
            peer: id,
            established,
        })
    }

    /// An initiation (long enough, within the rate limits): writes the
    /// response to `answer` and keeps the session as the peer's `next` (until
    /// its key is confirmed).
    fn answer_initiation(
        &mut self,
        now: Nanos,
        dgram: &[u8],
        answer: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<PeerId, CryptoDrop> {
        let rx = handshake::read_initiation(&self.params, &self.local, dgram)?;
        let id = self
            .find(&rx.remote_static)
            .ok_or(CryptoDrop::UnknownPeer)?;
        if rx.stamp <= self.peers[id.0 as usize].last_stamp {
            return Err(CryptoDrop::HandshakeReplay);
        }
        self.peers[id.0 as usize].last_stamp = rx.stamp;
        let index = self.new_index(id);
        let s = rx.respond(index, now, answer);
        if let Some(old) = self.peers[id.0 as usize].next.replace(Box::new(s)) {
            self.by_index.remove(&old.local_index);
        }
        self.stats.answered += 1;
        Ok(id)
    }

    /// The peer whose handshake in flight a response or a cookie reply names
    /// by its receiver index.
    fn in_flight_for(&self, dgram: &[u8]) -> Result<PeerId, CryptoDrop> {
        let index = handshake::response_index(dgram).ok_or(CryptoDrop::Truncated)?;
        let id = *self
            .by_index
            .get(&index)
            .ok_or(CryptoDrop::UnexpectedResponse)?;
        let p = &self.peers[id.0 as usize];
        match &p.pending {
            Some(x) if x.hs.local_index == index => Ok(id),
            _ => Err(CryptoDrop::UnexpectedResponse),
        }
    }

    /// A response to our initiation: the session becomes the current one at
    /// once; the keepalive confirming it to the responder is written to
    /// `answer`, sealed for `channel`.
    fn complete_handshake(
        &mut self,
        now: Nanos,
        channel: Channel,
        dgram: &[u8],
        answer: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<PeerId, CryptoDrop> {
        let id = self.in_flight_for(dgram)?;
        let p = &mut self.peers[id.0 as usize];
        let pending = p.pending.as_mut().expect("named by the response");
        let mut s = pending.hs.complete(dgram, now)?;
        p.pending = None;
        p.want_handshake = false;
        p.last_heard = Some(now);
        s.seal(channel, answer, 0, 0);
        let old = p.current.replace(Box::new(s));
        self.retire(id, old, now);
        self.stats.completed_as_initiator += 1;
        Ok(id)
    }

    /// A cookie reply to our initiation in flight (cookie.rs): the cookie is
    /// kept for the channel it came on. Unless it is the fresh cookie already
    /// held for that channel (then the normal retry timer goes on), the
    /// initiation is sent again at once on that channel, with mac2: one
    /// immediate retry per new cookie.
    fn on_cookie_reply(
        &mut self,
        now: Nanos,
        channel: Channel,
        dgram: &[u8],
    ) -> Result<Opened, CryptoDrop> {
        let id = self.in_flight_for(dgram)?;
        let p = &mut self.peers[id.0 as usize];
        let pending = p.pending.as_ref().expect("named by the reply");
        let (index, first_sent) = (pending.hs.local_index, pending.first_sent);
        let cookie = Cookie::open_reply(&p.public_key, dgram, &pending.hs.mac1, now)?;
        let held = p.set_cookie(channel, cookie);
        if held.is_none_or(|c| !c.fresh(now) || !c.same_value(&cookie)) {
            self.by_index.remove(&index);
            self.send_initiation(now, id, channel, first_sent);
            self.reschedule(id);
        }
        Ok(Opened::Handshake {
            peer: id,
            established: false,
        })
    }

    /// The next handshake datagram to send, written to `buf` (at least
    /// [`MAX_HANDSHAKE_LEN`] bytes).
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let q = self.queue.pop_front()?;
        buf[..q.len].copy_from_slice(&q.bytes[..q.len]);
        Some(Transmit {
            peer: q.peer,
            channel: q.channel,
            to: q.to,
            len: q.len,
        })
    }

    /// When [`Peers::handle_timeout`] should be called next (`None`: nothing
    /// scheduled). May be earlier than needed, never later.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Does what is due at `now`: retransmits or gives up handshakes, starts
    /// rekeys, expires sessions. Queues datagrams for [`Peers::poll_transmit`].
    pub fn handle_timeout(&mut self, now: Nanos) {
        while let Some(&Reverse((t, raw))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let id = PeerId(raw);
            if self.peers[raw as usize].scheduled != Some(t) {
                continue; // superseded by an earlier entry
            }
            self.peers[raw as usize].scheduled = None;
            self.on_peer_timer(now, id);
            self.reschedule(id);
        }
    }

    fn on_peer_timer(&mut self, now: Nanos, id: PeerId) {
        let l = self.cfg.limits;
        let p = &mut self.peers[id.0 as usize];
        let mut unregister: [Option<u32>; 4] = [None; 4];
        if p.current
            .as_ref()
            .is_some_and(|s| now >= s.created + l.reject_after_time)
        {
            unregister[0] = p.current.take().map(|s| s.local_index);
        }
        if p.previous
            .as_ref()
            .is_some_and(|(s, retire)| now >= *retire || now >= s.created + l.reject_after_time)
        {
            unregister[1] = p.previous.take().map(|(s, _)| s.local_index);
        }
        if p.next
            .as_ref()
            .is_some_and(|s| now >= s.created + l.reject_after_time)
        {
            unregister[2] = p.next.take().map(|s| s.local_index);
        }
        let mut start = false;
        let mut retry_channel = None;
        if let Some(pd) = &p.pending {
            if now >= pd.last_sent + l.rekey_timeout {
                unregister[3] = Some(pd.hs.local_index);
                if now >= pd.first_sent + l.rekey_attempt_time {
                    p.pending = None;
                    p.want_handshake = false;
                    self.stats.gave_up += 1;
                } else {
                    retry_channel = Some((pd.channel.other(), pd.first_sent));
                }
            }
        } else if p.initiates
            && (p.want_handshake
                || p.current
                    .as_ref()
                    .is_none_or(|s| now >= s.created + l.rekey_after_time)
                    && p.current.is_some())
        {
            start = true;
        }
        for i in unregister.into_iter().flatten() {
            self.by_index.remove(&i);
        }
        if let Some((channel, first_sent)) = retry_channel {
            self.stats.retries += 1;
            self.send_initiation(now, id, channel, first_sent);
        } else if start {
            let ch = self.cfg.handshake_channel;
            self.send_initiation(now, id, ch, now);
        }
    }

    fn send_initiation(&mut self, now: Nanos, id: PeerId, channel: Channel, first_sent: Nanos) {
        let index = self.new_index(id);
        let stamp = (self.cfg.wall_clock_at_zero + now).max(self.last_stamp_sent + 1);
        self.last_stamp_sent = stamp;
        let mut q = Queued {
            peer: Some(id),
            channel,
            to: None,
            len: crate::format::INITIATION_LEN,
            bytes: [0; MAX_HANDSHAKE_LEN],
        };
        let remote = self.peers[id.0 as usize].public_key;
        let hs: InFlight = handshake::initiate(
            &self.params,
            &self.local,
            &remote,
            self.cfg.cipher,
            index,
            stamp,
            &mut q.bytes,
        );
        let p = &mut self.peers[id.0 as usize];
        Cookie::write_mac2(p.cookie(channel), now, &mut q.bytes, field::INIT_MAC2);
        p.pending = Some(Box::new(Pending {
            hs,
            first_sent,
            last_sent: now,
            channel,
        }));
        p.want_handshake = false;
        self.enqueue(q);
        self.stats.initiations_sent += 1;
    }
}
