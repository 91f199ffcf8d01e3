//! The send half: one inner packet from the TUN in, one datagram to send out.
//!
//! For each packet: find the peer (the client's gateway; at a gateway, the
//! client whose tunnel address is the packet's destination), steer it with
//! that peer's [`Steerer`] against the channels as they are now (published
//! estimates and liveness, and which endpoints are known), so the channel
//! fallback happens before the virtual LLC queue and the flow are charged,
//! then write the header in front of the packet and seal it. The packet is
//! never copied: the driver reads it at `buf[tx.headroom()..]` and sends
//! `buf[..len]`. Nothing is allocated per packet.
//!
//! Each peer's flow table is bounded (`--flow-capacity`), and so are the flows
//! of all peers together (`Config::max_flows_total`): when a new flow takes
//! the total over the cap, the peer with the most flows (the new flow's own
//! on a tie) loses its least recently seen flow, so a device opening flows
//! without end evicts its own, never another's (issue 37). The per-peer
//! counts sit in an ordered set shared by all send workers (flow_count.rs):
//! O(log peers) per new flow, nothing per packet of a known flow. A removed
//! peer's flows leave the count with it, and a peer added in a reused slot
//! starts at none.
//!
//! Peers added or removed while the endpoint runs ([`Shared::change_peers`])
//! are picked up at the next packet: the half compares the table's
//! generation with the one it last saw (one atomic load) and only then looks
//! at the send table shared by all send workers ([`SendTable`]): the first
//! worker to see a new generation rebuilds what changed there, the others
//! copy its snapshot; peers that did not change keep their flows.
//!
//! A device's LLC share (rule (b), docs/llc_sharing.md) is a token bucket in
//! that peer's own [`Steerer`], behind the same per-peer mutex: it adds no
//! lock to the data path; its counters go to the peer's `limits`.

use super::flow_count::FlowCount;
use super::shared::follow_table;
use super::{Config, DatagramAuth, DropReason, Outgoing, ProbeTransmit, Shared, Timer, TimerTable};
use super::{PeerLink, PolicyFactory, Role};
use crate::flow_table::FlowTableStats;
use crate::policy::Outcome;
use crate::steer::{SteerConfig, Steered, Steerer};
use crate::wire::{self, channel_flags, Header, MsgType, ProbeKind, HEADER_LEN, PROBE_BODY_LEN};
use crate::{packet, Channel, Nanos};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

/// A datagram to send: `buf[..len]` of the buffer given to
/// [`SendHalf::handle_tun`], on `channel`, to `destination`.
#[derive(Clone, Copy, Debug)]
pub struct Transmit {
    /// Index of the peer it goes to.
    pub peer: usize,
    /// The channel it goes on (the one actually used, after fallback).
    pub channel: Channel,
    /// The peer's endpoint on that channel.
    pub destination: SocketAddr,
    /// Bytes of the datagram at the start of the buffer.
    pub len: usize,
    /// The steering decision, for counters and the decision log.
    pub steered: Steered,
}

/// The send half's state per peer (shared by the send workers, each peer
/// behind its own mutex: two workers wait for each other only when they send
/// to the same peer at once).
pub struct SendPeer {
    /// Set (under this lock) once the peer left the table: a worker still on
    /// an older snapshot then no longer counts its flows for the slot.
    retired: bool,
    steerer: Steerer,
    /// The peer's endpoints as last seen in [`Shared`], and their generation.
    endpoints: [Option<SocketAddr>; 2],
    endpoint_gen: u64,
    /// The steerer's flows as the shared [`FlowCount`] counts them.
    counted_flows: usize,
}

