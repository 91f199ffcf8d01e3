//! Counters shared by the agent's threads (relaxed atomics), rendered as JSON
//! at exit and as Prometheus text on the metrics port.

use dchannel_core::endpoint::{DropReason, Shared};
use dchannel_core::policy::Outcome;
use dchannel_core::wire::WireError;
use dchannel_core::{Channel, Nanos};
use dchannel_crypto::endpoint::AeadAuth;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Why a datagram or packet was dropped (or, for `unparsable_inner`, sent
/// without flow state).
#[derive(Clone, Copy, Debug)]
pub enum Malformed {
    Truncated,
    UnknownVersion,
    UnknownType,
    BadProbe,
    EmptyData,
    /// Token not configured (gateway) / not ours (client); `--insecure` only.
    BadToken,
    /// Refused by the encryption layer (forged, replayed, ...; per reason in
    /// the `crypto.drops` object).
    Unauthentic,
    /// Packet dropped because no session with the peer exists yet (handshake pending).
    NoSession,
    /// Datagram from an address that is not the gateway's (client).
    ForeignSource,
    /// Inner source address is not the client's tunnel address (gateway).
    SpoofedSource,
    /// Inner packet not IPv4/IPv6 (dropped at the receiver).
    BadInner,
    /// Inner packet the parser could not read (sent on the HBC, no flow).
    UnparsableInner,
    /// Downlink packet for an address of no configured client (gateway).
    NoClient,
    /// No endpoint known yet for the client on either channel (gateway).
    NoEndpoint,
    SendError,
    TunWriteError,
    /// A TUN read with offloads whose virtio_net_hdr or super-packet could not
    /// be cut into packets (dchannel_core::gso::GsoError).
    BadOffload,
}

impl Malformed {
    pub const ALL: [Malformed; 17] = [
        Malformed::Truncated,
        Malformed::UnknownVersion,
        Malformed::UnknownType,
        Malformed::BadProbe,
        Malformed::EmptyData,
        Malformed::BadToken,
        Malformed::Unauthentic,
        Malformed::NoSession,
        Malformed::ForeignSource,
        Malformed::SpoofedSource,
        Malformed::BadInner,
        Malformed::UnparsableInner,
        Malformed::NoClient,
        Malformed::NoEndpoint,
        Malformed::SendError,
        Malformed::TunWriteError,
        Malformed::BadOffload,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Malformed::Truncated => "truncated",
            Malformed::UnknownVersion => "unknown_version",
            Malformed::UnknownType => "unknown_type",
            Malformed::BadProbe => "bad_probe",
            Malformed::EmptyData => "empty_data",
            Malformed::BadToken => "bad_token",
            Malformed::Unauthentic => "unauthentic",
            Malformed::NoSession => "no_session",
            Malformed::ForeignSource => "foreign_source",
            Malformed::SpoofedSource => "spoofed_source",
            Malformed::BadInner => "bad_inner",
            Malformed::UnparsableInner => "unparsable_inner",
            Malformed::NoClient => "no_client",
            Malformed::NoEndpoint => "no_endpoint",
            Malformed::SendError => "send_error",
            Malformed::TunWriteError => "tun_write_error",
            Malformed::BadOffload => "bad_offload",
        }
    }
}

impl From<DropReason> for Malformed {
    fn from(r: DropReason) -> Malformed {
        match r {
            DropReason::Wire(WireError::Truncated { .. }) => Malformed::Truncated,
            DropReason::Wire(WireError::UnknownVersion(_)) => Malformed::UnknownVersion,
            DropReason::Wire(WireError::UnknownType(_)) => Malformed::UnknownType,
            DropReason::Wire(WireError::BadProbe { .. }) => Malformed::BadProbe,
            DropReason::Wire(WireError::EmptyData) => Malformed::EmptyData,
            DropReason::BadToken => Malformed::BadToken,
            DropReason::Crypto { .. } => Malformed::Unauthentic,
            DropReason::NoSession => Malformed::NoSession,
            DropReason::ForeignSource => Malformed::ForeignSource,
            DropReason::SpoofedSource => Malformed::SpoofedSource,
            DropReason::BadInner => Malformed::BadInner,
            DropReason::NoClient => Malformed::NoClient,
            DropReason::NoEndpoint => Malformed::NoEndpoint,
        }
    }
}

