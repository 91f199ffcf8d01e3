//! The agent driver: two threads around the sans-I/O core.
//!
//! * `tun->udp` (sender): reads a packet from the TUN, steers it with the
//!   peer's [`Steerer`], prepends the header and sends it on the chosen
//!   channel's socket.
//! * `udp->tun` (receiver): polls both sockets, authenticates datagrams,
//!   answers/initiates RTT probes, passes data through the reorder buffer and
//!   writes it to the TUN.
//!
//! The client has one peer (the gateway); the gateway one per configured
//! client, each with its own steerer (flow table + virtual LLC queue) and RTT
//! estimator. The two threads share only atomics and a few locks.

use crate::arrival_log::ArrivalLog;
use crate::decision_log::DecisionLog;
use crate::stats::{Malformed, Stats, UNKNOWN};
use dchannel_core::reorder::{ReorderBuffer, ReorderConfig};
use dchannel_core::rtt::{RttConfig, RttEstimator};
use dchannel_core::steer::{ChannelView, Steerer};
use dchannel_core::wire::{self, Datagram, Header, MsgType, FLAG_LLC, HEADER_LEN, PROBE_BODY_LEN};
use dchannel_core::{Channel, Nanos, MS};
use std::collections::HashMap;
use std::fs::File;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Gateway,
}

/// The other end of the channels, as seen by this agent.
pub struct Peer {
    pub name: String,
    pub token: u64,
    /// The client's tunnel address (gateway role only).
    pub inner: Option<IpAddr>,
    /// Outer endpoint per channel: fixed (client) or learned (gateway).
    pub endpoints: [RwLock<Option<SocketAddr>>; 2],
    /// One-way delay estimates published by the receiver (ns; UNKNOWN).
    owd: [AtomicU64; 2],
    alive: [AtomicBool; 2],
}

impl Peer {
    pub fn new(
        name: String,
        token: u64,
        inner: Option<IpAddr>,
        endpoints: [Option<SocketAddr>; 2],
    ) -> Peer {
        Peer {
            name,
            token,
            inner,
            endpoints: endpoints.map(RwLock::new),
            owd: [AtomicU64::new(UNKNOWN), AtomicU64::new(UNKNOWN)],
            alive: [AtomicBool::new(true), AtomicBool::new(true)],
        }
    }

    fn endpoint(&self, ch: Channel) -> Option<SocketAddr> {
        *self.endpoints[ch.index()].read().expect("endpoint lock")
    }

    fn view(&self) -> ChannelView {
        let owd = |ch: Channel| match self.owd[ch.index()].load(Relaxed) {
            UNKNOWN => None,
            v => Some(v),
        };
        ChannelView {
            hbc_owd: owd(Channel::Hbc),
            llc_owd: owd(Channel::Llc),
            alive: [self.alive[0].load(Relaxed), self.alive[1].load(Relaxed)],
        }
    }
}

pub struct Shared {
    pub role: Role,
    pub peers: Vec<Peer>,
    pub by_token: HashMap<u64, usize>,
    pub by_inner: HashMap<IpAddr, usize>,
    pub socks: [UdpSocket; 2],
    pub tun: File,
    pub stats: Arc<Stats>,
    pub epoch: Instant,
    pub log: Option<Arc<DecisionLog>>,
    /// `--arrival-log`: every data datagram received (receive thread only).
    pub arrivals: Option<Arc<ArrivalLog>>,
    /// Largest datagram we expect (outer MTU minus outer IP/UDP headers).
    pub max_datagram: usize,
}