/// Inner packets in, datagrams out (see the module docs).
///
/// One of `workers` send halves of an endpoint ([`super::new_workers`]): any
/// of them may send to any peer (the per-peer state is shared, each peer
/// behind its own mutex); this one expires the flows of the peers ≡ `worker`
/// (mod `workers`).
pub struct SendHalf<A> {
    role: Role,
    shared: Arc<Shared>,
    /// The send workers' per-peer state, following the peer table.
    table: Arc<Mutex<SendTable>>,
    /// This worker's snapshot of `table`'s peers, per slot (`None`: no peer).
    peers: Arc<[Option<SendSlot>]>,
    /// The generation of the peer table `peers` follows.
    table_generation: u64,
    /// Peer per tunnel address (gateway role); empty for a client.
    by_tunnel_addr: Arc<HashMap<IpAddr, usize>>,
    auth: A,
    worker: usize,
    workers: usize,
    timers: TimerTable,
    flow_expiry_period: Nanos,
    /// Flows of all peers against the gateway-wide cap, one count for all
    /// send workers.
    flow_count: Arc<Mutex<FlowCount>>,
    /// The peer whose HBC the last packet's decision asked to wake (`prewarm`).
    pending_wake: Option<usize>,
    /// Wake probes sealed for sending.
    wakes: u64,
    /// The copy the last packet's decision asked for on the other channel
    /// (`realtime-dup`), its inner packet in `copy_body` (kept in clear: the
    /// original is sealed in place).
    pending_copy: Option<PendingCopy>,
    copy_body: Vec<u8>,
    /// Copies sealed for sending.
    copies: u64,
    /// The lab's delay oracle, consulted per packet instead of the HBC
    /// estimate (see [`HbcOwdOracle`]); `None` in every real deployment.
    oracle: Option<Box<dyn HbcOwdOracle>>,
    /// Rule (c) is on: tell the receive half when each peer's virtual LLC
    /// queue empties, after every LLC packet.
    publish_llc_queue: bool,
}

/// A copy of the last packet, due on the other channel ([`SendHalf::poll_copy`]).
#[derive(Clone, Copy, Debug)]
struct PendingCopy {
    peer: usize,
    channel: Channel,
    destination: SocketAddr,
    header: Header,
    steered: Steered,
}

/// A source of the HBC's true current one-way delay in this sender's
/// direction. The lab implements it with the channel emulator's oracle file
/// (`--hbc-owd-oracle`), to measure how much a perfect delay estimate would
/// buy a policy (issue 19); when it returns `None` the estimate is used.
pub trait HbcOwdOracle: Send {
    /// The one-way delay a packet sent on the HBC now would see.
    fn hbc_owd(&self) -> Option<Nanos>;
}

/// One slot of the send table: the peer's shared link (outside the lock, so
/// [`follow_table`] can compare it) and its steering state.
#[derive(Clone)]
pub(super) struct SendSlot {
    link: Arc<PeerLink>,
    state: Arc<Mutex<SendPeer>>,
}

impl SendSlot {
    /// The peer's state, locked (a poisoned lock: another worker panicked
    /// mid-packet; the steering state is still usable).
    fn lock(&self) -> MutexGuard<'_, SendPeer> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The per-peer state of all send workers, following the peer table: the
/// first send worker to see a new table generation brings it in line here;
/// every worker then takes a snapshot (an `Arc` each) of `peers` and
/// `by_tunnel_addr`.
pub(super) struct SendTable {
    /// The peer-table generation `peers` follows (`u64::MAX`: none yet).
    generation: u64,
    peers: Arc<[Option<SendSlot>]>,
    by_tunnel_addr: Arc<HashMap<IpAddr, usize>>,
    /// For the steerers of peers added later.
    steer: SteerConfig,
    estimate_all: bool,
    policy: PolicyFactory,
}

/// A peer's [`Steerer`], locked, from [`SendHalf::steerer`].
pub struct SteererGuard<'a>(MutexGuard<'a, SendPeer>);

impl Deref for SteererGuard<'_> {
    type Target = Steerer;
    fn deref(&self) -> &Steerer {
        &self.0.steerer
    }
}

impl DerefMut for SteererGuard<'_> {
    fn deref_mut(&mut self) -> &mut Steerer {
        &mut self.0.steerer
    }
}

impl<A: DatagramAuth> SendHalf<A> {
    /// The per-peer state of all send workers (one [`Steerer`] per peer).
    pub(super) fn peers(
        cfg: &Config,
        shared: &Shared,
        policy: PolicyFactory,
    ) -> Arc<Mutex<SendTable>> {
        let _ = shared; // the first send half's follow_peer_table fills it
        Arc::new(Mutex::new(SendTable {
            generation: u64::MAX,
            peers: Arc::from(Vec::new()),
            by_tunnel_addr: Arc::default(),
            steer: cfg.steer.clone(),
            estimate_all: cfg.estimate_all,
            policy,
        }))
    }

