//! The receive half: one datagram from a channel in; inner packets for the
//! TUN, probe answers and drops out.
//!
//! Admission, in order, for every datagram:
//!
//! 1. [`DatagramAuth::open`] says it is authentic, which peer sent it and
//!    what its 16-byte header says (else e.g. `Crypto { name: "auth_failed" }`,
//!    `BadToken` or `Wire(..)`); nothing of the body is read before this. A
//!    datagram of the authentication layer itself (handshake, keepalive) ends
//!    here as [`Received::Control`]; its answer, if any, leaves through
//!    [`ReceiveHalf::poll_transmit`];
//! 2. the body decodes (data with an inner packet, or a well-formed probe);
//! 3. the source address: a client accepts only its gateway's configured
//!    endpoint on that channel (else `ForeignSource`); a gateway learns the
//!    client's endpoint per channel from it and follows it when it moves
//!    (roaming, reported as [`Event::EndpointMoved`]);
//! 4. the peer counts as heard on that channel (liveness);
//! 5. a probe goes to the peer's RTT estimator (an answer is queued for
//!    [`ReceiveHalf::poll_transmit`]); data from a peer with a tunnel address
//!    (a client, at the gateway) must carry that address as inner source
//!    (else `BadInner` / `SpoofedSource`), so the gateway never relays for
//!    strangers, and a destination the gateway's egress rule allows (else
//!    `EgressDenied`: its own addresses, loopback, link-local, metadata;
//!    `egress.rs`); the second copy of a packet sent on both channels
//!    (`FLAG_DUPLICATE`) is dropped by the peer's duplicate filter
//!    ([`Received::Duplicate`], crate::dedupe: the first copy wins, nothing is
//!    held); accepted data goes through the reorder buffer (LLC
//!    arrivals of a flow wait for their predecessors) to
//!    [`ReceiveHalf::deliveries`].
//!
//! Buffers are the driver's (`B`, e.g. `Vec<u8>`): moved in, held by the
//! reorder buffer if need be, and handed back with each delivery or drop so
//! the driver can reuse them; nothing is copied or allocated per datagram.
//!
//! Peers added or removed while the endpoint runs ([`Shared::change_peers`])
//! are picked up at the next datagram or timeout (the table's generation is
//! one atomic load); peers that did not change keep their estimates.

use super::shared::{follow_table, PeerTable};
use super::{AuthTransmit, Config, DatagramAuth, DropReason, PeerLink, Role, Shared};
use super::{Opened, Outgoing, Source, Timer, TimerTable, PUBLISH_PERIOD};
use crate::dedupe::{CopyOrder, DuplicateFilter};
use crate::egress::EgressFilter;
use crate::liveness::{Change, Liveness};
use crate::llc_share::{SharedDelayConfig, SharedLlcDelay};
use crate::reorder::{Footprint, ReorderBuffer};
use crate::rtt::{ProbeOut, RttConfig, RttEstimator};
use crate::wire::{self, Datagram, ProbeKind, HEADER_LEN, PROBE_BODY_LEN};
use crate::{packet, Channel, Nanos};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::sync::Arc;

/// One accepted data datagram, as the arrival log and the stats see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The peer that sent it.
    pub peer: usize,
    /// Flow id from its header.
    pub flow_id: u16,
    /// Per-flow sequence number.
    pub seq: u32,
    /// Bytes of the inner packet.
    pub inner_len: usize,
    /// Bytes of the whole datagram.
    pub datagram_len: usize,
}

