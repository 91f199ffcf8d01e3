//! What the two halves of an endpoint share, per peer: the outer endpoints
//! (learned by the receive half at a gateway), and the RTT estimates and
//! liveness the receive half publishes every [`PUBLISH_PERIOD`](super::PUBLISH_PERIOD)
//! for the send half's policy and for reporting.
//!
//! Only the receive half writes. The send half reads per packet, so the hot
//! path is a few relaxed atomic loads: the endpoints sit behind a mutex that
//! it takes only when the generation counter says they changed (a client
//! roamed), which it remembers in its own cache.

use super::{DeviceLimits, PeerConfig};
use crate::reorder::ReorderStats;
use crate::steer::ChannelView;
use crate::{Channel, Nanos};
use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Mutex;

/// "No estimate" in the atomics below.
const UNKNOWN: u64 = u64::MAX;

fn load(v: &AtomicU64) -> Option<Nanos> {
    match v.load(Relaxed) {
        UNKNOWN => None,
        ns => Some(ns),
    }
}

fn store(v: &AtomicU64, ns: Option<Nanos>) {
    v.store(ns.unwrap_or(UNKNOWN), Relaxed);
}

/// One peer's published state.
pub struct PeerLink {
    name: String,
    owd: [AtomicU64; 2],
    rtt: [AtomicU64; 2],
    measured: [AtomicU64; 2],
    alive: [AtomicBool; 2],
    /// Reported liveness ([`Liveness`](crate::liveness::Liveness)): up, time
    /// since anything was last heard, transitions to down.
    reported_up: [AtomicBool; 2],
    silent_for: [AtomicU64; 2],
    downs: [AtomicU64; 2],
    /// Bumped after every change of `endpoints`.
    endpoint_gen: AtomicU64,
    endpoints: Mutex<[Option<SocketAddr>; 2]>,
    /// Per-device limit counters (written by both halves, device_limits.rs).
    pub limits: DeviceLimits,
    /// Rule (c) of crate::llc_share, written only while it is on: when the
    /// send half's virtual LLC queue empties (send half, per LLC packet) and
    /// the other users' queue in bytes, as f64 bits (receive half, per LLC
    /// probe answer).
    llc_empty_at: AtomicU64,
    llc_others: AtomicU64,
}