    pub(super) fn new(
        cfg: &Config,
        shared: Arc<Shared>,
        table: Arc<Mutex<SendTable>>,
        flow_count: Arc<Mutex<FlowCount>>,
        auth: A,
        (worker, workers): (usize, usize),
    ) -> SendHalf<A> {
        let mut timers = TimerTable::default();
        timers.set(Timer::FlowExpiry, 0);
        let mut tx = SendHalf {
            role: cfg.role,
            shared,
            table,
            peers: Arc::from(Vec::new()),
            table_generation: u64::MAX,
            by_tunnel_addr: Arc::default(),
            auth,
            worker,
            workers,
            timers,
            flow_expiry_period: cfg.flow_expiry_period,
            flow_count,
            pending_wake: None,
            wakes: 0,
            pending_copy: None,
            copy_body: Vec::new(),
            copies: 0,
            oracle: None,
            publish_llc_queue: cfg.llc_probe_share.is_some(),
        };
        tx.follow_peer_table();
        tx
    }

    /// Catches up with the peer table if it changed since last time: new
    /// peers get a fresh steerer, removed ones are forgotten, the others keep
    /// theirs.
    fn follow_peer_table(&mut self) {
        if self.shared.generation() == self.table_generation {
            return;
        }
        let mut guard = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let t = &mut *guard;
        let (generation, table) = self.shared.table();
        if t.generation != generation {
            let mut slots: Vec<Option<SendSlot>> = t.peers.to_vec();
            let before = slots.clone();
            let (steer, estimate_all, policy) = (&t.steer, t.estimate_all, &mut t.policy);
            follow_table(
                &mut slots,
                &table,
                |s| &s.link,
                |link| {
                    let mut steerer = Steerer::new(steer.clone(), policy());
                    steerer.estimate_all = estimate_all;
                    SendSlot {
                        link: Arc::clone(link),
                        state: Arc::new(Mutex::new(SendPeer {
                            retired: false,
                            steerer,
                            endpoints: [link.endpoint(Channel::Hbc), link.endpoint(Channel::Llc)],
                            endpoint_gen: 0,
                            counted_flows: 0,
                        })),
                    }
                },
            );
            // Peers that left (removed, or replaced in their slot) retire
            // first, so no worker still holding them counts for the slot;
            // then the shared count is set again from the slots there are.
            for (i, old) in before.iter().enumerate() {
                let Some(old) = old else { continue };
                let stays = slots
                    .get(i)
                    .and_then(Option::as_ref)
                    .is_some_and(|s| Arc::ptr_eq(&s.state, &old.state));
                if !stays {
                    old.lock().retired = true;
                }
            }
            let counts: Vec<usize> = slots
                .iter()
                .map(|s| s.as_ref().map_or(0, |s| s.lock().counted_flows))
                .collect();
            let mut fc = self.flow_count();
            for (i, n) in counts
                .into_iter()
                .enumerate()
                .chain((slots.len()..before.len()).map(|i| (i, 0)))
            {
                fc.set(i, n);
            }
            drop(fc);
            let mut by_addr = HashMap::new();
            if self.role == Role::Gateway {
                for link in table.iter().flatten() {
                    if let Some(a) = link.tunnel_addr() {
                        by_addr.insert(a, link.slot());
                    }
                }
            }
            t.peers = Arc::from(slots);
            t.by_tunnel_addr = Arc::new(by_addr);
            t.generation = generation;
        }
        self.peers = Arc::clone(&t.peers);
        self.by_tunnel_addr = Arc::clone(&t.by_tunnel_addr);
        self.table_generation = t.generation;
    }

    /// Steer with `oracle`'s HBC delay instead of the estimate (lab only).
    pub fn set_hbc_owd_oracle(&mut self, oracle: Box<dyn HbcOwdOracle>) {
        self.oracle = Some(oracle);
    }