impl Shared {
    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Client start-up: waits (at most `timeout`) until the first probe round has
    /// given one-way delays for both channels, then one more HBC one-way delay plus
    /// the receiver's publication period, by which time the gateway has had the
    /// D-ACK and published its own estimates too. Without this, the very first
    /// packets (typically the application's DNS query) see no estimate and take
    /// the HBC (`no_estimate`), which costs a whole HBC RTT on the first lookup.
    /// Returns whether both estimates arrived in time.
    pub fn wait_for_estimates(&self, timeout: std::time::Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            let ready = self.peers.iter().all(|p| {
                let v = p.view();
                v.hbc_owd.is_some() && v.llc_owd.is_some()
            });
            if ready {
                let hbc_owd = self
                    .peers
                    .iter()
                    .filter_map(|p| p.view().hbc_owd)
                    .max()
                    .unwrap_or(0);
                let margin = std::time::Duration::from_nanos(hbc_owd)
                    + std::time::Duration::from_millis(2 * PUBLISH_PERIOD_MS + 10);
                std::thread::sleep(margin);
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        false
    }
}

/// How often the receiver publishes RTT estimates and stats (ms).
const PUBLISH_PERIOD_MS: u64 = 50;

/// Inner source/destination address of an IP packet, if it is IPv4/IPv6.
fn inner_addr(pkt: &[u8], dst: bool) -> Option<IpAddr> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => {
            let o = if dst { 16 } else { 12 };
            let b: [u8; 4] = pkt[o..o + 4].try_into().ok()?;
            Some(IpAddr::from(b))
        }
        6 if pkt.len() >= 40 => {
            let o = if dst { 24 } else { 8 };
            let b: [u8; 16] = pkt[o..o + 16].try_into().ok()?;
            Some(IpAddr::from(b))
        }
        _ => None,
    }
}

/// Sender loop: TUN -> steer -> UDP. Never returns.
pub fn run_sender(sh: Arc<Shared>, mut steerers: Vec<Steerer>) {
    let fd = sh.tun.as_raw_fd();
    let mut buf = vec![0u8; 65536 + HEADER_LEN];
    let mut next_expire = 0;
    loop {
        // SAFETY: reading into our own buffer past the header space.
        let n = unsafe {
            libc::read(
                fd,
                buf[HEADER_LEN..].as_mut_ptr().cast(),
                buf.len() - HEADER_LEN,
            )
        };
        if n <= 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                tracing::warn!("TUN read failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            continue;
        }
        let n = n as usize;
        let now = sh.now();
        let pkt = &buf[HEADER_LEN..HEADER_LEN + n];
        let pi = match sh.role {
            Role::Client => 0,
            Role::Gateway => match inner_addr(pkt, true).and_then(|a| sh.by_inner.get(&a)) {
                Some(&i) => i,
                None => {
                    sh.stats.bad(Malformed::NoClient);
                    continue;
                }
            },
        };
        let peer = &sh.peers[pi];
        let st = steerers[pi].steer(now, pkt, &peer.view());
        if st.flow_id == 0 {
            sh.stats.bad(Malformed::UnparsableInner);
        }
        sh.stats.decisions[st.decision.outcome as usize][st.channel.index()].fetch_add(1, Relaxed);
        let mut ch = st.channel;
        let ep = match peer.endpoint(ch) {
            Some(ep) => ep,
            None => match peer.endpoint(ch.other()) {
                Some(ep) => {
                    ch = ch.other();
                    ep
                }
                None => {
                    sh.stats.bad(Malformed::NoEndpoint);
                    continue;
                }
            },
        };
        if let Some(log) = &sh.log {
            log.record(now, pi, &st, ch);
        }
        Header {
            msg_type: MsgType::Data,
            flags: if ch == Channel::Llc { FLAG_LLC } else { 0 },
            flow_id: st.flow_id,
            seq: st.seq,
            token: peer.token,
        }
        .encode(&mut buf[..HEADER_LEN]);
        match sh.socks[ch.index()].send_to(&buf[..HEADER_LEN + n], ep) {
            Ok(_) => {
                let c = sh.stats.chan(ch);
                c.tx_pkts.fetch_add(1, Relaxed);
                c.tx_bytes.fetch_add((HEADER_LEN + n) as u64, Relaxed);
            }
            Err(e) => {
                sh.stats.bad(Malformed::SendError);
                tracing::debug!("send on {ch} to {ep} failed: {e}");
            }
        }
        if now >= next_expire {
            for s in steerers.iter_mut() {
                s.expire(now);
            }
            let flows: usize = steerers.iter().map(|s| s.flows()).sum();
            sh.stats.flows.store(flows as u64, Relaxed);
            next_expire = now + 1000 * MS;
        } else if steerers.len() == 1 {
            sh.stats.flows.store(steerers[0].flows() as u64, Relaxed);
        }
    }
}

/// Receiver state owned by the receive thread.
pub struct Receiver {
    sh: Arc<Shared>,
    rtt: Vec<RttEstimator>,
    reorder: Option<ReorderBuffer<(usize, u16), Vec<u8>>>,
    pool: Vec<Vec<u8>>,
    out: Vec<Vec<u8>>,
    probes: Vec<dchannel_core::rtt::ProbeOut>,
}

