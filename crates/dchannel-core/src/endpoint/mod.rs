//! The agent endpoint without I/O: everything a dchannel agent decides about
//! packets and datagrams, in two halves that a driver runs on two threads.
//!
//! ```text
//!             ┌──────────────── SendHalf ────────────────┐
//!  TUN read ─▶│ handle_tun(now, buf, len)                │─▶ Transmit { channel, destination, len }
//!             │ peer by inner destination · steer        │       (the driver sends buf[..len])
//!             │ · channel fallback · LLC queue · seal    │
//!             └──────────────────────▲───────────────────┘
//!                                    │ Shared: learned endpoints, published
//!                                    │ RTT estimates and liveness (atomics)
//!             ┌──────────────────────┴── ReceiveHalf ────┐
//!  UDP recv ─▶│ handle_datagram(now, channel, from, buf) │─▶ Received::{Data, Probe, Control, Dropped}
//!             │ header · authenticate (DatagramAuth) ·   │─▶ deliveries(): inner packets, in flow
//!             │ source check / roaming · spoofing ·      │       order, for the TUN
//!             │ egress · probes · reorder buffer         │─▶ poll_transmit(): probes, handshakes
//!  timer ────▶│ handle_timeout(now) / poll_timeout()     │─▶ poll_event(): endpoint moves (logs)
//!             └──────────────────────────────────────────┘
//! ```
//!
//! Like quinn-proto, every entry point takes `now` first (ns since the
//! driver's epoch) and nothing here reads a clock, touches a socket, a file
//! or spawns a thread; tests drive both halves with synthetic time. The two
//! halves share one [`Shared`]: the receive half writes it (the endpoint a
//! gateway learned for a client, RTT estimates and liveness every 50 ms), the
//! send half reads it per packet with relaxed atomic loads. No lock is taken
//! per packet.
//!
//! **Who checks a datagram's authenticity:** the receive half, through its
//! [`DatagramAuth`], before anything of the datagram is read.
//! [`TokenAuth`] (protocol version 1, lab only) decodes the header and maps its
//! 64-bit token to a configured peer; the AEAD implementation
//! (`dchannel_crypto::endpoint`, the default) decrypts the datagram in place
//! and returns the plaintext header and body, or consumes its own handshake
//! and keepalive datagrams ([`Opened::Control`]). Sealing is the same trait's
//! other half: every outgoing datagram, data (send half) and probes (receive
//! half), is finished by [`DatagramAuth::seal`]; the layer's own datagrams
//! leave through the receive half's `poll_transmit`, and its timers run with
//! the receive half's. See `auth.rs`.

mod auth;
mod device_limits;
mod drop_reason;
mod flow_count;
mod receive;
mod send;
mod shared;
mod timers;

#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod test_devices;
#[cfg(test)]
mod tests;

pub use auth::{AuthTransmit, DatagramAuth, Opened, Outgoing, Shape, Source, TokenAuth};
pub use device_limits::{DeviceLimitStats, DeviceLimits};
pub use drop_reason::DropReason;
pub use receive::{Arrival, Deliver, Event, ProbeTransmit, ReceiveHalf, Received};
pub use send::{HbcOwdOracle, SendHalf, SendPeer, SteererGuard, Transmit};
pub use shared::{PeerLink, PeerTable, PeerTraffic, Shared};
pub use timers::{Timer, TimerTable};

use crate::egress::EgressFilter;
use crate::llc_share::SharedDelayConfig;
use crate::policy::Policy;
use crate::reorder::ReorderConfig;
use crate::rtt::RttConfig;
use crate::steer::SteerConfig;
use crate::{Direction, Nanos, MS};
use flow_count::FlowCount;
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// Bytes a driver leaves in front of an inner packet it reads from the TUN
/// with [`TokenAuth`], so the header is written in place (no copy): the packet
/// sits at `buf[HEADROOM..HEADROOM + len]`. Other authentication layers need
/// more: drivers ask [`SendHalf::headroom`].
pub const HEADROOM: usize = crate::wire::HEADER_LEN;