    /// Steers and encapsulates the inner packet at `buf[h..h + len]`, `h` =
    /// [`headroom`](Self::headroom). `buf` must also have
    /// [`tailroom`](Self::tailroom) spare bytes after it. On success the
    /// datagram is `buf[..transmit.len]`.
    pub fn handle_tun(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        len: usize,
    ) -> Result<Transmit, DropReason> {
        self.follow_peer_table();
        let headroom = self.headroom();
        let pkt = &buf[headroom..headroom + len];
        let peer = if self.role == Role::Client {
            0
        } else {
            packet::dst_addr(pkt)
                .and_then(|a| self.by_tunnel_addr.get(&a).copied())
                .ok_or(DropReason::NoClient)?
        };
        let slot = self
            .peers
            .get(peer)
            .and_then(Option::as_ref)
            .ok_or(DropReason::NoClient)?;
        let link = Arc::clone(&slot.link);
        let mut guard = slot.lock();
        let p = &mut *guard;
        if let Some((gen, endpoints)) = link.endpoints_since(p.endpoint_gen) {
            p.endpoint_gen = gen;
            p.endpoints = endpoints;
        }
        let mut view = link.view();
        if let Some(owd) = self.oracle.as_ref().and_then(|o| o.hbc_owd()) {
            view.hbc_owd = Some(owd);
        }
        view.reachable = p.endpoints.map(|e| e.is_some());
        if view.reachable == [false, false] {
            link.count_drop();
            return Err(DropReason::NoEndpoint);
        }
        let steered = p.steerer.steer(now, pkt, &view);
        if let Some(share) = p.steerer.share_stats() {
            link.limits.publish_llc_share(&share);
        }
        if self.publish_llc_queue && steered.channel == Channel::Llc {
            link.publish_llc_empty_at(p.steerer.llc_empty_at());
        }
        let new_count = p.steerer.flows() != p.counted_flows;
        if new_count {
            self.count_flows(peer, p);
        }
        let channel = steered.channel;
        if steered.decision.wake_hbc
            && channel == Channel::Llc
            && p.endpoints[Channel::Hbc.index()].is_some()
        {
            self.pending_wake = Some(peer);
        }
        let destination = p.endpoints[channel.index()].expect("fallback picks a reachable channel");
        let copy_to = steered
            .copy
            .and_then(|c| Some((c, p.endpoints[c.index()]?)));
        drop(guard); // sealing locks the peer's crypto state, not this
        if new_count {
            self.enforce_flow_cap(peer);
        }
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        let header = Header {
            msg_type: MsgType::Data,
            flags: channel_flags(channel)
                | flag(steered.decision.unordered, wire::FLAG_UNORDERED)
                | flag(copy_to.is_some(), wire::FLAG_DUPLICATE),
            flow_id: steered.flow_id,
            seq: steered.seq,
            token: 0,
        };
        if copy_to.is_some() {
            self.copy_body.clear();
            self.copy_body
                .extend_from_slice(&buf[headroom..headroom + len]);
        }
        // Steered and charged even if sealing fails: the policy saw the packet
        // as the application sent it, and a lost packet is retransmitted.
        let out = Outgoing {
            peer,
            channel,
            header,
            body_len: len,
        };
        let len = self
            .auth
            .seal(now, out, buf)
            .inspect_err(|_| link.count_drop())?;
        link.count_tx(channel, len);
        self.pending_copy = copy_to.map(|(channel, destination)| PendingCopy {
            peer,
            channel,
            destination,
            header: Header {
                flags: (header.flags & !wire::FLAG_LLC) | channel_flags(channel),
                ..header
            },
            steered,
        });
        Ok(Transmit {
            peer,
            channel,
            destination,
            len,
            steered,
        })
    }

    /// The copy on the other channel the last [`handle_tun`](Self::handle_tun)
    /// asked for ([`Steered::copy`], `realtime-dup`), sealed into `buf` (as large
    /// as `handle_tun`'s): the same header (flow id, sequence number,
    /// [`FLAG_DUPLICATE`](wire::FLAG_DUPLICATE)) and inner packet, sealed on its
    /// own channel. Call after every `handle_tun` and send it too; `None` when
    /// none is due or it cannot be sealed.
    pub fn poll_copy(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        let c = self.pending_copy.take()?;
        let (at, body_len) = (self.headroom(), self.copy_body.len());
        buf[at..at + body_len].copy_from_slice(&self.copy_body);
        let out = Outgoing {
            peer: c.peer,
            channel: c.channel,
            header: c.header,
            body_len,
        };
        let link = self.peers.get(c.peer)?.as_ref()?.link.clone();
        let len = self
            .auth
            .seal(now, out, buf)
            .inspect_err(|_| link.count_drop())
            .ok()?;
        link.count_tx(c.channel, len);
        self.copies += 1;
        Some(Transmit {
            peer: c.peer,
            channel: c.channel,
            destination: c.destination,
            len,
            steered: c.steered,
        })
    }

    /// Copies produced by [`poll_copy`](Self::poll_copy) so far.
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// The wake datagram the last [`handle_tun`](Self::handle_tun) asked for,
    /// written into `buf` (at least [`wake_buf_len`](Self::wake_buf_len)
    /// bytes): a [`ProbeKind::Wake`] on the HBC to the same peer. Call after
    /// every `handle_tun` and send it too; `None` when none is due or it cannot
    /// be sealed (no session yet).
    pub fn poll_wake(&mut self, now: Nanos, buf: &mut [u8]) -> Option<ProbeTransmit> {
        let peer = self.pending_wake.take()?;
        let destination = self.peers.get(peer)?.as_ref()?.lock().endpoints[Channel::Hbc.index()]?;
        let body_at = self.auth.headroom() + HEADER_LEN;
        wire::encode_probe_body(&mut buf[body_at..], ProbeKind::Wake, Channel::Hbc);
        let out = Outgoing::probe(peer, 0, Channel::Hbc);
        let len = self.auth.seal(now, out, buf).ok()?;
        self.wakes += 1;
        Some(ProbeTransmit {
            peer: Some(peer),
            channel: Channel::Hbc,
            destination,
            len,
            control: false,
        })
    }