impl Receiver {
    pub fn new(sh: Arc<Shared>, rtt_cfg: RttConfig, reorder: Option<ReorderConfig>) -> Receiver {
        let rtt = (0..sh.peers.len())
            .map(|_| RttEstimator::new(rtt_cfg.clone()))
            .collect();
        Receiver {
            sh,
            rtt,
            reorder: reorder.map(ReorderBuffer::new),
            pool: Vec::new(),
            out: Vec::new(),
            probes: Vec::new(),
        }
    }

    fn send_probe(&self, pi: usize, p: dchannel_core::rtt::ProbeOut, to: SocketAddr) {
        let mut b = [0u8; HEADER_LEN + PROBE_BODY_LEN];
        let n = wire::encode_probe(&mut b, self.sh.peers[pi].token, p.id, p.kind, p.channel);
        match self.sh.socks[p.channel.index()].send_to(&b[..n], to) {
            Ok(_) => {
                self.sh.stats.chan(p.channel).probe_tx.fetch_add(1, Relaxed);
            }
            Err(e) => {
                self.sh.stats.bad(Malformed::SendError);
                tracing::debug!("probe on {} to {to} failed: {e}", p.channel);
            }
        }
    }

    fn publish(&mut self, now: Nanos) {
        for (pi, est) in self.rtt.iter_mut().enumerate() {
            let peer = &self.sh.peers[pi];
            let ps = &self.sh.stats.peers[pi];
            for ch in Channel::ALL {
                let i = ch.index();
                peer.owd[i].store(est.owd(ch, now).unwrap_or(UNKNOWN), Relaxed);
                peer.alive[i].store(est.alive(ch, now), Relaxed);
                ps.rtt_ns[i].store(est.rtt(ch, now).unwrap_or(UNKNOWN), Relaxed);
                ps.measured_ns[i].store(est.measured(ch, now).unwrap_or(UNKNOWN), Relaxed);
            }
        }
        if let Some(r) = &mut self.reorder {
            *self.sh.stats.reorder.lock().expect("reorder stats lock") = r.stats(now);
        }
    }