/// What became of one datagram.
#[derive(Debug)]
pub enum Received<B> {
    /// Accepted data: its inner packet is queued for delivery, now or once
    /// the reorder buffer releases it.
    Data(Arrival),
    /// Accepted data, but the second copy of a packet sent on both channels
    /// ([`wire::FLAG_DUPLICATE`]) whose first was delivered: dropped by the
    /// duplicate filter ([`crate::dedupe`]); counted as received on its
    /// channel. The buffer comes back.
    Duplicate {
        /// The copy, as [`Received::Data`] would have described it.
        arrival: Arrival,
        /// The driver's buffer, to reuse.
        buf: B,
    },
    /// An accepted probe (its answer, if any, is queued); the buffer comes back.
    Probe {
        /// The peer that sent it.
        peer: usize,
        /// The driver's buffer, to reuse.
        buf: B,
    },
    /// A datagram of the authentication layer (handshake message, keepalive),
    /// consumed; the buffer comes back.
    Control {
        /// The peer it came from.
        peer: usize,
        /// The driver's buffer, to reuse.
        buf: B,
    },
    /// Refused and counted under `reason`; the buffer comes back.
    Dropped {
        /// Why.
        reason: DropReason,
        /// The driver's buffer, to reuse.
        buf: B,
    },
}

/// An inner packet ready for the TUN: `buf[inner]`.
#[derive(Debug)]
pub struct Deliver<B> {
    /// The peer that sent it.
    pub peer: usize,
    /// The buffer the datagram arrived in.
    pub buf: B,
    /// Where the inner packet is within `buf`.
    pub inner: Range<usize>,
}

impl<B: AsRef<[u8]>> Deliver<B> {
    /// The inner IP packet.
    pub fn packet(&self) -> &[u8] {
        &self.buf.as_ref()[self.inner.clone()]
    }
}

/// A datagram written by [`ReceiveHalf::poll_transmit`] (a probe, or a
/// handshake message or keepalive of the authentication layer): send
/// `buf[..len]` on `channel` to `destination`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeTransmit {
    /// The peer it goes to; `None`: an authentication layer's answer to a
    /// source that is no peer yet (a cookie reply).
    pub peer: Option<usize>,
    /// The channel to send it on.
    pub channel: Channel,
    /// The peer's endpoint on that channel.
    pub destination: SocketAddr,
    /// Bytes of the datagram.
    pub len: usize,
    /// A datagram of the authentication layer (handshake, keepalive), not a probe.
    pub control: bool,
}

/// Something the driver may want to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A gateway learned (`from: None`) or followed a client's endpoint on a channel.
    EndpointMoved {
        /// The client.
        peer: usize,
        /// The channel.
        channel: Channel,
        /// The endpoint before, if one was known.
        from: Option<SocketAddr>,
        /// The new endpoint.
        to: SocketAddr,
    },
    /// A channel to a peer was reported down or up again ([`Liveness`]).
    ChannelChanged {
        /// The peer.
        peer: usize,
        /// What changed.
        change: Change,
    },
}

/// The receive half's state per peer.
struct RecvPeer {
    /// The peer's shared state (estimates, endpoints, counters).
    link: Arc<PeerLink>,
    rtt: RttEstimator,
    /// What the logs and metrics report of each channel.
    liveness: Liveness,
    /// The authoritative endpoints (published to [`Shared`] on change).
    endpoints: [Option<SocketAddr>; 2],
    tunnel_addr: Option<IpAddr>,
    /// Rule (c) (`--llc-share probe`): the other users' LLC queue, learned
    /// from the LLC probes, and the sender's own virtual queue depth when
    /// each outstanding LLC probe was sent, by probe id.
    shared_delay: Option<SharedDelay>,
    /// Which copies of packets sent on both channels were delivered.
    dedupe: DuplicateFilter,
}

/// Rule (c)'s state for one peer (see [`RecvPeer::shared_delay`]).
struct SharedDelay {
    estimate: SharedLlcDelay,
    /// (probe id, own queue bytes at its send), oldest first.
    sent: VecDeque<(u32, f64)>,
}

/// LLC probes whose own-queue depth is remembered at most (as many as the
/// RTT estimator remembers outstanding probes).
const SHARED_DELAY_OUTSTANDING: usize = 16;

impl SharedDelay {
    /// An LLC probe `id` leaves now; the own virtual queue holds `depth` bytes.
    fn sent(&mut self, id: u32, depth: f64) {
        if self.sent.len() == SHARED_DELAY_OUTSTANDING {
            self.sent.pop_front();
        }
        self.sent.push_back((id, depth));
    }