/// Per-channel counters. The sender thread writes the tx half, the receive
/// thread the rx half: they sit on different cache lines (no false sharing).
#[derive(Default)]
#[repr(C, align(128))]
pub struct ChannelCounters {
    /// Data datagrams sent / their UDP payload bytes (header + inner packet).
    pub tx_pkts: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// Wake probes sent beside data (`prewarm`: to wake the device's HBC
    /// radio), by the send thread; not in the data or probe counters.
    pub wake_tx: AtomicU64,
    _pad: [u64; 13],
    /// Data datagrams received and accepted.
    pub rx_pkts: AtomicU64,
    pub rx_bytes: AtomicU64,
    /// Probe datagrams (not included in the data counters above); both are
    /// written by the receive thread, which sends and answers probes.
    pub probe_tx: AtomicU64,
    pub probe_rx: AtomicU64,
    /// Datagrams of the encryption layer (handshake messages, keepalives),
    /// written by the receive thread too.
    pub control_tx: AtomicU64,
    pub control_rx: AtomicU64,
}

impl ChannelCounters {
    /// One data datagram of `len` bytes sent (send thread).
    pub fn sent(&self, len: usize) {
        self.tx_pkts.fetch_add(1, Relaxed);
        self.tx_bytes.fetch_add(len as u64, Relaxed);
    }

    /// One data datagram of `len` bytes accepted (receive thread).
    pub fn received(&self, len: usize) {
        self.rx_pkts.fetch_add(1, Relaxed);
        self.rx_bytes.fetch_add(len as u64, Relaxed);
    }
}

/// `--tun-offload` (the `tun` object of the stats).
#[derive(Default)]
pub struct TunCounters {
    /// The TUN has offloads on.
    pub offload: bool,
    /// TCP super-packets read from the TUN, and the packets they were cut
    /// into (send thread).
    pub superpackets: AtomicU64,
    pub segments: AtomicU64,
    /// Super-packets written to the TUN (segments joined by
    /// dchannel_core::gro), and the segments they hold (receive thread).
    pub gro_superpackets: AtomicU64,
    pub gro_segments: AtomicU64,
}

impl TunCounters {
    fn to_json(&self) -> Value {
        json!({
            "offload": self.offload,
            "superpackets": self.superpackets.load(Relaxed),
            "segments": self.segments.load(Relaxed),
            "gro_superpackets": self.gro_superpackets.load(Relaxed),
            "gro_segments": self.gro_segments.load(Relaxed),
        })
    }
}

/// `--busy-poll-us` (the `busy_poll` object of the stats).
#[derive(Default)]
pub struct BusyPollCounters {
    /// The flag's value (0: off).
    pub us: u64,
    /// Busy-poll windows opened by traffic that found the polling thread
    /// asleep (poll_loop.rs): how often the agent went idle and woke again.
    pub windows: AtomicU64,
    /// Spins inside a window that found nothing to do (each one `poll(2)`
    /// and a `sched_yield`): the CPU busy-poll spent waiting.
    pub empty_spins: AtomicU64,
}

/// The sender's flow tables (issue 16, "Floods"): what they hold and churn.
#[derive(Default)]
pub struct FlowCounters {
    /// Flows in the tables now.
    pub flows: AtomicU64,
    /// Flows created since start.
    pub created: AtomicU64,
    /// Flows evicted for being idle.
    pub idle_evictions: AtomicU64,
    /// Flows evicted because a table was full (a flood of new flows).
    pub forced_evictions: AtomicU64,
}

impl FlowCounters {
    /// Publishes the send loop's view (Relaxed: counters, read by the stats writer).
    pub fn publish(&self, flows: usize, st: dchannel_core::flow_table::FlowTableStats) {
        self.flows.store(flows as u64, Relaxed);
        self.created.store(st.created, Relaxed);
        self.idle_evictions.store(st.idle_evictions, Relaxed);
        self.forced_evictions.store(st.forced_evictions, Relaxed);
    }
}

