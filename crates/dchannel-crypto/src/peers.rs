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
//!
//! The table is shared by a driver's threads: see [`Peers`] for what is
//! locked where.

use crate::aead::Cipher;
use crate::cookie::{Cookie, CookieChecker};
use crate::drop::SharedDropCounts;
use crate::format::{
    field, read_u32, COOKIE_REPLY_LEN, KEEPALIVE_LEN, MAX_HANDSHAKE_LEN, PREFIX_LEN, TAG_LEN,
    TYPE_COOKIE_REPLY, TYPE_INITIATION, TYPE_RESPONSE, TYPE_TRANSPORT,
};
use crate::handshake::{self, InFlight};
use crate::keys::{PrivateKey, PublicKey};
use crate::peer::{Peer, Pending};
use crate::ratelimit::{Limiter, RateLimit};
use crate::session::Session;
use crate::slots::Slots;
use crate::{Channel, CryptoDrop, DropCounts, Nanos, SealError, SECOND};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

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
    /// Session indices this side picks for peer `i` are ≡ `i` (mod this), so
    /// that a driver with this many workers, worker `k` serving the peers
    /// ≡ `k`, can route a transport datagram by its index (1: any index).
    pub index_shards: u32,
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
            index_shards: 1,
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

/// "No timer" in [`Peers`]'s mirror of the timer heap's earliest entry.
const NO_TIMER: u64 = u64::MAX;

/// All peers of one side and their crypto state, shared by the threads of a
/// driver (every entry point takes `&self`).
///
/// Locking (why a valid handshake never stalls another peer's datagrams):
///
/// - each peer's state (sessions, handshake in flight, stamps) has its own
///   mutex: [`Peers::seal`] and the transport branch of [`Peers::open`] take
///   only the mutex of the peer they are about (plus, when opening, a read
///   lock of the session-index map's shard, which with
///   [`Config::index_shards`] = a gateway's workers only that peer's worker
///   reads), so threads serving different peers never wait for each other;
/// - the Diffie-Hellman work of an initiation (four X25519 operations, the
///   responder's whole handshake) runs under no lock at all: the message is
///   read, the static key looked up, the stamp claimed under the peer's mutex,
///   the response computed with no lock held, and the new session installed
///   under the peer's mutex again (dropped if a newer initiation from the
///   same peer was claimed meanwhile);
/// - the directory (static key → peer, free slots) has its own mutex, taken
///   by a handshake's key look-up and by [`Peers::add_peer`] and
///   [`Peers::remove_peer`] (which take one peer's mutex inside it), never by
///   a transport datagram: peers are added and removed while the others'
///   datagrams go on;
/// - the rest (rate limiter with its load meter, cookie secret, answer
///   queue, timer heap, handshake counters) are leaf locks taken briefly on
///   the handshake and timer paths, never before a peer's mutex and never
///   with another leaf lock held, but for one pair: an initiation's
///   admission (mac2 under load, cookie.rs) takes the cookie secret's inside
///   the limiter's, both released before its Diffie-Hellman work. The mac1
///   check takes no lock. The per-packet paths look at the answer queue and
///   the timer heap through atomics only.
pub struct Peers {
    cfg: Config,
    local: PrivateKey,
    local_public: PublicKey,
    params: snow::params::NoiseParams,
    /// Each peer's state under its own mutex, by id (slots.rs: found with
    /// no lock shared between peers, grown at run time).
    peers: Slots,
    /// Static keys and free slots: taken only by handshakes (the key look-up)
    /// and by changes to the table, never by a transport datagram.
    directory: Mutex<Directory>,
    /// Session index → peer, in [`Config::index_shards`] shards (index mod
    /// shards): with a gateway's workers, each reads only its own shard's lock.
    by_index: Box<[RwLock<IndexMap>]>,
    limiter: Mutex<Limiter>,
    /// mac1/mac2 checks and cookie replies (its secret under its own mutex).
    cookies: CookieChecker,
    queue: Mutex<VecDeque<Queued>>,
    /// `queue.len()`, readable without the lock (the per-datagram poll).
    queued: AtomicUsize,
    timers: Mutex<BinaryHeap<Reverse<(Nanos, u32)>>>,
    /// The heap's earliest deadline ([`NO_TIMER`]: none), readable without the lock.
    next_timer: AtomicU64,
    last_stamp_sent: Mutex<u64>,
    drops: SharedDropCounts,
    stats: Mutex<Stats>,
    /// Called by [`Peers::answer_initiation`] in the middle of its
    /// Diffie-Hellman work, where it holds no lock (the test that proves it).
    #[cfg(test)]
    dh_hook: Option<Box<dyn Fn() + Send + Sync>>,
}