    /// Bytes of a buffer for [`poll_wake`](Self::poll_wake).
    pub fn wake_buf_len(&self) -> usize {
        self.headroom() + PROBE_BODY_LEN + self.tailroom()
    }

    /// Wake datagrams produced by [`poll_wake`](Self::poll_wake) so far.
    pub fn wakes(&self) -> u64 {
        self.wakes
    }

    /// Bytes a buffer needs in front of the inner packet: the
    /// authentication layer's prefix and the dchannel header.
    pub fn headroom(&self) -> usize {
        self.auth.headroom() + HEADER_LEN
    }

    /// Bytes a buffer needs after the inner packet for sealing.
    pub fn tailroom(&self) -> usize {
        self.auth.tailroom()
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.timers.next()
    }

    /// Evicts idle flows when due (of the peers this worker expires).
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.timers.is_due(Timer::FlowExpiry, now) {
            for slot in (self.worker..self.peers.len()).step_by(self.workers) {
                let Some(s) = self.peers[slot].as_ref() else {
                    continue;
                };
                let mut p = s.lock();
                p.steerer.expire(now);
                self.count_flows(slot, &mut p);
                let stats = p.steerer.flow_table().stats;
                let flows = p.counted_flows;
                drop(p);
                s.link.limits.publish_flows(flows, &stats);
            }
            self.timers
                .set(Timer::FlowExpiry, now + self.flow_expiry_period);
        }
    }

    /// Brings the shared flow count up to date with peer `peer`'s table
    /// (`p`: its state, locked by the caller; a retired peer is not counted).
    fn count_flows(&self, peer: usize, p: &mut SendPeer) {
        if p.retired {
            return;
        }
        let n = p.steerer.flows();
        if std::mem::replace(&mut p.counted_flows, n) != n {
            self.flow_count().set(peer, n);
        }
    }

    /// Over the gateway-wide cap, the peer with the most flows (`peer` on a
    /// tie) loses its least recently seen flows until the total fits. Holds
    /// no peer's lock on entry and one at a time inside (flow_count.rs: lock
    /// order), so two workers evicting at once cannot deadlock.
    fn enforce_flow_cap(&self, peer: usize) {
        loop {
            let Some(victim) = self.flow_count().victim(peer) else {
                return;
            };
            let Some(s) = self.peers.get(victim).and_then(Option::as_ref) else {
                return; // the victim's slot changed under this worker: next packet
            };
            let mut v = s.lock();
            if !v.steerer.evict_for_gateway() {
                return;
            }
            self.count_flows(victim, &mut v);
        }
    }

    /// The gateway-wide flow count, locked (poisoned: another worker
    /// panicked mid-update; the counts are still usable).
    fn flow_count(&self) -> MutexGuard<'_, FlowCount> {
        self.flow_count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Flows in the flow tables of all peers.
    pub fn flows(&self) -> usize {
        self.peers
            .iter()
            .flatten()
            .map(|s| s.lock().steerer.flows())
            .sum()
    }

    /// Flows created and evicted, over the flow tables of all peers.
    pub fn flow_table_stats(&self) -> FlowTableStats {
        self.peers
            .iter()
            .flatten()
            .map(|s| s.lock().steerer.flow_table().stats)
            .fold(FlowTableStats::default(), |a, b| a + b)
    }

    /// Decisions of peer `peer` per (outcome, channel actually used).
    /// Panics if there is no such peer.
    pub fn decisions(&self, peer: usize) -> [[u64; 2]; Outcome::COUNT] {
        *self.live(peer).lock().steerer.counts()
    }

    /// The steerer of peer `peer`, locked (for inspection). Panics if there
    /// is no such peer.
    pub fn steerer(&mut self, peer: usize) -> SteererGuard<'_> {
        self.follow_peer_table();
        SteererGuard(self.live(peer).lock())
    }

    fn live(&self, peer: usize) -> &SendSlot {
        self.peers[peer].as_ref().expect("a live peer")
    }

    /// The state shared with the receive half.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}