pub struct Stats {
    pub role: &'static str,
    pub policy: String,
    pub reorder_enabled: bool,
    pub channels: [ChannelCounters; 2],
    pub decisions: [[AtomicU64; 2]; Outcome::COUNT],
    pub malformed: [AtomicU64; Malformed::ALL.len()],
    pub flows: FlowCounters,
    pub tun: TunCounters,
    pub busy_poll: BusyPollCounters,
    /// The channel sockets (index = Channel; -1: none), whose kernel drop
    /// counts (prefilter.rs) the stats read when written.
    pub kernel_drop_fds: [std::os::fd::RawFd; 2],
    /// RTT estimates and reorder stats, as the endpoint's receive half publishes them.
    pub endpoint: Arc<Shared>,
    /// The encryption layer (its drop counters per reason and handshake
    /// counters are read from it); `None` with `--insecure`.
    pub crypto: Option<AeadAuth>,
}

/// Name, help and kind of the reorder buffer's (unlabelled) metrics.
const REORDER_METRICS: [(&str, &str, &str); 7] = [
    (
        "reorder_timeout_releases_total",
        "LLC packets released by timeout",
        "counter",
    ),
    (
        "reorder_fifo_releases_total",
        "Held LLC packets released because a later HBC packet showed their predecessor lost",
        "counter",
    ),
    (
        "reorder_late_after_timeout_total",
        "Packets that arrived after the timeout had given up on them",
        "counter",
    ),
    (
        "reorder_timeout_ms",
        "The reorder timeout in force (adaptive: follows the HBC's queue)",
        "gauge",
    ),
    (
        "reorder_in_order_releases_total",
        "Held LLC packets released in order",
        "counter",
    ),
    (
        "reorder_mean_occupancy_bytes",
        "Time-weighted mean reorder buffer occupancy",
        "gauge",
    ),
    (
        "reorder_max_occupancy_bytes",
        "Maximum reorder buffer occupancy",
        "gauge",
    ),
];

fn ms_or_null(ns: Option<Nanos>) -> Value {
    match ns {
        None => Value::Null,
        Some(ns) => json!(ns as f64 / 1e6),
    }
}

impl Stats {
    pub fn new(
        role: &'static str,
        policy: String,
        reorder_enabled: bool,
        endpoint: Arc<Shared>,
    ) -> Stats {
        Stats {
            role,
            policy,
            reorder_enabled,
            channels: Default::default(),
            decisions: std::array::from_fn(|_| Default::default()),
            malformed: Default::default(),
            flows: FlowCounters::default(),
            tun: TunCounters::default(),
            busy_poll: BusyPollCounters::default(),
            kernel_drop_fds: [-1, -1],
            endpoint,
            crypto: None,
        }
    }

    pub fn bad(&self, m: Malformed) {
        self.malformed[m as usize].fetch_add(1, Relaxed);
    }

    /// Counts a datagram or packet the endpoint refused.
    pub fn dropped(&self, r: DropReason) {
        self.bad(Malformed::from(r));
    }

    /// The encryption layer's counters as JSON (`null` with `--insecure`).
    fn crypto_json(&self) -> Value {
        let Some(c) = &self.crypto else {
            return Value::Null;
        };
        let drops: Map<String, Value> = c
            .drops()
            .iter()
            .map(|(n, v)| (n.into(), json!(v)))
            .collect();
        let h = c.stats();
        json!({
            "drops": drops,
            "handshakes": {
                "initiations_sent": h.initiations_sent,
                "retries": h.retries,
                "gave_up": h.gave_up,
                "completed_as_initiator": h.completed_as_initiator,
                "answered": h.answered,
                "stale": h.stale,
                "queue_overflow": h.queue_overflow,
            },
        })
    }

    pub fn chan(&self, ch: Channel) -> &ChannelCounters {
        &self.channels[ch.index()]
    }