    fn write_tun(&mut self, pkt: &[u8]) {
        // SAFETY: writing our own initialised buffer to the TUN fd.
        let rc = unsafe { libc::write(self.sh.tun.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if rc < 0 {
            self.sh.stats.bad(Malformed::TunWriteError);
        }
    }

    fn flush_out(&mut self) {
        let mut out = std::mem::take(&mut self.out);
        for b in out.drain(..) {
            self.write_tun(&b[HEADER_LEN..]);
            if self.pool.len() < 4096 {
                self.pool.push(b);
            }
        }
        self.out = out;
    }

    /// Handles one datagram (in `buf`, whole) received on `ch` from `from`.
    fn handle(&mut self, now: Nanos, ch: Channel, from: SocketAddr, buf: Vec<u8>) {
        let sh = Arc::clone(&self.sh);
        let d = match wire::decode(&buf) {
            Ok(d) => d,
            Err(e) => {
                sh.stats.bad(Malformed::from_wire(&e));
                tracing::debug!("datagram from {from} on {ch}: {e}");
                self.pool.push(buf);
                return;
            }
        };
        let token = d.header().token;
        let pi = match sh.role {
            Role::Client => {
                if token != sh.peers[0].token {
                    sh.stats.bad(Malformed::BadToken);
                    self.pool.push(buf);
                    return;
                }
                if sh.peers[0].endpoint(ch) != Some(from) {
                    sh.stats.bad(Malformed::ForeignSource);
                    self.pool.push(buf);
                    return;
                }
                0
            }
            Role::Gateway => match sh.by_token.get(&token) {
                Some(&pi) => {
                    let peer = &sh.peers[pi];
                    if peer.endpoint(ch) != Some(from) {
                        let mut ep = peer.endpoints[ch.index()].write().expect("endpoint lock");
                        tracing::info!(
                            "client {} on {ch}: endpoint {from} (was {:?})",
                            peer.name,
                            *ep
                        );
                        *ep = Some(from);
                    }
                    pi
                }
                None => {
                    sh.stats.bad(Malformed::BadToken);
                    tracing::debug!("datagram from {from} on {ch}: unknown token");
                    self.pool.push(buf);
                    return;
                }
            },
        };
        self.rtt[pi].heard(now, ch);
        match d {
            Datagram::Probe { header, kind, .. } => {
                sh.stats.chan(ch).probe_rx.fetch_add(1, Relaxed);
                if let Some(reply) = self.rtt[pi].handle_probe(now, ch, kind, header.seq) {
                    self.send_probe(pi, reply, from);
                }
                self.pool.push(buf);
            }
            Datagram::Data { header, inner } => {
                if sh.role == Role::Gateway {
                    let src = inner_addr(inner, false);
                    if src.is_none() {
                        sh.stats.bad(Malformed::BadInner);
                        self.pool.push(buf);
                        return;
                    }
                    if src != sh.peers[pi].inner {
                        sh.stats.bad(Malformed::SpoofedSource);
                        self.pool.push(buf);
                        return;
                    }
                }
                let c = sh.stats.chan(ch);
                c.rx_pkts.fetch_add(1, Relaxed);
                c.rx_bytes.fetch_add(buf.len() as u64, Relaxed);
                let len = inner.len();
                if let Some(a) = &sh.arrivals {
                    a.record(now, pi, header.flow_id, header.seq, ch, len);
                }
                match &mut self.reorder {
                    Some(r) if header.flow_id != 0 => {
                        r.push(
                            now,
                            (pi, header.flow_id),
                            header.seq,
                            ch,
                            len,
                            buf,
                            &mut self.out,
                        );
                        self.flush_out();
                    }
                    _ => {
                        self.write_tun(&buf[HEADER_LEN..]);
                        self.pool.push(buf);
                    }
                }
            }
        }
    }

    /// Receive loop. Never returns.
    pub fn run(mut self) {
        let sh = Arc::clone(&self.sh);
        for s in &sh.socks {
            s.set_nonblocking(true).expect("nonblocking socket");
        }
        let fds: [RawFd; 2] = [sh.socks[0].as_raw_fd(), sh.socks[1].as_raw_fd()];
        let mut next_publish = 0;
        let mut next_expire = 0;
        loop {
            let now = sh.now();
            // Probes due (client initiates on both channels).
            for pi in 0..self.rtt.len() {
                self.probes.clear();
                let mut probes = std::mem::take(&mut self.probes);
                self.rtt[pi].poll_probes(now, &mut probes);
                for p in probes.drain(..) {
                    if let Some(to) = sh.peers[pi].endpoint(p.channel) {
                        self.send_probe(pi, p, to);
                    }
                }
                self.probes = probes;
            }
            if let Some(r) = &mut self.reorder {
                r.handle_timeout(now, &mut self.out);
                if now >= next_expire {
                    r.expire(now);
                    next_expire = now + 10_000 * MS;
                }
                self.flush_out();
            }
            if now >= next_publish {
                self.publish(now);
                next_publish = now + PUBLISH_PERIOD_MS * MS;
            }
            let mut deadline = next_publish;
            for est in &self.rtt {
                if let Some(d) = est.next_deadline() {
                    deadline = deadline.min(d);
                }
            }
            if let Some(d) = self.reorder.as_ref().and_then(|r| r.poll_timeout()) {
                deadline = deadline.min(d);
            }
            let wait_ms = deadline.saturating_sub(now).div_ceil(MS).min(1000) as libc::c_int;
            let mut pfds = [
                libc::pollfd {
                    fd: fds[0],
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: fds[1],
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: pfds is a valid array of two pollfd structs.
            let rc = unsafe { libc::poll(pfds.as_mut_ptr(), 2, wait_ms) };
            if rc <= 0 {
                continue;
            }
            for ch in Channel::ALL {
                if pfds[ch.index()].revents == 0 {
                    continue;
                }
                // Drain up to a batch per wake-up so one channel cannot starve the other.
                for _ in 0..256 {
                    let mut b = self.pool.pop().unwrap_or_default();
                    b.resize(sh.max_datagram, 0);
                    match sh.socks[ch.index()].recv_from(&mut b) {
                        Ok((n, from)) if n >= sh.max_datagram => {
                            // Filled the buffer: possibly cut short, never forward it.
                            sh.stats.bad(Malformed::Truncated);
                            tracing::debug!("oversized datagram from {from} on {ch}");
                            self.pool.push(b);
                        }
                        Ok((n, from)) => {
                            b.truncate(n);
                            let now = sh.now();
                            self.handle(now, ch, from, b);
                        }
                        Err(e) => {
                            self.pool.push(b);
                            if e.kind() != ErrorKind::WouldBlock {
                                tracing::debug!("recv on {ch}: {e}");
                            }
                            break;
                        }
                    }
                }
            }
        }
    }
}