/// How often the receive half publishes estimates and liveness to [`Shared`].
pub const PUBLISH_PERIOD: Nanos = 50 * MS;

/// Which end of the channels this endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The device: one peer (the gateway) at configured endpoints; starts probes.
    Client,
    /// The operator edge: one peer per configured client, whose endpoints it
    /// learns from authenticated datagrams (and follows when they move).
    Gateway,
}

impl Role {
    /// Direction of the packets this role steers.
    pub fn direction(self) -> Direction {
        match self {
            Role::Client => Direction::Uplink,
            Role::Gateway => Direction::Downlink,
        }
    }

    /// `client` or `gateway`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Gateway => "gateway",
        }
    }
}

/// One configured peer: the gateway (client role) or a client (gateway role).
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// Name in logs and stats.
    pub name: String,
    /// The peer's 64-bit token (see `token.rs`).
    pub token: u64,
    /// The peer's tunnel address (gateway role: the client's inner address).
    /// Data from this peer must carry it as inner source (else
    /// [`DropReason::SpoofedSource`]), and downlink packets to it go to this peer.
    pub tunnel_addr: Option<IpAddr>,
    /// Outer endpoint per channel (index = Channel): configured for the
    /// client's gateway; `None` at a gateway until the client is heard.
    pub endpoints: [Option<SocketAddr>; 2],
}

/// Everything the two halves need besides the peers.
#[derive(Clone, Debug)]
pub struct Config {
    /// Client or gateway.
    pub role: Role,
    /// Per-peer sender configuration (direction, MTU, overhead, LLC rate, flows).
    pub steer: SteerConfig,
    /// Sender flows of all peers together at most (`--gateway-flows`); at the
    /// cap the peer with the most flows loses its least recently seen one.
    pub max_flows_total: usize,
    /// Probe interval, RTT window, pins, liveness (`initiator` follows the role).
    pub rtt: RttConfig,
    /// Reorder buffer for LLC arrivals; `None` = off.
    pub reorder: Option<ReorderConfig>,
    /// Fill in Algorithm 1's estimate for every policy (for the decision log).
    pub estimate_all: bool,
    /// How often idle sender flows are evicted.
    pub flow_expiry_period: Nanos,
    /// How often idle reorder-buffer flows are forgotten.
    pub reorder_expiry_period: Nanos,
    /// Gateway: the destinations device packets may go to (else
    /// [`DropReason::EgressDenied`]); `None`: all (the client).
    pub egress: Option<EgressFilter>,
    /// Rule (c) of crate::llc_share (`--llc-share probe`): learn the other
    /// users' LLC queue from the LLC probes and add it to Algorithm 1's
    /// `queue_llc`; `None`: the sender's own virtual queue only.
    pub llc_probe_share: Option<SharedDelayConfig>,
}

impl Config {
    /// Defaults for `role` (directions and probe initiator set from it).
    pub fn new(role: Role) -> Config {
        Config {
            role,
            steer: SteerConfig {
                dir: role.direction(),
                ..SteerConfig::default()
            },
            rtt: RttConfig {
                initiator: role == Role::Client,
                ..RttConfig::default()
            },
            reorder: Some(ReorderConfig::default()),
            max_flows_total: 1 << 20,
            estimate_all: false,
            flow_expiry_period: 1_000 * MS,
            reorder_expiry_period: 10_000 * MS,
            // Safe by default: the built-in refusals even before the driver
            // adds the host's own addresses.
            egress: (role == Role::Gateway)
                .then(|| EgressFilter::new(&[], &[], &[]).expect("no operator prefixes")),
            llc_probe_share: None,
        }
    }
}