    /// Datagrams the kernel dropped at `ch`'s socket before the agent read
    /// them (refused by the prefilter, or a full receive buffer).
    pub fn kernel_drops(&self, ch: Channel) -> u64 {
        match self.kernel_drop_fds[ch.index()] {
            fd if fd >= 0 => crate::prefilter::kernel_drops(fd),
            _ => 0,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut channels = Map::new();
        for ch in Channel::ALL {
            let c = self.chan(ch);
            channels.insert(
                ch.name().into(),
                json!({
                    "tx_pkts": c.tx_pkts.load(Relaxed),
                    "tx_bytes": c.tx_bytes.load(Relaxed),
                    "rx_pkts": c.rx_pkts.load(Relaxed),
                    "rx_bytes": c.rx_bytes.load(Relaxed),
                    "probe_tx": c.probe_tx.load(Relaxed),
                    "probe_rx": c.probe_rx.load(Relaxed),
                    "wake_tx": c.wake_tx.load(Relaxed),
                    "control_tx": c.control_tx.load(Relaxed),
                    "control_rx": c.control_rx.load(Relaxed),
                    "kernel_drops": self.kernel_drops(ch),
                }),
            );
        }
        let mut decisions = Map::new();
        for o in Outcome::ALL {
            for ch in Channel::ALL {
                let n = self.decisions[o as usize][ch.index()].load(Relaxed);
                if n > 0 {
                    decisions.insert(format!("{}:{}", ch.name(), o.name()), json!(n));
                }
            }
        }
        let mut malformed = Map::new();
        for m in Malformed::ALL {
            malformed.insert(
                m.name().into(),
                json!(self.malformed[m as usize].load(Relaxed)),
            );
        }
        let r = self.endpoint.reorder_stats();
        let rtts = |f: &dyn Fn(Channel) -> Option<Nanos>| json!({"hbc": ms_or_null(f(Channel::Hbc)), "llc": ms_or_null(f(Channel::Llc))});
        let peers: Vec<Value> = self
            .endpoint
            .peers()
            .iter()
            .map(|p| {
                json!({
                    "peer": p.name(),
                    "rtt_ms": rtts(&|ch| p.rtt(ch)),
                    "measured_rtt_ms": rtts(&|ch| p.measured_rtt(ch)),
                })
            })
            .collect();
        let first = &self.endpoint.peers()[0];
        json!({
            "role": self.role,
            "policy": self.policy,
            "channels": channels,
            "decisions": decisions,
            "reorder": {
                "enabled": self.reorder_enabled,
                "mean_occupancy_bytes": r.mean_occupancy_bytes,
                "max_occupancy_bytes": r.max_occupancy_bytes,
                "timeout_releases": r.timeout_releases,
                "fifo_releases": r.fifo_releases,
                "late_after_timeout": r.late_after_timeout,
                "timeout_ms": r.timeout_ms,
                "in_order_releases": r.in_order_releases,
                "overflow_releases": r.overflow_releases,
                "held": r.held,
                "passed_through": r.passed_through,
            },
            "rtt_ms": rtts(&|ch| first.rtt(ch)),
            "peers": peers,
            "malformed": malformed,
            "crypto": self.crypto_json(),
            "flows": self.flows.flows.load(Relaxed),
            "flow_table": {
                "created": self.flows.created.load(Relaxed),
                "idle_evictions": self.flows.idle_evictions.load(Relaxed),
                "forced_evictions": self.flows.forced_evictions.load(Relaxed),
            },
            "tun": self.tun.to_json(),
            "busy_poll": {
                "us": self.busy_poll.us,
                "windows": self.busy_poll.windows.load(Relaxed),
                "empty_spins": self.busy_poll.empty_spins.load(Relaxed),
            },
        })
    }

    pub fn to_prometheus(&self) -> String {
        let mut s = String::new();
        let role = self.role;
        let mut metric = |name: &str, help: &str, kind: &str, rows: Vec<(String, String)>| {
            let _ = writeln!(
                s,
                "# HELP dchannel_{name} {help}\n# TYPE dchannel_{name} {kind}"
            );
            for (labels, v) in rows {
                let _ = writeln!(s, "dchannel_{name}{{role=\"{role}\"{labels}}} {v}");
            }
        };
        let per_chan = |f: &dyn Fn(Channel) -> u64| -> Vec<(String, String)> {
            Channel::ALL
                .iter()
                .map(|&ch| (format!(",channel=\"{}\"", ch.name()), f(ch).to_string()))
                .collect()
        };
        type Field = fn(&ChannelCounters) -> &AtomicU64;
        let per_channel: [(&str, &str, Field); 8] = [
            ("tx_packets_total", "Data datagrams sent", |c| &c.tx_pkts),
            (
                "tx_bytes_total",
                "Data datagram bytes sent (header + inner packet)",
                |c| &c.tx_bytes,
            ),
            ("rx_packets_total", "Data datagrams received", |c| {
                &c.rx_pkts
            }),
            ("rx_bytes_total", "Data datagram bytes received", |c| {
                &c.rx_bytes
            }),
            ("probe_tx_total", "Probe datagrams sent", |c| &c.probe_tx),
            ("probe_rx_total", "Probe datagrams received", |c| {
                &c.probe_rx
            }),
            (
                "control_tx_total",
                "Handshake and keepalive datagrams sent",
                |c| &c.control_tx,
            ),
            (
                "control_rx_total",
                "Handshake and keepalive datagrams received",
                |c| &c.control_rx,
            ),
        ];
        for (name, help, field) in per_channel {
            metric(
                name,
                help,
                "counter",
                per_chan(&|ch| field(self.chan(ch)).load(Relaxed)),
            );
        }
        metric(
            "kernel_drops_total",
            "Datagrams the kernel dropped before the agent read them (prefilter or full receive buffer)",
            "counter",
            per_chan(&|ch| self.kernel_drops(ch)),
        );
        let mut rows = Vec::new();
        for o in Outcome::ALL {
            for ch in Channel::ALL {
                let n = self.decisions[o as usize][ch.index()].load(Relaxed);
                if n > 0 {
                    rows.push((
                        format!(",channel=\"{}\",outcome=\"{}\"", ch.name(), o.name()),
                        n.to_string(),
                    ));
                }
            }
        }
        metric(
            "decisions_total",
            "Steering decisions by channel and policy outcome",
            "counter",
            rows,
        );
        let rows = Malformed::ALL
            .iter()
            .map(|&m| {
                (
                    format!(",reason=\"{}\"", m.name()),
                    self.malformed[m as usize].load(Relaxed).to_string(),
                )
            })
            .collect();
        metric(
            "malformed_total",
            "Dropped or flow-less datagrams/packets by reason",
            "counter",
            rows,
        );
        if let Some(c) = &self.crypto {
            let rows = c
                .drops()
                .iter()
                .map(|(n, v)| (format!(",reason=\"{n}\""), v.to_string()))
                .collect();
            metric(
                "crypto_drops_total",
                "Datagrams refused by the encryption layer, by reason (never answered)",
                "counter",
                rows,
            );
        }
        let r = self.endpoint.reorder_stats();
        // in the order of REORDER_METRICS
        let values = [
            r.timeout_releases.to_string(),
            r.fifo_releases.to_string(),
            r.late_after_timeout.to_string(),
            r.timeout_ms.to_string(),
            r.in_order_releases.to_string(),
            r.mean_occupancy_bytes.to_string(),
            r.max_occupancy_bytes.to_string(),
        ];
        let reorder = REORDER_METRICS.into_iter().zip(values);
        for ((name, help, kind), value) in reorder {
            metric(name, help, kind, vec![(String::new(), value)]);
        }
        let mut rows = Vec::new();
        for p in self.endpoint.peers() {
            for ch in Channel::ALL {
                if let Some(v) = p.rtt(ch) {
                    rows.push((
                        format!(",peer=\"{}\",channel=\"{}\"", p.name(), ch.name()),
                        (v as f64 / 1e6).to_string(),
                    ));
                }
            }
        }
        metric("rtt_ms", "RTT estimate used by the policy", "gauge", rows);
        metric(
            "flows",
            "Flows in the sender's flow table",
            "gauge",
            vec![(String::new(), self.flows.flows.load(Relaxed).to_string())],
        );
        metric(
            "flows_created_total",
            "Flows created in the sender's flow table",
            "counter",
            vec![(String::new(), self.flows.created.load(Relaxed).to_string())],
        );
        metric(
            "flow_evictions_total",
            "Flows evicted from the sender's flow table, by reason",
            "counter",
            [
                ("idle", &self.flows.idle_evictions),
                ("full", &self.flows.forced_evictions),
            ]
            .into_iter()
            .map(|(r, v)| (format!(",reason=\"{r}\""), v.load(Relaxed).to_string()))
            .collect(),
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dchannel_core::endpoint::{self, Config, PeerConfig, Role, TokenAuth};
    use dchannel_core::policy::parse_spec;

    fn stats() -> Stats {
        let peers = vec![PeerConfig {
            name: "gateway".into(),
            token: 1,
            tunnel_addr: None,
            endpoints: [None, None],
        }];
        let auth = TokenAuth::new(&peers).unwrap();
        let (tx, _) = endpoint::new::<Vec<u8>, _>(Config::new(Role::Client), peers, auth, || {
            parse_spec("all-hbc", 0.75).unwrap()
        })
        .unwrap();
        Stats::new("client", "all-hbc".into(), true, Arc::clone(tx.shared()))
    }

    #[test]
    fn prometheus_has_every_per_channel_counter() {
        let s = stats();
        s.chan(Channel::Llc).sent(116);
        s.chan(Channel::Hbc).received(60);
        s.chan(Channel::Hbc).probe_rx.fetch_add(2, Relaxed);
        s.bad(Malformed::from(DropReason::BadToken));
        let text = s.to_prometheus();
        for line in [
            "dchannel_tx_packets_total{role=\"client\",channel=\"llc\"} 1",
            "dchannel_tx_bytes_total{role=\"client\",channel=\"llc\"} 116",
            "dchannel_rx_packets_total{role=\"client\",channel=\"hbc\"} 1",
            "dchannel_rx_bytes_total{role=\"client\",channel=\"hbc\"} 60",
            "dchannel_probe_tx_total{role=\"client\",channel=\"hbc\"} 0",
            "dchannel_probe_rx_total{role=\"client\",channel=\"hbc\"} 2",
            "dchannel_malformed_total{role=\"client\",reason=\"bad_token\"} 1",
            // no sockets in this test: the kernel's counts read as 0
            "dchannel_kernel_drops_total{role=\"client\",channel=\"llc\"} 0",
            "# TYPE dchannel_tx_bytes_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        let json = s.to_json();
        assert_eq!(json["channels"]["llc"]["tx_bytes"], 116);
        assert_eq!(json["channels"]["hbc"]["kernel_drops"], 0);
        assert_eq!(json["rtt_ms"]["hbc"], Value::Null);
        assert_eq!(json["peers"][0]["peer"], "gateway");
        assert_eq!(json["crypto"], Value::Null, "--insecure: no crypto object");
    }

    #[test]
    fn crypto_drops_are_counted_per_reason_and_in_total() {
        use dchannel_crypto::{Drop, PrivateKey};
        let mut s = stats();
        let auth = AeadAuth::client(
            PrivateKey::generate(),
            PrivateKey::generate().public_key(),
            Default::default(),
        );
        s.crypto = Some(auth.clone());
        // what the agent does with a refused datagram: the endpoint's reason
        s.dropped(dchannel_crypto::endpoint::drop_reason(Drop::AuthFailed));
        s.dropped(DropReason::NoSession);
        let json = s.to_json();
        assert_eq!(json["malformed"]["unauthentic"], 1);
        assert_eq!(json["malformed"]["no_session"], 1);
        // the per-reason counts come from the crypto table itself (none opened here)
        assert_eq!(json["crypto"]["drops"]["auth_failed"], 0);
        assert_eq!(
            json["crypto"]["drops"].as_object().unwrap().len(),
            Drop::ALL.len()
        );
        assert_eq!(json["crypto"]["handshakes"]["initiations_sent"], 0);
        let text = s.to_prometheus();
        assert!(text.contains("dchannel_crypto_drops_total{role=\"client\",reason=\"replay\"} 0"));
        assert!(text.contains("dchannel_malformed_total{role=\"client\",reason=\"unauthentic\"} 1"));
    }
}