    /// LLC probe `id` measured `rtt`: one sample for the estimator, cleared of
    /// the own queue remembered for it (0 if forgotten).
    fn answered(&mut self, id: u32, rtt: Nanos) {
        let own = match self.sent.iter().position(|&(i, _)| i == id) {
            Some(k) => self.sent.remove(k).map_or(0.0, |(_, d)| d),
            None => 0.0,
        };
        self.estimate.sample(rtt, own);
    }
}

/// Datagrams in; deliveries, probes and events out (see the module docs).
///
/// One of `workers` receive halves of an endpoint ([`super::new_workers`]):
/// this one serves the peers whose index is ≡ `worker` (mod `workers`) and
/// keeps state for those only; the driver routes each peer's datagrams to its
/// worker (a gateway: by session index, see `dchannel_crypto::Config::index_shards`).
pub struct ReceiveHalf<B, A> {
    role: Role,
    shared: Arc<Shared>,
    auth: A,
    worker: usize,
    workers: usize,
    /// Per slot of the peer table (`None`: no peer there, or one another
    /// worker serves: this one keeps state for slots ≡ `worker` mod `workers`).
    peers: Vec<Option<RecvPeer>>,
    /// The generation of the peer table `peers` follows.
    table_generation: u64,
    /// For the estimators of peers added later.
    rtt_cfg: RttConfig,
    /// Rule (c) (`--llc-share probe`), for each peer added: its estimator's config.
    llc_probe_share: Option<SharedDelayConfig>,
    /// Whether the responders' liveness clocks have been started (their
    /// first `handle_timeout`); after that a responder has no timer of its
    /// own. Cleared when the table brings new peers, so theirs start too.
    started: bool,
    reorder: Option<ReorderBuffer<(usize, u16), Deliver<B>>>,
    deliveries: Vec<Deliver<B>>,
    probes: VecDeque<(usize, ProbeOut, SocketAddr)>,
    probe_scratch: Vec<ProbeOut>,
    events: VecDeque<Event>,
    timers: TimerTable,
    reorder_expiry_period: Nanos,
    egress: Option<EgressFilter>,
    /// The virtual LLC queue's drain rate, bytes per ns (rule (c) reads the
    /// send half's queue through [`PeerLink`]'s `llc_empty_at`).
    llc_bytes_per_ns: f64,
}

impl<B: AsRef<[u8]> + AsMut<[u8]> + Footprint, A: DatagramAuth> ReceiveHalf<B, A> {
    pub(super) fn new(
        cfg: &Config,
        shared: Arc<Shared>,
        auth: A,
        (worker, workers): (usize, usize),
    ) -> Self {
        let rtt_cfg = crate::rtt::RttConfig {
            initiator: cfg.role == Role::Client,
            ..cfg.rtt.clone()
        };
        let mut timers = TimerTable::default();
        timers.set(Timer::Publish, 0);
        if cfg.reorder.is_some() {
            timers.set(Timer::ReorderExpiry, 0);
        }
        let mut rx = ReceiveHalf {
            role: cfg.role,
            shared,
            auth,
            worker,
            workers,
            started: false,
            peers: Vec::new(),
            table_generation: u64::MAX,
            rtt_cfg,
            llc_probe_share: cfg.llc_probe_share,
            reorder: cfg
                .reorder
                .as_ref()
                .map(|r| ReorderBuffer::new(r.per_worker(workers))),
            deliveries: Vec::new(),
            probes: VecDeque::new(),
            probe_scratch: Vec::new(),
            events: VecDeque::new(),
            timers,
            reorder_expiry_period: cfg.reorder_expiry_period,
            egress: cfg.egress.clone(),
            llc_bytes_per_ns: cfg.steer.llc_bits_per_sec / 8.0 / 1e9,
        };
        rx.follow_peer_table();
        rx
    }

