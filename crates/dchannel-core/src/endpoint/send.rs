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
//! counts sit in an ordered set: O(log peers) per new flow, nothing per packet
//! of a known flow. A removed peer's flows leave the count with it, and a
//! peer added in a reused slot starts at none.
//!
//! Peers added or removed while the endpoint runs ([`Shared::change_peers`])
//! are picked up at the next packet: the half compares the table's
//! generation with the one it last saw (one atomic load) and only then
//! rebuilds what changed; peers that did not change keep their flows.

use super::shared::follow_table;
use super::{Config, DatagramAuth, DropReason, Outgoing, ProbeTransmit, Shared, Timer, TimerTable};
use super::{PeerLink, PolicyFactory, Role};
use crate::flow_table::FlowTableStats;
use crate::policy::Outcome;
use crate::steer::{SteerConfig, Steered, Steerer};
use crate::wire::{self, channel_flags, Header, MsgType, ProbeKind, HEADER_LEN, PROBE_BODY_LEN};
use crate::{packet, Channel, Nanos};
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

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

/// The send half's state per peer.
struct SendPeer {
    /// The peer's shared state (estimates, endpoints, counters).
    link: Arc<PeerLink>,
    steerer: Steerer,
    /// The peer's endpoints as last seen in [`Shared`], and their generation.
    endpoints: [Option<SocketAddr>; 2],
    endpoint_gen: u64,
    /// The steerer's flows as `SendHalf::by_flows` counts them.
    counted_flows: usize,
}

/// Inner packets in, datagrams out (see the module docs).
pub struct SendHalf<A> {
    role: Role,
    shared: Arc<Shared>,
    /// Per slot of the peer table (`None`: no peer there).
    peers: Vec<Option<SendPeer>>,
    /// The generation of the peer table `peers` follows.
    table_generation: u64,
    /// Peer per tunnel address (gateway role); empty for a client.
    by_tunnel_addr: HashMap<IpAddr, usize>,
    /// For the steerers of peers added later.
    steer: SteerConfig,
    estimate_all: bool,
    policy: PolicyFactory,
    auth: A,
    timers: TimerTable,
    flow_expiry_period: Nanos,
    /// (flows, peer) of every peer with a flow.
    by_flows: BTreeSet<(usize, usize)>,
    /// Flows of all peers.
    total_flows: usize,
    max_flows_total: usize,
    /// The peer whose HBC the last packet's decision asked to wake (`prewarm`).
    pending_wake: Option<usize>,
    /// Wake probes sealed for sending.
    wakes: u64,
    /// The lab's delay oracle, consulted per packet instead of the HBC
    /// estimate (see [`HbcOwdOracle`]); `None` in every real deployment.
    oracle: Option<Box<dyn HbcOwdOracle>>,
}

/// A source of the HBC's true current one-way delay in this sender's
/// direction. The lab implements it with the channel emulator's oracle file
/// (`--hbc-owd-oracle`), to measure how much a perfect delay estimate would
/// buy a policy (issue 19); when it returns `None` the estimate is used.
pub trait HbcOwdOracle: Send {
    /// The one-way delay a packet sent on the HBC now would see.
    fn hbc_owd(&self) -> Option<Nanos>;
}