/// Which peer has which static key, and which slots are free.
#[derive(Default)]
struct Directory {
    by_key: HashMap<PublicKey, PeerId>,
    /// Slots of removed peers, reused by [`Peers::add_peer`] (ids stay dense;
    /// a reused id keeps its worker: its indices are ≡ id mod index_shards).
    free: Vec<PeerId>,
    /// Slots handed out so far (ids below it were used once at least).
    used: u32,
}

/// A static key added twice to a [`Peers`] table.
#[derive(Debug, thiserror::Error)]
#[error("peer {0} is already in the table")]
pub struct DuplicatePeer(pub PublicKey);

/// Locks `m`; a poisoned lock means another thread panicked mid-datagram, and
/// the state is still consistent (every update is one assignment), so go on.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Peers {
    /// An empty table for the side whose static key is `local`.
    pub fn new(local: PrivateKey, cfg: Config) -> Peers {
        Peers {
            local_public: local.public_key(),
            cookies: CookieChecker::new(&local.public_key()),
            local,
            params: handshake::params(),
            peers: Slots::new(),
            directory: Mutex::new(Directory::default()),
            by_index: (0..cfg.index_shards.max(1))
                .map(|_| RwLock::new(IndexMap::default()))
                .collect(),
            limiter: Mutex::new(Limiter::new(cfg.rate_limit, 0)),
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            timers: Mutex::new(BinaryHeap::new()),
            next_timer: AtomicU64::new(NO_TIMER),
            last_stamp_sent: Mutex::new(0),
            drops: SharedDropCounts::default(),
            stats: Mutex::new(Stats::default()),
            #[cfg(test)]
            dh_hook: None,
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
        let p = Peers::new(local, cfg);
        p.reserve(devices.len());
        for d in devices {
            p.add_peer(d.public_key, d.name.clone(), false)?;
        }
        Ok(p)
    }

    /// Reserves room for `n` more peers (a gateway loading its device file).
    pub fn reserve(&self, n: usize) {
        let mut dir = lock(&self.directory);
        self.peers.reserve(dir.used as usize + n);
        dir.by_key.reserve(n);
    }

    /// The mutex of a peer id handed out by this table (from the index map
    /// or the timer heap: allocated, though the peer may since be removed).
    fn slot(&self, id: PeerId) -> &Mutex<Peer> {
        self.peers
            .get(id.0 as usize)
            .expect("ids this table handed out have slots")
    }

    /// Adds a peer. `initiates`: this side starts handshakes with it. Its id
    /// is the slot of the latest removed peer if there is one, else the next.
    /// Other peers' datagrams go on meanwhile (their mutexes are not taken).
    pub fn add_peer(
        &self,
        public_key: PublicKey,
        name: impl Into<String>,
        initiates: bool,
    ) -> Result<PeerId, DuplicatePeer> {
        let mut dir = lock(&self.directory);
        if dir.by_key.contains_key(&public_key) {
            return Err(DuplicatePeer(public_key));
        }
        let id = match dir.free.pop() {
            Some(id) => id,
            None => {
                let id = PeerId(dir.used);
                self.peers.reserve(id.0 as usize + 1);
                dir.used += 1;
                id
            }
        };
        *lock(self.slot(id)) = Peer::new(public_key, name.into(), initiates);
        dir.by_key.insert(public_key, id);
        Ok(id)
    }

    /// Removes a peer at once (a revoked or re-keyed device): its sessions
    /// and handshake are forgotten, so its next datagram is refused
    /// (`unknown_index`, or `unknown_peer` for a handshake) and nothing more
    /// is sealed for it. Other peers are untouched. Returns its static key;
    /// `None` if there is no such peer.
    ///
    /// A handshake of this peer in its Diffie-Hellman work meanwhile finds
    /// the slot changed when it comes to install its session, and drops it
    /// ([`Peers::answer_initiation`]).
    pub fn remove_peer(&self, id: PeerId) -> Option<PublicKey> {
        let mut dir = lock(&self.directory);
        let (key, indices) = {
            let mut p = lock(self.peers.get(id.0 as usize)?);
            if p.removed {
                return None;
            }
            let key = p.public_key;
            let indices = [
                p.current.as_ref().map(|s| s.local_index),
                p.previous.as_ref().map(|(s, _)| s.local_index),
                p.next.as_ref().map(|s| s.local_index),
                p.pending.as_ref().map(|x| x.hs.local_index),
            ];
            *p = Peer::new(key, String::new(), false);
            p.removed = true; // its stale timer entries find `scheduled` None: skipped
            (key, indices)
        };
        self.unregister(&indices);
        dir.by_key.remove(&key);
        {
            let mut queue = lock(&self.queue);
            queue.retain(|q| q.peer != Some(id));
            self.queued.store(queue.len(), Ordering::Release);
        }
        dir.free.push(id);
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
        let dir = lock(&self.directory);
        dir.used as usize - dir.free.len()
    }

    /// Whether the table has no peers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A peer by id, locked (`None` once removed): hold the guard briefly
    /// (every datagram of that peer waits for it).
    pub fn peer(&self, id: PeerId) -> Option<MutexGuard<'_, Peer>> {
        self.peers
            .get(id.0 as usize)
            .map(lock)
            .filter(|p| !p.removed)
    }

    /// The peer with this static key.
    pub fn find(&self, key: &PublicKey) -> Option<PeerId> {
        lock(&self.directory).by_key.get(key).copied()
    }

    /// CryptoDrop counters (every refused datagram is counted here), as of now.
    pub fn drops(&self) -> DropCounts {
        self.drops.snapshot()
    }

    /// Handshake counters.
    pub fn stats(&self) -> Stats {
        *lock(&self.stats)
    }

    /// The handshake rate limiter, locked (its state shows what reached it;
    /// hold it no longer than a look: every worker's initiations wait for it).
    pub fn limiter(&self) -> MutexGuard<'_, Limiter> {
        lock(&self.limiter)
    }

    /// Bytes of a transport datagram for `payload_len` bytes of payload.
    pub fn datagram_len(&self, payload_len: usize) -> usize {
        PREFIX_LEN + self.cfg.header_len + payload_len + TAG_LEN
    }

    /// Asks for a handshake with `peer` now (if this side initiates with it and
    /// none is in flight); the initiation comes out of [`Peers::poll_transmit`]
    /// after [`Peers::handle_timeout`].
    pub fn connect(&self, now: Nanos, peer: PeerId) {
        if let Some(mut p) = self.peer(peer) {
            if p.initiates && p.pending.is_none() {
                p.want_handshake = true;
                self.schedule(peer, &mut p, now);
            }
        }
    }

    /// Puts `p` (peer `id`, locked by the caller) on the timer heap at `at`,
    /// unless it is there already for an earlier time.
    fn schedule(&self, id: PeerId, p: &mut Peer, at: Nanos) {
        if p.scheduled.is_none_or(|s| at < s) {
            p.scheduled = Some(at);
            let mut timers = lock(&self.timers);
            timers.push(Reverse((at, id.0)));
            self.publish_next_timer(&timers);
        }
    }

    fn reschedule(&self, id: PeerId, p: &mut Peer) {
        if let Some(d) = p.deadline(&self.cfg.limits) {
            self.schedule(id, p, d);
        }
    }

    /// Mirrors the heap's earliest deadline into `next_timer` (called with the
    /// heap locked, after every change).
    fn publish_next_timer(&self, timers: &BinaryHeap<Reverse<(Nanos, u32)>>) {
        let t = timers.peek().map_or(NO_TIMER, |Reverse((t, _))| *t);
        self.next_timer.store(t, Ordering::Release);
    }

    /// Seals one transport datagram in place.
    ///
    /// Layout of `buf` on entry: [`PREFIX_LEN`] bytes of room, then the
    /// dchannel header (`header_len` bytes), then `payload_len` bytes of
    /// payload, then at least [`TAG_LEN`] spare bytes. On return the first
    /// `len` bytes are the datagram to send on `channel`. Allocates nothing;
    /// locks only `peer`'s state.
    ///
    /// `Err(NoSession)`: nothing to send with yet; a handshake is queued if this
    /// side initiates with the peer. Rekeying by time or volume is also
    /// triggered from here (the datagram still goes out on the current session).
    pub fn seal(
        &self,
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
        let mut guard = self.peer(peer).ok_or(SealError::UnknownPeer)?;
        let p = &mut *guard;
        let usable = p.current.as_ref().is_some_and(|s| {
            now < s.created + l.reject_after_time
                && s.next_counter(channel) < l.reject_after_messages
        });
        if !usable {
            if p.initiates && p.pending.is_none() && !p.want_handshake {
                p.want_handshake = true;
                self.schedule(peer, p, now);
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
                lock(&self.stats).stale += 1;
            }
            p.want_handshake = true;
            self.schedule(peer, p, now);
        }
        Ok(n)
    }

    /// Authenticates and decrypts a received datagram in place, or consumes a
    /// handshake message. `channel` is the channel it arrived on, `from` its
    /// source (handshake rate limits and cookies are per source address). On
    /// `Err` the datagram is counted under its reason and must not be answered
    /// (`CookieReplied`: this table queued the cookie reply itself).
    pub fn open(
        &self,
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

    /// The shard of the index map that holds `index`.
    fn index_shard(&self, index: u32) -> &RwLock<IndexMap> {
        &self.by_index[index as usize % self.by_index.len()]
    }

    /// The peer a session index belongs to (a read lock of its shard of the index map).
    fn peer_of_index(&self, index: u32) -> Option<PeerId> {
        self.index_shard(index)
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&index)
            .copied()
    }

    fn open_transport(
        &self,
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
        let id = self.peer_of_index(index).ok_or(CryptoDrop::UnknownIndex)?;
        let l = self.cfg.limits;
        let mut guard = lock(self.slot(id));
        let p = &mut *guard;
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
            self.retire(p, old, now);
            self.reschedule(id, p);
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

    /// Moves a replaced current session of `p` to `previous` (dropping the older one).
    fn retire(&self, p: &mut Peer, old: Option<Box<Session>>, now: Nanos) {
        let grace = self.cfg.limits.previous_grace;
        let dropped = match old {
            Some(s) => p.previous.replace((s, now + grace)).map(|(s, _)| s),
            None => None,
        };
        if let Some(s) = dropped {
            self.unregister(&[Some(s.local_index)]);
        }
    }

    /// Forgets session indices (a write lock of each one's shard of the index map).
    fn unregister(&self, indices: &[Option<u32>]) {
        for i in indices.iter().flatten() {
            self.index_shard(*i)
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(i);
        }
    }

    /// A fresh random session index for peer `id`. With
    /// [`Config::index_shards`] = n > 1 it is ≡ `id` (mod n), so that a
    /// driver's n workers can find a transport datagram's owner from the
    /// index alone (the kernel's `SO_REUSEPORT` steering does).
    fn new_index(&self, id: PeerId) -> u32 {
        let n = u64::from(self.cfg.index_shards.max(1));
        // every index ≡ id (mod n) lives in shard id mod n
        let shard = &self.by_index[id.0 as usize % self.by_index.len()];
        let mut map = shard.write().unwrap_or_else(|e| e.into_inner());
        loop {
            let r = u64::from(getrandom::u32().expect("operating system random generator"));
            let Ok(i) = u32::try_from(r / n * n + u64::from(id.0) % n) else {
                continue; // past u32::MAX in the top partial block
            };
            if let std::collections::hash_map::Entry::Vacant(e) = map.entry(i) {
                e.insert(id);
                return i;
            }
        }
    }

    fn enqueue(&self, q: Queued) {
        let mut queue = lock(&self.queue);
        if queue.len() >= self.cfg.max_queued {
            drop(queue);
            lock(&self.stats).queue_overflow += 1;
        } else {
            queue.push_back(q);
            self.queued.store(queue.len(), Ordering::Release);
        }
    }

    /// Consumes a handshake message and queues its answer, which goes back on
    /// the channel it came in on, to its source: the response to an
    /// initiation, or the keepalive that confirms a response's new session to
    /// the responder.
    fn on_handshake(
        &self,
        now: Nanos,
        channel: Channel,
        from: SocketAddr,
        dgram: &[u8],
    ) -> Result<Opened, CryptoDrop> {
        // Length and mac1 first (cookie.rs): no token, state or DH before.
        self.cookies.check_mac1(dgram)?;
        let mut answer = [0; MAX_HANDSHAKE_LEN];
        let (id, len, established) = if dgram[field::TYPE] == TYPE_INITIATION {
            // Under load mac2 (else a cookie reply), then the rate limits:
            // the limiter's lock, then the cookie secret's, both released
            // before any Diffie-Hellman work.
            let admitted = {
                let mut limiter = lock(&self.limiter);
                self.cookies
                    .admit(now, from, dgram, &mut limiter, &mut answer)
            };
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
        Ok(Opened::Handshake {
            peer: id,
            established,
        })
    }

    /// An initiation (long enough, within the rate limits): writes the
    /// response to `answer` and keeps the session as the peer's `next` (until
    /// its key is confirmed). The Diffie-Hellman work (reading the message,
    /// writing the response) runs with no lock held; the peer's mutex is
    /// taken twice, briefly: to claim the stamp, and to install the session.
    fn answer_initiation(
        &self,
        now: Nanos,
        dgram: &[u8],
        answer: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<PeerId, CryptoDrop> {
        let rx = handshake::read_initiation(&self.params, &self.local, dgram)?;
        let id = self
            .find(&rx.remote_static)
            .ok_or(CryptoDrop::UnknownPeer)?;
        {
            let mut p = lock(self.slot(id));
            if p.removed || p.public_key != rx.remote_static {
                // removed (and perhaps its slot reused) since the look-up
                return Err(CryptoDrop::UnknownPeer);
            }
            if rx.stamp <= p.last_stamp {
                return Err(CryptoDrop::HandshakeReplay);
            }
            p.last_stamp = rx.stamp;
        }
        let (stamp, rx_key) = (rx.stamp, rx.remote_static);
        let index = self.new_index(id);
        #[cfg(test)]
        if let Some(hook) = &self.dh_hook {
            hook();
        }
        let s = rx.respond(index, now, answer);
        let mut guard = lock(self.slot(id));
        let p = &mut *guard;
        if p.removed || p.public_key != rx_key || p.last_stamp != stamp {
            // A newer initiation from this peer was claimed while we worked:
            // its answer is the one the peer waits for. (Or the peer was
            // removed meanwhile: its slot starts over at stamp 0.)
            drop(guard);
            self.unregister(&[Some(index)]);
            return Err(CryptoDrop::HandshakeReplay);
        }
        if let Some(old) = p.next.replace(Box::new(s)) {
            self.unregister(&[Some(old.local_index)]);
        }
        self.reschedule(id, p);
        drop(guard);
        lock(&self.stats).answered += 1;
        Ok(id)
    }

    /// The peer whose handshake in flight a response or a cookie reply names
    /// by its receiver index, and its state, locked.
    fn in_flight_for(&self, dgram: &[u8]) -> Result<(PeerId, MutexGuard<'_, Peer>), CryptoDrop> {
        let index = handshake::response_index(dgram).ok_or(CryptoDrop::Truncated)?;
        let id = self
            .peer_of_index(index)
            .ok_or(CryptoDrop::UnexpectedResponse)?;
        let p = lock(self.slot(id));
        match &p.pending {
            Some(x) if x.hs.local_index == index => Ok((id, p)),
            _ => Err(CryptoDrop::UnexpectedResponse),
        }
    }

    /// A response to our initiation: the session becomes the current one at
    /// once; the keepalive confirming it to the responder is written to
    /// `answer`, sealed for `channel`. (The initiator's side: its two X25519
    /// operations run under the one peer's mutex, which is no other peer's.)
    fn complete_handshake(
        &self,
        now: Nanos,
        channel: Channel,
        dgram: &[u8],
        answer: &mut [u8; MAX_HANDSHAKE_LEN],
    ) -> Result<PeerId, CryptoDrop> {
        let (id, mut guard) = self.in_flight_for(dgram)?;
        let p = &mut *guard;
        let pending = p.pending.as_mut().expect("named by the response");
        let mut s = pending.hs.complete(dgram, now)?;
        p.pending = None;
        p.want_handshake = false;
        p.last_heard = Some(now);
        s.seal(channel, answer, 0, 0);
        let old = p.current.replace(Box::new(s));
        self.retire(p, old, now);
        self.reschedule(id, p);
        drop(guard);
        lock(&self.stats).completed_as_initiator += 1;
        Ok(id)
    }

    /// A cookie reply to our initiation in flight (cookie.rs): the cookie is
    /// kept for the channel it came on. Unless it is the fresh cookie already
    /// held for that channel (then the normal retry timer goes on), the
    /// initiation is sent again at once on that channel, with mac2: one
    /// immediate retry per new cookie.
    fn on_cookie_reply(
        &self,
        now: Nanos,
        channel: Channel,
        dgram: &[u8],
    ) -> Result<Opened, CryptoDrop> {
        let (id, mut guard) = self.in_flight_for(dgram)?;
        let p = &mut *guard;
        let pending = p.pending.as_ref().expect("named by the reply");
        let (index, first_sent) = (pending.hs.local_index, pending.first_sent);
        let cookie = Cookie::open_reply(&p.public_key, dgram, &pending.hs.mac1, now)?;
        let held = p.set_cookie(channel, cookie);
        if held.is_none_or(|c| !c.fresh(now) || !c.same_value(&cookie)) {
            self.unregister(&[Some(index)]);
            self.send_initiation(now, id, p, channel, first_sent);
            self.reschedule(id, p);
        }
        Ok(Opened::Handshake {
            peer: id,
            established: false,
        })
    }

    /// The next handshake datagram to send, written to `buf` (at least
    /// [`MAX_HANDSHAKE_LEN`] bytes). Takes no lock when nothing is queued.
    pub fn poll_transmit(&self, buf: &mut [u8]) -> Option<Transmit> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        let q = {
            let mut queue = lock(&self.queue);
            let q = queue.pop_front();
            self.queued.store(queue.len(), Ordering::Release);
            q?
        };
        buf[..q.len].copy_from_slice(&q.bytes[..q.len]);
        Some(Transmit {
            peer: q.peer,
            channel: q.channel,
            to: q.to,
            len: q.len,
        })
    }

    /// When [`Peers::handle_timeout`] should be called next (`None`: nothing
    /// scheduled). May be earlier than needed, never later. Takes no lock.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        match self.next_timer.load(Ordering::Acquire) {
            NO_TIMER => None,
            t => Some(t),
        }
    }

    /// Does what is due at `now`: retransmits or gives up handshakes, starts
    /// rekeys, expires sessions. Queues datagrams for [`Peers::poll_transmit`].
    /// Threads may call it at once: each due entry is taken by one of them.
    pub fn handle_timeout(&self, now: Nanos) {
        loop {
            let (t, raw) = {
                let mut timers = lock(&self.timers);
                match timers.peek() {
                    Some(&Reverse((t, raw))) if t <= now => {
                        timers.pop();
                        self.publish_next_timer(&timers);
                        (t, raw)
                    }
                    _ => return,
                }
            };
            let id = PeerId(raw);
            let mut guard = lock(self.slot(id));
            let p = &mut *guard;
            if p.scheduled != Some(t) {
                continue; // superseded by an earlier entry
            }
            p.scheduled = None;
            self.on_peer_timer(now, id, p);
            self.reschedule(id, p);
        }
    }

    /// Peer `id`'s due work (its mutex held by the caller).
    fn on_peer_timer(&self, now: Nanos, id: PeerId, p: &mut Peer) {
        let l = self.cfg.limits;
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
                    lock(&self.stats).gave_up += 1;
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
        self.unregister(&unregister);
        if let Some((channel, first_sent)) = retry_channel {
            lock(&self.stats).retries += 1;
            self.send_initiation(now, id, p, channel, first_sent);
        } else if start {
            let ch = self.cfg.handshake_channel;
            self.send_initiation(now, id, p, ch, now);
        }
    }

    fn send_initiation(
        &self,
        now: Nanos,
        id: PeerId,
        p: &mut Peer,
        channel: Channel,
        first_sent: Nanos,
    ) {
        let index = self.new_index(id);
        let stamp = {
            let mut last = lock(&self.last_stamp_sent);
            *last = (self.cfg.wall_clock_at_zero + now).max(*last + 1);
            *last
        };
        let mut q = Queued {
            peer: Some(id),
            channel,
            to: None,
            len: crate::format::INITIATION_LEN,
            bytes: [0; MAX_HANDSHAKE_LEN],
        };
        let hs: InFlight = handshake::initiate(
            &self.params,
            &self.local,
            &p.public_key,
            self.cfg.cipher,
            index,
            stamp,
            &mut q.bytes,
        );
        Cookie::write_mac2(p.cookie(channel), now, &mut q.bytes, field::INIT_MAC2);
        p.pending = Some(Box::new(Pending {
            hs,
            first_sent,
            last_sent: now,
            channel,
        }));
        p.want_handshake = false;
        self.enqueue(q);
        lock(&self.stats).initiations_sent += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::time::Duration;

    /// Only a failure waits this long (a deadlock: the sealing thread blocked
    /// behind the handshake); a passing run never does.
    const DEADLOCK: Duration = Duration::from_secs(20);

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, 2], port))
    }

    /// Makes `gw` stop in its Diffie-Hellman work (`dh_hook`): each handshake that
    /// reaches it sends on the returned receiver's channel, then waits for one message
    /// on the returned sender before it goes on.
    fn pause_dh_work(gw: &mut Peers) -> (mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (in_dh_tx, in_dh) = mpsc::channel::<()>();
        let (release, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        gw.dh_hook = Some(Box::new(move || {
            in_dh_tx.send(()).unwrap();
            release_rx.lock().unwrap().recv().unwrap();
        }));
        (in_dh, release)
    }

    /// Device `dev` initiates a handshake with the gateway (its peer 0), and `gw` opens
    /// the initiation on a thread of its own (at time 1, from `addr(1)`): the receiver
    /// gets what `open` returned.
    fn initiate_on_thread(
        dev: &Peers,
        gw: &Arc<Peers>,
    ) -> mpsc::Receiver<Result<Opened, CryptoDrop>> {
        let mut init = [0u8; MAX_HANDSHAKE_LEN];
        dev.connect(0, PeerId(0));
        dev.handle_timeout(0);
        let t = dev.poll_transmit(&mut init).unwrap();
        let (gw2, (tx, rx)) = (Arc::clone(gw), mpsc::channel());
        std::thread::spawn(move || {
            tx.send(gw2.open(1, t.channel, addr(1), &mut init[..t.len]))
                .unwrap();
        });
        rx
    }

    /// Device `dev` (initiating with the gateway, its peer 0) hands its
    /// initiation to `gw`, and so on until `gw` has a current session with it.
    fn establish(dev: &Peers, gw: &Peers, port: u16) {
        let mut buf = [0u8; MAX_HANDSHAKE_LEN];
        dev.connect(0, PeerId(0));
        dev.handle_timeout(0);
        let t = dev.poll_transmit(&mut buf).unwrap();
        gw.open(0, t.channel, addr(port), &mut buf[..t.len])
            .unwrap();
        let t = gw.poll_transmit(&mut buf).unwrap();
        dev.open(0, t.channel, addr(port), &mut buf[..t.len])
            .unwrap();
        let t = dev.poll_transmit(&mut buf).unwrap();
        let r = gw.open(0, t.channel, addr(port), &mut buf[..t.len]);
        assert!(matches!(r, Ok(Opened::Keepalive { .. })), "{r:?}");
    }

    /// With `index_shards` = 3, every session index the gateway picks for
    /// its peer i is ≡ i (mod 3) (what its workers' kernel steering relies
    /// on), and stays random otherwise (20 handshakes per peer: all distinct).
    #[test]
    fn session_indices_of_peer_i_are_congruent_to_i() {
        let gw = three_shards();
        let keys: Vec<PrivateKey> = (0..5).map(|_| PrivateKey::generate()).collect();
        for (i, k) in keys.iter().enumerate() {
            gw.add_peer(k.public_key(), format!("d{i}"), false).unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        for (i, k) in keys.iter().enumerate() {
            for round in 0..20u64 {
                let index = answered_index(&gw, k, PeerId(i as u32), round * SECOND);
                assert_eq!(index % 3, i as u32 % 3, "peer {i}, index {index:#x}");
                assert!(seen.insert(index), "index {index:#x} twice");
            }
        }
    }

    /// A gateway's table whose session indices are ≡ peer id (mod 3), with
    /// room for many handshakes from one source address.
    fn three_shards() -> Peers {
        let cfg = Config {
            index_shards: 3,
            rate_limit: crate::ratelimit::RateLimit {
                per_source_burst: 1000,
                ..Default::default()
            },
            ..Config::default()
        };
        Peers::new(PrivateKey::generate(), cfg)
    }

    /// The index a gateway `gw` picks answering one fresh initiation of the
    /// device with key `k` (its peer `id`), read from the peer's `next`.
    fn answered_index(gw: &Peers, k: &PrivateKey, id: PeerId, now: Nanos) -> u32 {
        let dev = Peers::new(k.clone(), Config::default());
        dev.add_peer(gw.public_key(), "gw", true).unwrap();
        let mut buf = [0u8; MAX_HANDSHAKE_LEN];
        dev.connect(now, PeerId(0));
        dev.handle_timeout(now);
        let t = dev.poll_transmit(&mut buf).unwrap();
        let r = gw.open(now, t.channel, addr(1), &mut buf[..t.len]);
        assert_eq!(
            r,
            Ok(Opened::Handshake {
                peer: id,
                established: false
            })
        );
        gw.poll_transmit(&mut buf).unwrap();
        let index = gw.peer(id).unwrap().next.as_ref().unwrap().local_index;
        index
    }

    /// Live changes keep the workers' rule (issue 37 item 4 with
    /// `--threads`): with `index_shards` = 3, removed slots are reused, the
    /// latest freed first, and the devices added there get session indices
    /// ≡ their id (mod 3), so the worker that owns the slot gets their
    /// datagrams; a slot past the end is new. A removed peer's session index
    /// is gone from the index map at once.
    #[test]
    fn a_reused_slot_keeps_its_indices_congruent_to_its_id() {
        let gw = three_shards();
        let keys: Vec<PrivateKey> = (0..5).map(|_| PrivateKey::generate()).collect();
        for (i, k) in keys.iter().enumerate() {
            let id = gw.add_peer(k.public_key(), format!("d{i}"), false);
            assert_eq!(id.unwrap(), PeerId(i as u32));
        }
        let old = answered_index(&gw, &keys[4], PeerId(4), SECOND);
        assert_eq!(gw.peer_of_index(old), Some(PeerId(4)));
        assert_eq!(gw.remove_peer(PeerId(1)), Some(keys[1].public_key()));
        assert_eq!(gw.remove_peer(PeerId(4)), Some(keys[4].public_key()));
        assert_eq!(gw.peer_of_index(old), None, "forgotten with its peer");
        assert_eq!(gw.len(), 3);
        let new: Vec<PrivateKey> = (0..3).map(|_| PrivateKey::generate()).collect();
        let ids: Vec<PeerId> = new
            .iter()
            .map(|k| gw.add_peer(k.public_key(), "new", false).unwrap())
            .collect();
        assert_eq!(ids, [PeerId(4), PeerId(1), PeerId(5)]);
        assert_eq!(gw.len(), 6);
        for (k, &id) in new.iter().zip(&ids) {
            for round in 1..=10 {
                let index = answered_index(&gw, k, id, round * SECOND);
                assert_eq!(index % 3, id.0 % 3, "peer {id:?}, index {index:#x}");
            }
        }
        // the re-keyed device's old key is no longer anyone's
        assert_eq!(gw.find(&keys[4].public_key()), None);
        assert_eq!(gw.find(&new[0].public_key()), Some(PeerId(4)));
    }

    /// A device removed while its initiation is in the Diffie-Hellman work
    /// (no lock held) and its slot given to another device: the late
    /// session is not installed in the new device's slot, and its index is
    /// forgotten.
    #[test]
    fn a_handshake_of_a_peer_removed_meanwhile_installs_nothing() {
        let gw_key = PrivateKey::generate();
        let (a_key, b_key) = (PrivateKey::generate(), PrivateKey::generate());
        let dev_a = Peers::new(a_key.clone(), Config::default());
        dev_a.add_peer(gw_key.public_key(), "gw", true).unwrap();
        let mut gw = Peers::new(gw_key, Config::default());
        let a = gw.add_peer(a_key.public_key(), "a", false).unwrap();
        let (in_dh, release) = pause_dh_work(&mut gw);
        let gw = Arc::new(gw);
        let rx = initiate_on_thread(&dev_a, &gw);
        in_dh.recv_timeout(DEADLOCK).unwrap();
        // while A's response is computed: A goes, B takes its slot
        assert_eq!(gw.remove_peer(a), Some(a_key.public_key()));
        assert_eq!(gw.add_peer(b_key.public_key(), "b", false).unwrap(), a);
        release.send(()).unwrap();
        assert_eq!(
            rx.recv_timeout(DEADLOCK).unwrap(),
            Err(CryptoDrop::HandshakeReplay)
        );
        let b = gw.peer(a).unwrap();
        assert_eq!((b.public_key, b.next.is_none()), (b_key.public_key(), true));
        drop(b);
        let indices: usize = gw.by_index.iter().map(|m| m.read().unwrap().len()).sum();
        assert_eq!(indices, 0, "the late session's index was forgotten");
        let mut buf = [0u8; MAX_HANDSHAKE_LEN];
        assert!(gw.poll_transmit(&mut buf).is_none(), "no response sent");
    }

    /// Issue 37: a valid initiation from device A, stopped in the middle of
    /// its Diffie-Hellman work on one thread, does not hold up sealing for
    /// device B on another: B's 1,000 downlink datagrams are sealed (and open
    /// at B), and 1,000 of B's opened, before A's handshake is let go. If any lock `seal` needs were held
    /// there, the sealing thread could not finish and `done` would time out.
    #[test]
    fn a_handshake_in_progress_does_not_block_seal_for_another_peer() {
        let gw_key = PrivateKey::generate();
        let (a_key, b_key) = (PrivateKey::generate(), PrivateKey::generate());
        let device = |k: &PrivateKey| {
            let d = Peers::new(k.clone(), Config::default());
            d.add_peer(gw_key.public_key(), "gw", true).unwrap();
            d
        };
        let (dev_a, dev_b) = (device(&a_key), device(&b_key));
        let mut gw = Peers::new(gw_key.clone(), Config::default());
        let a = gw.add_peer(a_key.public_key(), "a", false).unwrap();
        let b = gw.add_peer(b_key.public_key(), "b", false).unwrap();
        let (in_dh, release) = pause_dh_work(&mut gw);
        let gw = Arc::new(gw);

        // B's session first (its handshake goes through the hook too: let it pass).
        let (gw2, (tx_b, rx_b)) = (Arc::clone(&gw), mpsc::channel());
        std::thread::spawn(move || {
            establish(&dev_b, &gw2, 2);
            tx_b.send(dev_b).unwrap();
        });
        in_dh.recv_timeout(DEADLOCK).unwrap();
        release.send(()).unwrap();
        let dev_b = rx_b.recv_timeout(DEADLOCK).unwrap();

        // A's initiation, on its own thread, stops inside the DH work.
        let rx_a = initiate_on_thread(&dev_a, &gw);
        in_dh.recv_timeout(DEADLOCK).unwrap();

        // Meanwhile, on another thread: 1,000 datagrams each way with B.
        let (gw2, (done_tx, done)) = (Arc::clone(&gw), mpsc::channel());
        std::thread::spawn(move || {
            let mut opened = 0;
            for i in 0..1000u32 {
                let mut buf = [0u8; PREFIX_LEN + 16 + 4 + TAG_LEN];
                buf[PREFIX_LEN + 16..][..4].copy_from_slice(&i.to_be_bytes());
                let n = gw2.seal(2, b, Channel::Hbc, &mut buf, 4).unwrap();
                if let Ok(Opened::Data { payload, .. }) =
                    dev_b.open(3, Channel::Hbc, addr(9), &mut buf[..n])
                {
                    opened += u32::from(buf[payload] == i.to_be_bytes());
                }
                // and B's uplink: the gateway opens it (index map, B's state)
                let n = dev_b.seal(4, PeerId(0), Channel::Llc, &mut buf, 4).unwrap();
                if let Ok(Opened::Data { payload, .. }) =
                    gw2.open(5, Channel::Llc, addr(9), &mut buf[..n])
                {
                    opened += u32::from(buf[payload] == i.to_be_bytes());
                }
            }
            done_tx.send(opened).unwrap();
        });
        let opened = done
            .recv_timeout(DEADLOCK)
            .expect("seal waited for the handshake");
        assert_eq!(opened, 2000);
        // A's handshake was still held in its DH work all along; now it finishes.
        assert!(rx_a.try_recv().is_err());
        release.send(()).unwrap();
        let r = rx_a.recv_timeout(DEADLOCK).unwrap();
        assert_eq!(
            r,
            Ok(Opened::Handshake {
                peer: a,
                established: false
            })
        );
    }
}