    /// Catches up with the peer table if it changed since last time: new
    /// peers get a fresh estimator, removed ones are forgotten (with their
    /// reorder state), the others keep theirs.
    fn follow_peer_table(&mut self) {
        if self.shared.generation() == self.table_generation {
            return;
        }
        let (generation, all) = self.shared.table();
        // this worker's share: slots ≡ worker (mod workers); the others None
        let (worker, workers) = (self.worker, self.workers);
        let table: PeerTable = all
            .iter()
            .enumerate()
            .map(|(i, l)| l.clone().filter(|_| i % workers == worker))
            .collect();
        if let Some(r) = &mut self.reorder {
            // A removed or replaced peer's reorder state goes with it (a new
            // peer in its slot starts at zero); what it held is delivered.
            for (slot, mine) in self.peers.iter().enumerate() {
                let Some(mine) = mine else { continue };
                let theirs = table.get(slot).and_then(Option::as_ref);
                if !theirs.is_some_and(|l| Arc::ptr_eq(l, &mine.link)) {
                    r.forget_device(slot, &mut self.deliveries);
                }
            }
        }
        let cfg = &self.rtt_cfg;
        let share = self.llc_probe_share;
        let mut joined = false;
        follow_table(
            &mut self.peers,
            &table,
            |p| &p.link,
            |link| {
                joined = true;
                RecvPeer {
                    link: Arc::clone(link),
                    rtt: RttEstimator::new(cfg.clone()),
                    liveness: Liveness::new(cfg.interval),
                    endpoints: [link.endpoint(Channel::Hbc), link.endpoint(Channel::Llc)],
                    tunnel_addr: link.tunnel_addr(),
                    shared_delay: share.map(|c| SharedDelay {
                        estimate: SharedLlcDelay::new(c),
                        sent: VecDeque::new(),
                    }),
                    dedupe: DuplicateFilter::default(),
                }
            },
        );
        if joined {
            self.started = false; // start the new peers' liveness clocks
        }
        self.table_generation = generation;
    }

    /// Admits (or drops) one datagram, whole in `buf`, that arrived on `channel` from `from`.
    pub fn handle_datagram(
        &mut self,
        now: Nanos,
        channel: Channel,
        from: SocketAddr,
        mut buf: B,
    ) -> Received<B> {
        self.follow_peer_table();
        match self.admit(
            now,
            Source {
                channel,
                addr: from,
            },
            buf.as_mut(),
        ) {
            Err(reason) => Received::Dropped { reason, buf },
            Ok(Admitted::Probe { peer }) => Received::Probe { peer, buf },
            Ok(Admitted::Control { peer }) => Received::Control { peer, buf },
            Ok(Admitted::Duplicate {
                peer,
                flow_id,
                seq,
                inner_len,
            }) => Received::Duplicate {
                arrival: Arrival {
                    peer,
                    flow_id,
                    seq,
                    inner_len,
                    datagram_len: buf.as_ref().len(),
                },
                buf,
            },
            Ok(Admitted::Data {
                peer,
                flow_id,
                seq,
                unordered,
                inner,
            }) => {
                let datagram_len = buf.as_ref().len();
                let inner_len = inner.len();
                // Held, the packet takes its whole buffer, not just the inner bytes.
                let cost = buf.footprint();
                let d = Deliver { peer, buf, inner };
                match &mut self.reorder {
                    Some(r) if flow_id != 0 && !unordered => r.push(
                        now,
                        (peer, flow_id),
                        seq,
                        channel,
                        cost,
                        d,
                        &mut self.deliveries,
                    ),
                    _ => self.deliveries.push(d),
                }
                Received::Data(Arrival {
                    peer,
                    flow_id,
                    seq,
                    inner_len,
                    datagram_len,
                })
            }
        }
    }