impl<A: DatagramAuth> SendHalf<A> {
    pub(super) fn new(
        cfg: &Config,
        shared: Arc<Shared>,
        policy: PolicyFactory,
        auth: A,
    ) -> SendHalf<A> {
        let mut timers = TimerTable::default();
        timers.set(Timer::FlowExpiry, 0);
        let mut tx = SendHalf {
            role: cfg.role,
            shared,
            peers: Vec::new(),
            table_generation: u64::MAX,
            by_tunnel_addr: HashMap::new(),
            steer: cfg.steer.clone(),
            estimate_all: cfg.estimate_all,
            policy,
            auth,
            timers,
            flow_expiry_period: cfg.flow_expiry_period,
            by_flows: BTreeSet::new(),
            total_flows: 0,
            max_flows_total: cfg.max_flows_total.max(1),
            pending_wake: None,
            wakes: 0,
            oracle: None,
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
        let (generation, table) = self.shared.table();
        let (steer, estimate_all, policy) = (&self.steer, self.estimate_all, &mut self.policy);
        follow_table(
            &mut self.peers,
            &table,
            |p| &p.link,
            |link| {
                let mut steerer = Steerer::new(steer.clone(), policy());
                steerer.estimate_all = estimate_all;
                SendPeer {
                    link: Arc::clone(link),
                    steerer,
                    endpoints: [link.endpoint(Channel::Hbc), link.endpoint(Channel::Llc)],
                    endpoint_gen: 0,
                    counted_flows: 0,
                }
            },
        );
        self.recount_flows();
        self.by_tunnel_addr.clear();
        if self.role == Role::Gateway {
            for link in table.iter().flatten() {
                if let Some(a) = link.tunnel_addr() {
                    self.by_tunnel_addr.insert(a, link.slot());
                }
            }
        }
        self.table_generation = generation;
    }

    /// Counts `by_flows` and `total_flows` again from the peers there are
    /// now (after a change of the peer table: a removed peer's flows leave
    /// the count, a new peer in a reused slot has none). O(peers), only when
    /// the table changed.
    fn recount_flows(&mut self) {
        self.by_flows.clear();
        self.total_flows = 0;
        for (slot, p) in self.peers.iter_mut().enumerate() {
            let Some(p) = p else { continue };
            p.counted_flows = p.steerer.flows();
            if p.counted_flows > 0 {
                self.by_flows.insert((p.counted_flows, slot));
            }
            self.total_flows += p.counted_flows;
        }
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
        let p = self
            .peers
            .get_mut(peer)
            .and_then(Option::as_mut)
            .ok_or(DropReason::NoClient)?;
        let link = &p.link;
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
        if p.steerer.flows() != p.counted_flows {
            self.count_flows(peer);
            self.enforce_flow_cap(peer);
        }
        let p = self.peers[peer].as_mut().expect("a live peer");
        let channel = steered.channel;
        if steered.decision.wake_hbc
            && channel == Channel::Llc
            && p.endpoints[Channel::Hbc.index()].is_some()
        {
            self.pending_wake = Some(peer);
        }
        let destination = p.endpoints[channel.index()].expect("fallback picks a reachable channel");
        let header = Header {
            msg_type: MsgType::Data,
            flags: channel_flags(channel),
            flow_id: steered.flow_id,
            seq: steered.seq,
            token: 0,
        };
        // Steered and charged even if sealing fails: the policy saw the packet
        // as the application sent it, and a lost packet is retransmitted.
        let out = Outgoing {
            peer,
            channel,
            header,
            body_len: len,
        };
        let link = Arc::clone(&p.link);
        let len = self
            .auth
            .seal(now, out, buf)
            .inspect_err(|_| link.count_drop())?;
        link.count_tx(channel, len);
        Ok(Transmit {
            peer,
            channel,
            destination,
            len,
            steered,
        })
    }

    /// The wake datagram the last [`handle_tun`](Self::handle_tun) asked for,
    /// written into `buf` (at least [`wake_buf_len`](Self::wake_buf_len)
    /// bytes): a [`ProbeKind::Wake`] on the HBC to the same peer. Call after
    /// every `handle_tun` and send it too; `None` when none is due or it cannot
    /// be sealed (no session yet).
    pub fn poll_wake(&mut self, now: Nanos, buf: &mut [u8]) -> Option<ProbeTransmit> {
        let peer = self.pending_wake.take()?;
        let destination = self.peers.get(peer)?.as_ref()?.endpoints[Channel::Hbc.index()]?;
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

    /// Evicts idle flows when due.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.timers.is_due(Timer::FlowExpiry, now) {
            for slot in 0..self.peers.len() {
                let Some(p) = self.peers[slot].as_mut() else {
                    continue;
                };
                p.steerer.expire(now);
                self.count_flows(slot);
                let p = self.live(slot);
                p.link
                    .limits
                    .publish_flows(p.counted_flows, &p.steerer.flow_table().stats);
            }
            self.timers
                .set(Timer::FlowExpiry, now + self.flow_expiry_period);
        }
    }

    /// Brings `by_flows` and `total_flows` up to date with peer `peer`'s table.
    fn count_flows(&mut self, peer: usize) {
        let p = self.live_mut(peer);
        let n = p.steerer.flows();
        let old = std::mem::replace(&mut p.counted_flows, n);
        if old == n {
            return;
        }
        if old > 0 {
            self.by_flows.remove(&(old, peer));
        }
        if n > 0 {
            self.by_flows.insert((n, peer));
        }
        self.total_flows = self.total_flows + n - old;
    }

    /// Over the gateway-wide cap, the peer with the most flows (`peer` on a
    /// tie) loses its least recently seen flows until the total fits.
    fn enforce_flow_cap(&mut self, peer: usize) {
        while self.total_flows > self.max_flows_total {
            let Some(&(most, largest)) = self.by_flows.last() else {
                return;
            };
            let victim = if self.live(peer).counted_flows >= most {
                peer
            } else {
                largest
            };
            if !self.live_mut(victim).steerer.evict_for_gateway() {
                return;
            }
            self.count_flows(victim);
        }
    }

    /// Flows in the flow tables of all peers.
    pub fn flows(&self) -> usize {
        self.peers.iter().flatten().map(|p| p.steerer.flows()).sum()
    }

    /// Flows created and evicted, over the flow tables of all peers.
    pub fn flow_table_stats(&self) -> FlowTableStats {
        self.peers
            .iter()
            .flatten()
            .map(|p| p.steerer.flow_table().stats)
            .fold(FlowTableStats::default(), |a, b| a + b)
    }

    /// Decisions of peer `peer` per (outcome, channel actually used).
    /// Panics if there is no such peer.
    pub fn decisions(&self, peer: usize) -> &[[u64; 2]; Outcome::COUNT] {
        self.live(peer).steerer.counts()
    }

    /// The steerer of peer `peer` (for inspection). Panics if there is no such peer.
    pub fn steerer(&mut self, peer: usize) -> &mut Steerer {
        self.follow_peer_table();
        &mut self.peers[peer].as_mut().expect("a live peer").steerer
    }

    fn live(&self, peer: usize) -> &SendPeer {
        self.peers[peer].as_ref().expect("a live peer")
    }

    fn live_mut(&mut self, peer: usize) -> &mut SendPeer {
        self.peers[peer].as_mut().expect("a live peer")
    }

    /// The state shared with the receive half.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}
