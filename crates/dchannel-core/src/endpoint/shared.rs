//! What the two halves of an endpoint share, per peer: the outer endpoints
//! (learned by the receive half at a gateway), the RTT estimates and
//! liveness the receive half publishes every [`PUBLISH_PERIOD`](super::PUBLISH_PERIOD)
//! for the send half's policy and for reporting, and the peer's traffic
//! counters; and the table of peers itself, which a gateway changes while it
//! runs ([`Shared::change_peers`]: devices added, removed, re-keyed).
//!
//! Only the receive half writes the estimates. The send half reads per
//! packet, so the hot path is a few relaxed atomic loads: the endpoints sit
//! behind a mutex that it takes only when the generation counter says they
//! changed (a client roamed), which it remembers in its own cache. The peer
//! table works the same way: each half keeps its own per-peer state and
//! `Arc<PeerLink>`s, and looks at the table again only when its generation
//! moved (one atomic load per packet; no lock shared by all peers on the
//! packet path).

use super::{ConfigError, DeviceLimits, PeerConfig, Role};
use crate::reorder::ReorderStats;
use crate::steer::ChannelView;
use crate::{Channel, Nanos};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex};

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

/// One peer's data datagrams per channel (index = Channel) each way, and
/// what was dropped of its traffic after it was identified (downlink without
/// session or endpoint, or a datagram it sent that failed the source checks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerTraffic {
    /// Bytes of data datagrams sent to it (whole datagrams, sealed).
    pub tx_bytes: [u64; 2],
    /// Data datagrams sent to it.
    pub tx_packets: [u64; 2],
    /// Bytes of data datagrams accepted from it.
    pub rx_bytes: [u64; 2],
    /// Data datagrams accepted from it.
    pub rx_packets: [u64; 2],
    /// Its packets dropped after it was identified.
    pub drops: u64,
}

/// One peer's published state.
pub struct PeerLink {
    /// Its index in the table (the authentication layer's peer id too).
    slot: usize,
    name: String,
    tunnel_addr: Option<IpAddr>,
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
    /// [`PeerTraffic`]: tx bytes, tx packets, rx bytes, rx packets per channel.
    traffic: [[AtomicU64; 2]; 4],
    drops: AtomicU64,
}

impl PeerLink {
    fn new(slot: usize, p: &PeerConfig) -> PeerLink {
        let unknown = || [AtomicU64::new(UNKNOWN), AtomicU64::new(UNKNOWN)];
        PeerLink {
            slot,
            name: p.name.clone(),
            tunnel_addr: p.tunnel_addr,
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
            traffic: Default::default(),
            drops: AtomicU64::new(0),
        }
    }

    /// Its index in the peer table (what the halves and the authentication
    /// layer call `peer`).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The peer's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The peer's tunnel address (a gateway's device), if configured.
    pub fn tunnel_addr(&self) -> Option<IpAddr> {
        self.tunnel_addr
    }

    /// Its traffic so far.
    pub fn traffic(&self) -> PeerTraffic {
        let read = |i: usize| self.traffic[i].each_ref().map(|v| v.load(Relaxed));
        PeerTraffic {
            tx_bytes: read(0),
            tx_packets: read(1),
            rx_bytes: read(2),
            rx_packets: read(3),
            drops: self.drops.load(Relaxed),
        }
    }

    /// One data datagram of `bytes` sent to it on `ch` (send half only).
    pub(crate) fn count_tx(&self, ch: Channel, bytes: usize) {
        self.traffic[0][ch.index()].fetch_add(bytes as u64, Relaxed);
        self.traffic[1][ch.index()].fetch_add(1, Relaxed);
    }

    /// One data datagram of `bytes` accepted from it on `ch` (receive half only).
    pub(crate) fn count_rx(&self, ch: Channel, bytes: usize) {
        self.traffic[2][ch.index()].fetch_add(bytes as u64, Relaxed);
        self.traffic[3][ch.index()].fetch_add(1, Relaxed);
    }