    /// Steps 1 to 5 of the module docs, up to the reorder buffer.
    fn admit(&mut self, now: Nanos, source: Source, dg: &mut [u8]) -> Result<Admitted, DropReason> {
        let (peer, header, body) = match self.auth.open(now, source, dg)? {
            Opened::Control { peer } => return Ok(Admitted::Control { peer }),
            Opened::Datagram { peer, header, body } => (peer, header, body),
        };
        let Source {
            channel: ch,
            addr: from,
        } = source;
        if peer % self.workers != self.worker {
            return Err(DropReason::OtherWorker);
        }
        if !matches!(self.peers.get(peer), Some(Some(_))) {
            // added to the authentication layer after our last look
            self.follow_peer_table();
        }
        let Some(p) = self.peers.get_mut(peer).and_then(Option::as_mut) else {
            return Err(DropReason::NoSession);
        };
        let datagram = match wire::decode_body(header, &dg[body.clone()]) {
            Ok(d) => d,
            Err(e) => {
                p.link.count_drop();
                return Err(e.into());
            }
        };
        let known = p.endpoints[ch.index()];
        if known != Some(from) {
            match self.role {
                Role::Client => {
                    p.link.count_drop();
                    return Err(DropReason::ForeignSource);
                }
                Role::Gateway => {
                    p.endpoints[ch.index()] = Some(from);
                    p.link.set_endpoints(p.endpoints);
                    self.events.push_back(Event::EndpointMoved {
                        peer,
                        channel: ch,
                        from: known,
                        to: from,
                    });
                }
            }
        }
        p.rtt.heard(now, ch);
        match datagram {
            Datagram::Probe { header, kind, .. } => {
                let had_sample = p.rtt.measured(ch, now).is_some();
                let link = &self.shared.peers()[peer];
                if let Some(reply) = p.rtt.handle_probe(now, ch, kind, header.seq) {
                    note_llc_probe(p, link, self.llc_bytes_per_ns, now, &reply);
                    self.probes.push_back((peer, reply, from));
                }
                if let (Some(s), Some(d)) = (p.rtt.take_llc_sample(), &mut p.shared_delay) {
                    d.answered(s.id, s.rtt);
                    link.publish_llc_others(d.estimate.others_queue());
                }
                // A channel's first RTT sample is published at once, not at the next
                // 50 ms publication: until then the send half has no estimate and
                // every packet takes the HBC, and the client agent holds READY until
                // both agents have one (start-up cost of every lab run).
                if !had_sample && p.rtt.measured(ch, now).is_some() {
                    self.publish(now);
                }
                Ok(Admitted::Probe { peer })
            }
            Datagram::Data { header, inner } => {
                if let Some(addr) = p.tunnel_addr {
                    let refused = match packet::src_addr(inner) {
                        None => Some(DropReason::BadInner),
                        Some(src) if src != addr => Some(DropReason::SpoofedSource),
                        Some(_) => None,
                    };
                    if let Some(reason) = refused {
                        p.link.count_drop();
                        return Err(reason);
                    }
                }
                if let (Some(rule), Some(dst)) = (&self.egress, packet::dst_addr(inner)) {
                    if !rule.allows(dst) {
                        p.link.count_drop();
                        return Err(DropReason::EgressDenied);
                    }
                }
                p.link.count_rx(ch, dg.len());
                let copy = header.flags & wire::FLAG_DUPLICATE != 0;
                if copy && p.dedupe.admit(now, header.flow_id, header.seq) == CopyOrder::Second {
                    return Ok(Admitted::Duplicate {
                        peer,
                        flow_id: header.flow_id,
                        seq: header.seq,
                        inner_len: body.len(),
                    });
                }
                Ok(Admitted::Data {
                    peer,
                    flow_id: header.flow_id,
                    seq: header.seq,
                    unordered: header.flags & wire::FLAG_UNORDERED != 0,
                    inner: body,
                })
            }
        }
    }