impl PeerLink {
    fn new(p: &PeerConfig) -> PeerLink {
        let unknown = || [AtomicU64::new(UNKNOWN), AtomicU64::new(UNKNOWN)];
        PeerLink {
            name: p.name.clone(),
            owd: unknown(),
            rtt: unknown(),
            measured: unknown(),
            alive: [AtomicBool::new(true), AtomicBool::new(true)],
            reported_up: Default::default(),
            silent_for: unknown(),
            downs: Default::default(),
            endpoint_gen: AtomicU64::new(0),
            endpoints: Mutex::new(p.endpoints),
            limits: DeviceLimits::default(),
            llc_empty_at: AtomicU64::new(0),
            llc_others: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// The peer's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The RTT the policy uses on `ch` (pinned or measured, HBC scaled).
    pub fn rtt(&self, ch: Channel) -> Option<Nanos> {
        load(&self.rtt[ch.index()])
    }

    /// The measured RTT on `ch` (window minimum, before pin and scale).
    pub fn measured_rtt(&self, ch: Channel) -> Option<Nanos> {
        load(&self.measured[ch.index()])
    }

    /// One-way delay on `ch` (policy RTT / 2).
    pub fn owd(&self, ch: Channel) -> Option<Nanos> {
        load(&self.owd[ch.index()])
    }

    /// Whether anything was heard on `ch` within the dead-channel time.
    pub fn alive(&self, ch: Channel) -> bool {
        self.alive[ch.index()].load(Relaxed)
    }

    /// Whether `ch` is reported up: heard within the last few probe rounds
    /// ([`Liveness`](crate::liveness::Liveness)); false until first heard.
    pub fn reported_up(&self, ch: Channel) -> bool {
        self.reported_up[ch.index()].load(Relaxed)
    }

    /// Time since anything was heard on `ch` (at the last publication); `None`: never.
    pub fn silent_for(&self, ch: Channel) -> Option<Nanos> {
        load(&self.silent_for[ch.index()])
    }

    /// How many times `ch` was reported down.
    pub fn downs(&self, ch: Channel) -> u64 {
        self.downs[ch.index()].load(Relaxed)
    }

    /// The peer's outer endpoint on `ch`, if known.
    pub fn endpoint(&self, ch: Channel) -> Option<SocketAddr> {
        self.endpoints.lock().expect("endpoint lock")[ch.index()]
    }

    /// Both channels as the policy sees them, except reachability, which the
    /// send half fills in from its endpoint cache.
    pub(crate) fn view(&self) -> ChannelView {
        ChannelView {
            hbc_owd: self.owd(Channel::Hbc),
            llc_owd: self.owd(Channel::Llc),
            alive: [self.alive(Channel::Hbc), self.alive(Channel::Llc)],
            reachable: [true, true],
            llc_others: self.llc_others(),
        }
    }

    /// Bytes the other users of the shared LLC are estimated to have queued
    /// (rule (c); 0 while it is off).
    pub fn llc_others(&self) -> f64 {
        f64::from_bits(self.llc_others.load(Relaxed))
    }

    pub(crate) fn publish_llc_others(&self, bytes: f64) {
        self.llc_others.store(bytes.to_bits(), Relaxed);
    }

    /// When the send half's virtual LLC queue empties (rule (c) only).
    pub(crate) fn llc_empty_at(&self) -> Nanos {
        self.llc_empty_at.load(Relaxed)
    }

    pub(crate) fn publish_llc_empty_at(&self, at: Nanos) {
        self.llc_empty_at.store(at, Relaxed);
    }

    pub(crate) fn publish(
        &self,
        ch: Channel,
        owd: Option<Nanos>,
        rtt: Option<Nanos>,
        measured: Option<Nanos>,
        alive: bool,
    ) {
        let i = ch.index();
        store(&self.owd[i], owd);
        store(&self.rtt[i], rtt);
        store(&self.measured[i], measured);
        self.alive[i].store(alive, Relaxed);
    }

    pub(crate) fn publish_liveness(
        &self,
        ch: Channel,
        up: bool,
        silent_for: Option<Nanos>,
        downs: u64,
    ) {
        let i = ch.index();
        self.reported_up[i].store(up, Relaxed);
        store(&self.silent_for[i], silent_for);
        self.downs[i].store(downs, Relaxed);
    }

    pub(crate) fn set_endpoints(&self, endpoints: [Option<SocketAddr>; 2]) {
        *self.endpoints.lock().expect("endpoint lock") = endpoints;
        self.endpoint_gen.fetch_add(1, Release);
    }

    /// The endpoints if their generation differs from `seen`, with the new generation.
    pub(crate) fn endpoints_since(&self, seen: u64) -> Option<(u64, [Option<SocketAddr>; 2])> {
        let gen = self.endpoint_gen.load(Acquire);
        (gen != seen).then(|| (gen, *self.endpoints.lock().expect("endpoint lock")))
    }
}

/// The state shared by the halves of one endpoint (two, or two per worker).
pub struct Shared {
    peers: Vec<PeerLink>,
    /// Each receive worker's reorder-buffer counters (index = worker).
    reorder: Mutex<Vec<ReorderStats>>,
}

impl Shared {
    pub(crate) fn new(peers: &[PeerConfig], workers: usize) -> Shared {
        Shared {
            peers: peers.iter().map(PeerLink::new).collect(),
            reorder: Mutex::new(vec![ReorderStats::default(); workers.max(1)]),
        }
    }

    /// Every peer, by index.
    pub fn peers(&self) -> &[PeerLink] {
        &self.peers
    }

    /// Reorder-buffer counters as of the last publication, over all
    /// receive workers ([`ReorderStats::merge`]).
    pub fn reorder_stats(&self) -> ReorderStats {
        let all = self.reorder.lock().expect("reorder stats lock");
        all.iter().skip(1).fold(all[0], |acc, s| acc.merge(s))
    }

    pub(crate) fn publish_reorder(&self, worker: usize, s: ReorderStats) {
        self.reorder.lock().expect("reorder stats lock")[worker] = s;
    }

    /// Whether every peer has one-way delays for both channels.
    pub fn all_estimated(&self) -> bool {
        self.peers
            .iter()
            .all(|p| Channel::ALL.iter().all(|&ch| p.owd(ch).is_some()))
    }

    /// The largest HBC one-way delay over the peers (0 if none is known).
    pub fn max_hbc_owd(&self) -> Nanos {
        self.peers
            .iter()
            .filter_map(|p| p.owd(Channel::Hbc))
            .max()
            .unwrap_or(0)
    }
}