    /// One of its packets dropped after it was identified.
    pub(crate) fn count_drop(&self) {
        self.drops.fetch_add(1, Relaxed);
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

/// The peer table: slot `i` is peer `i`, `None` once removed (a later peer
/// may take the slot again).
pub type PeerTable = Vec<Option<Arc<PeerLink>>>;

/// Brings a half's per-slot state `mine` in line with `table`: a slot whose
/// peer is new (another `Arc<PeerLink>` than the one `link_of` finds in
/// `mine`) gets `new(link)`, a removed one `None`; the others keep theirs.
pub(crate) fn follow_table<T>(
    mine: &mut Vec<Option<T>>,
    table: &PeerTable,
    link_of: impl Fn(&T) -> &Arc<PeerLink>,
    mut new: impl FnMut(&Arc<PeerLink>) -> T,
) {
    mine.truncate(table.len());
    mine.resize_with(table.len(), || None);
    for (m, theirs) in mine.iter_mut().zip(table.iter()) {
        match theirs {
            None => *m = None,
            Some(link) if m.as_ref().is_some_and(|x| Arc::ptr_eq(link_of(x), link)) => {}
            Some(link) => *m = Some(new(link)),
        }
    }
}

/// The state shared by the halves of one endpoint (two, or two per worker).
pub struct Shared {
    role: Role,
    /// The current table and its generation (copied on change: the halves
    /// hold on to the `Arc` of the one they last looked at).
    table: Mutex<(u64, Arc<PeerTable>)>,
    /// The table's generation, readable without the lock.
    generation: AtomicU64,
    /// Each receive worker's reorder-buffer counters (index = worker).
    reorder: Mutex<Vec<ReorderStats>>,
}

impl Shared {
    pub(crate) fn new(role: Role, peers: &[PeerConfig], workers: usize) -> Shared {
        let table = peers
            .iter()
            .enumerate()
            .map(|(i, p)| Some(Arc::new(PeerLink::new(i, p))))
            .collect();
        Shared {
            role,
            table: Mutex::new((0, Arc::new(table))),
            generation: AtomicU64::new(0),
            reorder: Mutex::new(vec![ReorderStats::default(); workers.max(1)]),
        }
    }

    /// Every peer now, in slot order (a snapshot; removed slots left out).
    pub fn peers(&self) -> Vec<Arc<PeerLink>> {
        self.table().1.iter().flatten().cloned().collect()
    }

    /// Peer `slot`, if it exists.
    pub fn peer(&self, slot: usize) -> Option<Arc<PeerLink>> {
        self.table().1.get(slot).cloned().flatten()
    }

    /// Bumped by every [`change_peers`](Self::change_peers).
    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    /// The table and its generation.
    pub(crate) fn table(&self) -> (u64, Arc<PeerTable>) {
        let t = self.table.lock().expect("peer table lock");
        (t.0, Arc::clone(&t.1))
    }

    /// Changes the peer table at once, all or nothing: each `(slot, Some(peer))`
    /// puts a new peer in `slot` (replacing any there: its estimates, learned
    /// endpoints and flows start over), each `(slot, None)` removes the peer
    /// in `slot`. Peers of other slots keep all their state. Refused (and
    /// nothing changed) if two peers would share a tunnel address or a
    /// gateway's peer would have none. The halves pick the change up at
    /// their next packet or timeout.
    pub fn change_peers(&self, changes: &[(usize, Option<PeerConfig>)]) -> Result<(), ConfigError> {
        let mut t = self.table.lock().expect("peer table lock");
        let mut table: PeerTable = (*t.1).clone();
        for (slot, peer) in changes {
            if table.len() <= *slot {
                table.resize(slot + 1, None);
            }
            table[*slot] = peer.as_ref().map(|p| Arc::new(PeerLink::new(*slot, p)));
        }
        while table.last().is_some_and(Option::is_none) {
            table.pop();
        }
        let mut by_addr = HashMap::new();
        for p in table.iter().flatten() {
            match p.tunnel_addr {
                Some(a) if by_addr.insert(a, p.slot).is_some() => {
                    return Err(ConfigError::DuplicateTunnelAddr(a))
                }
                None if self.role == Role::Gateway => {
                    return Err(ConfigError::NoTunnelAddr(p.name.clone()))
                }
                _ => {}
            }
        }
        t.0 += 1;
        t.1 = Arc::new(table);
        self.generation.store(t.0, Release);
        Ok(())
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
        self.peers()
            .iter()
            .all(|p| Channel::ALL.iter().all(|&ch| p.owd(ch).is_some()))
    }

    /// The largest HBC one-way delay over the peers (0 if none is known).
    pub fn max_hbc_owd(&self) -> Nanos {
        self.peers()
            .iter()
            .filter_map(|p| p.owd(Channel::Hbc))
            .max()
            .unwrap_or(0)
    }
}