    /// Inner packets ready for the TUN, in order; drain after every
    /// [`handle_datagram`](Self::handle_datagram) and [`handle_timeout`](Self::handle_timeout).
    pub fn deliveries(&mut self) -> std::vec::Drain<'_, Deliver<B>> {
        self.deliveries.drain(..)
    }

    /// Writes the next datagram to send into `buf` (at least
    /// [`probe_buf_len`](Self::probe_buf_len) bytes) and says where it goes:
    /// first the authentication layer's own (handshake messages, keepalives),
    /// then the queued probes. A probe that cannot be sealed (no session: the
    /// peer was lost) is dropped; a layer datagram for a peer whose endpoint
    /// on its channel is unknown too.
    pub fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<ProbeTransmit> {
        while let Some(AuthTransmit {
            peer,
            channel,
            to,
            len,
        }) = self.auth.poll_transmit(now, buf)
        {
            let known = || {
                let peer = peer?;
                match self.peers.get(peer).and_then(Option::as_ref) {
                    Some(p) => p.endpoints[channel.index()],
                    // another worker's peer: the endpoints it published
                    None => self.shared.peer(peer)?.endpoint(channel),
                }
            };
            if let Some(destination) = to.or_else(known) {
                return Some(ProbeTransmit {
                    peer,
                    channel,
                    destination,
                    len,
                    control: true,
                });
            }
        }
        let body_at = self.auth.headroom() + HEADER_LEN;
        while let Some((peer, p, destination)) = self.probes.pop_front() {
            wire::encode_probe_body(&mut buf[body_at..], p.kind, p.channel);
            let out = Outgoing::probe(peer, p.id, p.channel);
            if let Ok(len) = self.auth.seal(now, out, buf) {
                return Some(ProbeTransmit {
                    peer: Some(peer),
                    channel: p.channel,
                    destination,
                    len,
                    control: false,
                });
            }
        }
        None
    }

    /// Bytes a buffer for [`poll_transmit`](Self::poll_transmit) needs.
    pub fn probe_buf_len(&self) -> usize {
        let probe = self.auth.headroom() + HEADER_LEN + PROBE_BODY_LEN + self.auth.tailroom();
        probe.max(self.auth.max_transmit_len())
    }

    /// The next event for the driver's log.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: a probe
    /// round, a reorder timeout, a publication, a reorder-flow expiry or a
    /// timer of the authentication layer (handshake retry, rekey).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        // A responder (the gateway) has no probe rounds: nothing to walk.
        let initiator = self.role == Role::Client;
        let probes = self
            .peers
            .iter()
            .enumerate()
            .filter(|_| initiator)
            .filter_map(|(i, p)| Some((i, p.as_ref()?)))
            .filter(|(i, p)| self.probes_may_run(*i, p))
            .filter_map(|(_, p)| p.rtt.next_deadline());
        let reorder = self.reorder.as_ref().and_then(|r| r.poll_timeout());
        probes
            .chain(reorder)
            .chain(self.timers.next())
            .chain(self.auth.poll_timeout())
            .min()
    }

    /// An initiator's probe rounds wait for a session with the peer: a probe
    /// that cannot be sealed would be lost, and the first RTT estimate with it.
    fn probes_may_run(&self, peer: usize, p: &RecvPeer) -> bool {
        !p.rtt.config().initiator || self.auth.can_seal(peer)
    }

    /// Does what is due at `now`: the authentication layer's timers
    /// (handshake retries, rekeys), D-SYNs (client), reorder timeouts,
    /// forgetting idle reorder flows, publishing estimates to [`Shared`].
    /// Cheap when nothing is due; drivers may call it on every wake-up.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.follow_peer_table();
        if self.auth.poll_timeout().is_some_and(|t| t <= now) {
            self.auth.handle_timeout(now);
        }
        // Probe rounds (an initiator: the client's one peer). A responder's
        // estimators only need their liveness clock started, on the first
        // call after they joined: later wake-ups walk no peers (a gateway has
        // thousands).
        let initiator = self.role == Role::Client;
        if initiator || !self.started {
            self.started = true;
            for (peer, p) in self.peers.iter_mut().enumerate() {
                let Some(p) = p else { continue };
                if p.rtt.config().initiator && !self.auth.can_seal(peer) {
                    continue;
                }
                p.rtt.poll_probes(now, &mut self.probe_scratch);
                let link = &self.shared.peers()[peer];
                for probe in self.probe_scratch.drain(..) {
                    note_llc_probe(p, link, self.llc_bytes_per_ns, now, &probe);
                    if let Some(to) = p.endpoints[probe.channel.index()] {
                        self.probes.push_back((peer, probe, to));
                    }
                }
            }
        }
        if let Some(r) = &mut self.reorder {
            r.handle_timeout(now, &mut self.deliveries);
            if self.timers.is_due(Timer::ReorderExpiry, now) {
                r.expire(now, &mut self.deliveries);
                self.timers
                    .set(Timer::ReorderExpiry, now + self.reorder_expiry_period);
            }
        }
        if self.timers.is_due(Timer::Publish, now) {
            self.publish(now);
            self.timers.set(Timer::Publish, now + PUBLISH_PERIOD);
        }
    }

    /// Publishes estimates, liveness and reorder stats to [`Shared`] now, outside
    /// the 50 ms rhythm (the driver's last act before the stats are written).
    pub fn publish_now(&mut self, now: Nanos) {
        self.publish(now);
    }

    fn publish(&mut self, now: Nanos) {
        for (peer, p) in self.peers.iter_mut().enumerate() {
            let Some(p) = p else { continue };
            let link = &p.link;
            for ch in Channel::ALL {
                let heard = p.rtt.last_heard(ch);
                if let Some(change) = p.liveness.update(ch, now, heard) {
                    self.events
                        .push_back(Event::ChannelChanged { peer, change });
                }
                link.publish_liveness(
                    ch,
                    p.liveness.is_up(ch),
                    heard.map(|h| now.saturating_sub(h)),
                    p.liveness.downs[ch.index()],
                );
                let owd = p.rtt.owd(ch, now);
                let rtt = p.rtt.rtt(ch, now);
                let measured = p.rtt.measured(ch, now);
                link.publish(ch, owd, rtt, measured, p.rtt.alive(ch, now));
            }
        }
        if let Some(r) = &mut self.reorder {
            self.shared.publish_reorder(self.worker, r.stats(now));
            for (peer, p) in self.peers.iter().enumerate() {
                if let Some(p) = p {
                    p.link.limits.publish_reorder(&r.device_stats(peer));
                }
            }
        }
    }

    /// The state shared with the send half.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The RTT estimator of peer `peer` (for inspection; a peer this worker
    /// serves). Panics if there is no such peer here.
    pub fn rtt(&mut self, peer: usize) -> &mut RttEstimator {
        self.follow_peer_table();
        &mut self.peers[peer]
            .as_mut()
            .expect("a live peer of this worker")
            .rtt
    }
}