/// A peer configuration the endpoint cannot serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No peer at all.
    NoPeers,
    /// A client role with more than one peer.
    ClientWithPeers(usize),
    /// Two peers share a token (datagrams could not be told apart).
    DuplicateToken(String),
    /// Two peers share a tunnel address (downlink could not be told apart).
    DuplicateTunnelAddr(IpAddr),
    /// A gateway's peer without tunnel address (it could not be reached).
    NoTunnelAddr(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoPeers => write!(f, "no peer configured"),
            ConfigError::ClientWithPeers(n) => {
                write!(f, "a client has exactly one peer (the gateway), not {n}")
            }
            ConfigError::DuplicateToken(name) => {
                write!(f, "{name}: token used by another client")
            }
            ConfigError::DuplicateTunnelAddr(a) => write!(f, "{a}: configured twice"),
            ConfigError::NoTunnelAddr(name) => write!(f, "{name}: no tunnel address"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Makes a policy for each peer (a new one for each peer added later).
pub type PolicyFactory = Box<dyn FnMut() -> Box<dyn Policy> + Send>;

/// The two halves of one endpoint over `peers`, with `auth` checking and
/// sealing datagrams (each half gets its own clone) and `policy` called once
/// per peer for that peer's steering policy (also for peers added later with
/// [`Shared::change_peers`]).
#[allow(clippy::type_complexity)]
pub fn new<B, A>(
    cfg: Config,
    peers: Vec<PeerConfig>,
    auth: A,
    policy: impl FnMut() -> Box<dyn Policy> + Send + 'static,
) -> Result<(SendHalf<A>, ReceiveHalf<B, A>), ConfigError>
where
    B: AsRef<[u8]> + AsMut<[u8]> + crate::reorder::Footprint,
    A: DatagramAuth + Clone,
{
    let mut halves = new_workers(cfg, peers, auth, policy, 1)?;
    Ok(halves.pop().expect("one worker"))
}

/// The halves of one endpoint for `workers` worker pairs (a gateway on
/// several cores), all over the same [`Shared`]: send half `k` may send to
/// any peer (the per-peer steering state is shared, a mutex per peer);
/// receive half `k` serves the peers whose index is ≡ `k` (mod `workers`)
/// and keeps receive state (RTT, liveness, reorder buffer) for those only.
/// The driver must hand each peer's datagrams to its receive half.
#[allow(clippy::type_complexity)]
pub fn new_workers<B, A>(
    cfg: Config,
    peers: Vec<PeerConfig>,
    auth: A,
    policy: impl FnMut() -> Box<dyn Policy> + Send + 'static,
    workers: usize,
) -> Result<Vec<(SendHalf<A>, ReceiveHalf<B, A>)>, ConfigError>
where
    B: AsRef<[u8]> + AsMut<[u8]> + crate::reorder::Footprint,
    A: DatagramAuth + Clone,
{
    let workers = workers.max(1);
    if peers.is_empty() {
        return Err(ConfigError::NoPeers);
    }
    if cfg.role == Role::Client && peers.len() != 1 {
        return Err(ConfigError::ClientWithPeers(peers.len()));
    }
    let mut by_tunnel_addr = HashMap::new();
    for (i, p) in peers.iter().enumerate() {
        match p.tunnel_addr {
            Some(a) if by_tunnel_addr.insert(a, i).is_some() => {
                return Err(ConfigError::DuplicateTunnelAddr(a))
            }
            None if cfg.role == Role::Gateway => {
                return Err(ConfigError::NoTunnelAddr(p.name.clone()))
            }
            _ => {}
        }
    }
    // One table for every half; the send halves share one per-peer steering
    // state that follows it (whichever send half sees a new generation first
    // brings it in line, making new peers' policies with `policy`).
    let shared = Arc::new(Shared::new(cfg.role, &peers, workers));
    let policy: PolicyFactory = Box::new(policy);
    let send_peers = SendHalf::<A>::peers(&cfg, &shared, policy);
    let flow_count = Arc::new(Mutex::new(FlowCount::new(peers.len(), cfg.max_flows_total)));
    Ok((0..workers)
        .map(|k| {
            let tx = SendHalf::new(
                &cfg,
                Arc::clone(&shared),
                Arc::clone(&send_peers),
                Arc::clone(&flow_count),
                auth.clone(),
                (k, workers),
            );
            // follows the table, keeping receive state for slots ≡ k only
            let rx = ReceiveHalf::new(&cfg, Arc::clone(&shared), auth.clone(), (k, workers));
            (tx, rx)
        })
        .collect())
}