/// Rule (c): an LLC probe that will measure an RTT (a D-SYN, or a responder's
/// D-SYN-ACK) leaves `p` at `now`; remembers the send half's virtual LLC queue
/// depth then (from `link`'s `llc_empty_at`, draining at `bytes_per_ns`).
fn note_llc_probe(
    p: &mut RecvPeer,
    link: &PeerLink,
    bytes_per_ns: f64,
    now: Nanos,
    probe: &ProbeOut,
) {
    let Some(d) = &mut p.shared_delay else {
        return;
    };
    if probe.channel == Channel::Llc && matches!(probe.kind, ProbeKind::DSyn | ProbeKind::DSynAck) {
        let depth = link.llc_empty_at().saturating_sub(now) as f64 * bytes_per_ns;
        d.sent(probe.id, depth);
    }
}

/// An admitted datagram, before the reorder buffer.
enum Admitted {
    Probe {
        peer: usize,
    },
    Control {
        peer: usize,
    },
    /// The second copy of a duplicated packet (crate::dedupe): not delivered.
    Duplicate {
        peer: usize,
        flow_id: u16,
        seq: u32,
        inner_len: usize,
    },
    Data {
        peer: usize,
        flow_id: u16,
        seq: u32,
        /// [`wire::FLAG_UNORDERED`]: not held by the reorder buffer.
        unordered: bool,
        inner: Range<usize>,
    },
}
