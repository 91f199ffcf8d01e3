//! Counters shared by the agent's threads (relaxed atomics), rendered as JSON
//! at exit and as Prometheus text on the metrics port.

use crate::metrics::escape_label;
use dchannel_core::endpoint::{DropReason, Shared};
use dchannel_core::packet_class::PacketClass;
use dchannel_core::policy::Outcome;
use dchannel_core::reorder::ReorderStats;
use dchannel_core::{Channel, Nanos};
use dchannel_crypto::endpoint::AeadAuth;
use dchannel_crypto::peers::Stats as HandshakeStats;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

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
    /// Data datagrams that started a burst (dchannel_core::bursts): sent 1 ms
    /// or more after the channel's previous one, by the send thread.
    pub tx_bursts: AtomicU64,
    /// Copies of packets sent on both channels (`realtime-dup`) that went on
    /// this channel, by the send thread; in the data counters too.
    pub dup_sent: AtomicU64,
    _pad: [u64; 11],
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
    /// Second copies of packets sent on both channels that arrived on this
    /// channel after the first (on either) and were dropped (dchannel_core::dedupe);
    /// in the data counters above too (receive thread).
    pub dup_dropped: AtomicU64,
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
    /// Flows evicted because all tables together reached `--gateway-flows`.
    pub gateway_evictions: AtomicU64,
}

impl FlowCounters {
    /// Publishes the send loop's view (Relaxed: counters, read by the stats writer).
    pub fn publish(&self, flows: usize, st: dchannel_core::flow_table::FlowTableStats) {
        self.flows.store(flows as u64, Relaxed);
        self.created.store(st.created, Relaxed);
        self.idle_evictions.store(st.idle_evictions, Relaxed);
        self.forced_evictions.store(st.forced_evictions, Relaxed);
        self.gateway_evictions.store(st.gateway_evictions, Relaxed);
    }
}

/// The per-packet counters of one worker (a gateway runs `--threads` of
/// them; a device one): only that worker's threads write them, so no cache
/// line is written by two workers per packet. Readers sum over the workers.
#[derive(Default)]
pub struct WorkerCounters {
    /// Per channel (index = Channel).
    pub channels: [ChannelCounters; 2],
    /// Steering decisions per (outcome, channel used).
    pub decisions: [[AtomicU64; 2]; Outcome::COUNT],
    /// Steered packets per (class, channel used) (dchannel_core::packet_class).
    pub classes: [[AtomicU64; 2]; PacketClass::COUNT],
}

pub struct Stats {
    pub role: &'static str,
    pub policy: String,
    pub reorder_enabled: bool,
    /// One set per worker (index = worker).
    pub workers: Vec<WorkerCounters>,
    pub malformed: [AtomicU64; DropReason::COUNT],
    pub flows: FlowCounters,
    pub tun: TunCounters,
    pub busy_poll: BusyPollCounters,
    /// The channel sockets of each worker (index = Channel), whose kernel
    /// drop counts (prefilter.rs) the stats read when written.
    pub kernel_drop_fds: Vec<[std::os::fd::RawFd; 2]>,
    /// RTT estimates and reorder stats, as the endpoint's receive half publishes them.
    pub endpoint: Arc<Shared>,
    /// The encryption layer (its drop counters per reason and handshake
    /// counters are read from it); `None` with `--insecure`.
    pub crypto: Option<AeadAuth>,
    /// The agent's clock origin (`now` = 0, agent.rs), against which session
    /// ages are measured.
    pub epoch: std::time::Instant,
}

/// `{"<channel>:<name>": count}` of the counts that are not 0, for every
/// (name, key) of `keys` and every channel (`decisions`, `classes`).
fn nonzero_by_channel<K: Copy, const N: usize>(
    keys: [(&'static str, K); N],
    count: impl Fn(K, Channel) -> u64,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, k) in keys {
        for ch in Channel::ALL {
            let n = count(k, ch);
            if n > 0 {
                out.insert(format!("{}:{name}", ch.name()), json!(n));
            }
        }
    }
    out
}

/// One per-channel counter: its key in the JSON (`channels.<channel>.<json>`),
/// its Prometheus metric (`dchannel_<prom>{channel="<channel>"}`, a counter;
/// `None`: JSON only), its help and where its value comes from.
struct ChannelMetric {
    json: &'static str,
    prom: Option<&'static str>,
    help: &'static str,
    read: fn(&Stats, Channel) -> u64,
}

/// Every per-channel counter, the one list the JSON and Prometheus outputs
/// are written from.
const CHANNEL_METRICS: &[ChannelMetric] = &[
    ChannelMetric {
        json: "tx_pkts",
        prom: Some("tx_packets_total"),
        help: "Data datagrams sent",
        read: |s, ch| s.channel_sum(ch, |c| &c.tx_pkts),
    },
    ChannelMetric {
        json: "tx_bytes",
        prom: Some("tx_bytes_total"),
        help: "Data datagram bytes sent (header + inner packet)",
        read: |s, ch| s.channel_sum(ch, |c| &c.tx_bytes),
    },
    ChannelMetric {
        json: "rx_pkts",
        prom: Some("rx_packets_total"),
        help: "Data datagrams received",
        read: |s, ch| s.channel_sum(ch, |c| &c.rx_pkts),
    },
    ChannelMetric {
        json: "rx_bytes",
        prom: Some("rx_bytes_total"),
        help: "Data datagram bytes received",
        read: |s, ch| s.channel_sum(ch, |c| &c.rx_bytes),
    },
    ChannelMetric {
        json: "probe_tx",
        prom: Some("probe_tx_total"),
        help: "Probe datagrams sent",
        read: |s, ch| s.channel_sum(ch, |c| &c.probe_tx),
    },
    ChannelMetric {
        json: "probe_rx",
        prom: Some("probe_rx_total"),
        help: "Probe datagrams received",
        read: |s, ch| s.channel_sum(ch, |c| &c.probe_rx),
    },
    ChannelMetric {
        json: "wake_tx",
        prom: None,
        help: "Wake probes sent beside data (prewarm)",
        read: |s, ch| s.channel_sum(ch, |c| &c.wake_tx),
    },
    ChannelMetric {
        json: "tx_bursts",
        prom: None,
        help: "Data datagrams sent 1 ms or more after the channel's previous one (bursts begun)",
        read: |s, ch| s.channel_sum(ch, |c| &c.tx_bursts),
    },
    ChannelMetric {
        json: "dup_sent",
        prom: Some("dup_sent_total"),
        help: "Copies of packets sent on both channels (realtime-dup) sent on this one",
        read: |s, ch| s.channel_sum(ch, |c| &c.dup_sent),
    },
    ChannelMetric {
        json: "dup_dropped",
        prom: Some("dup_dropped_total"),
        help: "Second copies of packets sent on both channels that arrived on this one, dropped",
        read: |s, ch| s.channel_sum(ch, |c| &c.dup_dropped),
    },
    ChannelMetric {
        json: "control_tx",
        prom: Some("control_tx_total"),
        help: "Handshake and keepalive datagrams sent",
        read: |s, ch| s.channel_sum(ch, |c| &c.control_tx),
    },
    ChannelMetric {
        json: "control_rx",
        prom: Some("control_rx_total"),
        help: "Handshake and keepalive datagrams received",
        read: |s, ch| s.channel_sum(ch, |c| &c.control_rx),
    },
    ChannelMetric {
        json: "kernel_drops",
        prom: Some("kernel_drops_total"),
        help: "Datagrams the kernel dropped before the agent read them (prefilter or full receive buffer)",
        read: Stats::kernel_drops,
    },
    ChannelMetric {
        json: "downs",
        prom: Some("channel_downs_total"),
        help: "Times the channel was reported down (no reply for 3 probe intervals), all peers",
        read: |s, ch| s.endpoint.peers().iter().map(|p| p.downs(ch)).sum(),
    },
];

/// The encryption layer's handshake counters: the key in the JSON
/// (`crypto.handshakes.<name>`), the `event` label of
/// `dchannel_handshakes_total`, its help and its value.
type HandshakeMetric = (&'static str, &'static str, fn(&HandshakeStats) -> u64);

/// Every handshake counter, the one list both outputs are written from.
const HANDSHAKE_METRICS: &[HandshakeMetric] = &[
    (
        "initiations_sent",
        "Initiations sent (first attempts and retries)",
        |h| h.initiations_sent,
    ),
    ("retries", "Initiations retried after a timeout", |h| {
        h.retries
    }),
    ("gave_up", "Handshake rounds given up", |h| h.gave_up),
    (
        "completed_as_initiator",
        "Handshakes initiated here that completed",
        |h| h.completed_as_initiator,
    ),
    (
        "answered",
        "Initiations answered (sessions set up as responder)",
        |h| h.answered,
    ),
    (
        "stale",
        "Handshakes started because the peer went silent",
        |h| h.stale,
    ),
    (
        "queue_overflow",
        "Handshake datagrams not queued (queue full)",
        |h| h.queue_overflow,
    ),
];

/// One value of the reorder buffer's stats: its key in the JSON
/// (`reorder.<json>`), its unlabelled Prometheus metric and kind (`None`:
/// JSON only), its help and its value.
struct ReorderMetric {
    json: &'static str,
    prom: Option<(&'static str, &'static str)>,
    help: &'static str,
    read: fn(&ReorderStats) -> Value,
}

/// Every value of the reorder buffer's stats (besides `enabled`).
const REORDER_METRICS: &[ReorderMetric] = &[
    ReorderMetric {
        json: "timeout_releases",
        prom: Some(("reorder_timeout_releases_total", "counter")),
        help: "LLC packets released by timeout",
        read: |r| json!(r.timeout_releases),
    },
    ReorderMetric {
        json: "fifo_releases",
        prom: Some(("reorder_fifo_releases_total", "counter")),
        help: "Held LLC packets released because a later HBC packet showed their predecessor lost",
        read: |r| json!(r.fifo_releases),
    },
    ReorderMetric {
        json: "late_after_timeout",
        prom: Some(("reorder_late_after_timeout_total", "counter")),
        help: "Packets that arrived after the timeout had given up on them",
        read: |r| json!(r.late_after_timeout),
    },
    ReorderMetric {
        json: "timeout_ms",
        prom: Some(("reorder_timeout_ms", "gauge")),
        help: "The reorder timeout in force (adaptive: follows the HBC's queue)",
        read: |r| json!(r.timeout_ms),
    },
    ReorderMetric {
        json: "in_order_releases",
        prom: Some(("reorder_in_order_releases_total", "counter")),
        help: "Held LLC packets released in order",
        read: |r| json!(r.in_order_releases),
    },
    ReorderMetric {
        json: "mean_occupancy_bytes",
        prom: Some(("reorder_mean_occupancy_bytes", "gauge")),
        help: "Time-weighted mean reorder buffer occupancy",
        read: |r| json!(r.mean_occupancy_bytes),
    },
    ReorderMetric {
        json: "max_occupancy_bytes",
        prom: Some(("reorder_max_occupancy_bytes", "gauge")),
        help: "Maximum reorder buffer occupancy",
        read: |r| json!(r.max_occupancy_bytes),
    },
    ReorderMetric {
        json: "overflow_releases",
        prom: None,
        help: "Packets released early because a memory bound was reached",
        read: |r| json!(r.overflow_releases),
    },
    ReorderMetric {
        json: "held",
        prom: None,
        help: "Packets held at some point",
        read: |r| json!(r.held),
    },
    ReorderMetric {
        json: "passed_through",
        prom: None,
        help: "Packets delivered without being held",
        read: |r| json!(r.passed_through),
    },
];

/// A JSON number as Prometheus text (integers as integers, floats as Rust
/// prints them).
fn prom_number(v: &Value) -> String {
    match (v.as_u64(), v.as_f64()) {
        (Some(u), _) => u.to_string(),
        (None, Some(f)) => f.to_string(),
        _ => "NaN".into(),
    }
}

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
        workers: usize,
    ) -> Stats {
        Stats {
            role,
            policy,
            reorder_enabled,
            workers: (0..workers.max(1)).map(|_| Default::default()).collect(),
            malformed: Default::default(),
            flows: FlowCounters::default(),
            tun: TunCounters::default(),
            busy_poll: BusyPollCounters::default(),
            kernel_drop_fds: Vec::new(),
            endpoint,
            crypto: None,
            epoch: std::time::Instant::now(),
        }
    }

    /// Counts a datagram or packet dropped (by the endpoint or the driver).
    pub fn dropped(&self, r: DropReason) {
        self.malformed[r as usize].fetch_add(1, Relaxed);
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
        let handshakes: Map<String, Value> = HANDSHAKE_METRICS
            .iter()
            .map(|(name, _, read)| ((*name).into(), json!(read(&h))))
            .collect();
        json!({
            "drops": drops,
            "handshakes": handshakes,
        })
    }

    /// Worker `k`'s counters (what its threads write).
    pub fn worker(&self, k: usize) -> &WorkerCounters {
        &self.workers[k]
    }

    /// A per-channel counter summed over the workers.
    fn channel_sum(&self, ch: Channel, counter: fn(&ChannelCounters) -> &AtomicU64) -> u64 {
        self.workers
            .iter()
            .map(|w| counter(&w.channels[ch.index()]).load(Relaxed))
            .sum()
    }

    /// Decisions with outcome `o` on `ch`, summed over the workers.
    fn decision_count(&self, o: Outcome, ch: Channel) -> u64 {
        self.workers
            .iter()
            .map(|w| w.decisions[o as usize][ch.index()].load(Relaxed))
            .sum()
    }

    /// Steered packets of class `k` on `ch`, summed over the workers.
    fn class_count(&self, k: PacketClass, ch: Channel) -> u64 {
        self.workers
            .iter()
            .map(|w| w.classes[k as usize][ch.index()].load(Relaxed))
            .sum()
    }

    /// Datagrams the kernel dropped at `ch`'s socket before the agent read
    /// them (refused by the prefilter, or a full receive buffer).
    pub fn kernel_drops(&self, ch: Channel) -> u64 {
        self.kernel_drop_fds
            .iter()
            .map(|fds| crate::prefilter::kernel_drops(fds[ch.index()]))
            .sum()
    }

    pub fn to_json(&self) -> Value {
        let mut channels = Map::new();
        for ch in Channel::ALL {
            let counters: Map<String, Value> = CHANNEL_METRICS
                .iter()
                .map(|m| (m.json.into(), json!((m.read)(self, ch))))
                .collect();
            channels.insert(ch.name().into(), Value::Object(counters));
        }
        let decisions = nonzero_by_channel(Outcome::ALL.map(|o| (o.name(), o)), |o, ch| {
            self.decision_count(o, ch)
        });
        let classes = nonzero_by_channel(PacketClass::ALL.map(|k| (k.name(), k)), |k, ch| {
            self.class_count(k, ch)
        });
        let malformed: Map<String, Value> = DropReason::ALL
            .iter()
            .map(|&r| {
                (
                    r.name().into(),
                    json!(self.malformed[r as usize].load(Relaxed)),
                )
            })
            .collect();
        let r = self.endpoint.reorder_stats();
        let mut reorder: Map<String, Value> = REORDER_METRICS
            .iter()
            .map(|m| (m.json.into(), (m.read)(&r)))
            .collect();
        reorder.insert("enabled".into(), json!(self.reorder_enabled));
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
                    "limits": crate::device_limit_metrics::to_json(&p.limits.get()),
                    // rule (c), --llc-share probe: the other users' LLC queue (0 without)
                    "llc_others_bytes": p.llc_others().round(),
                })
            })
            .collect();
        // a gateway may have no device left (all removed while it runs)
        let first = self.endpoint.peers().into_iter().next();
        json!({
            "role": self.role,
            "policy": self.policy,
            "channels": channels,
            "decisions": decisions,
            "classes": classes,
            "reorder": reorder,
            "rtt_ms": rtts(&|ch| first.as_ref().and_then(|p| p.rtt(ch))),
            "peers": peers,
            "malformed": malformed,
            "crypto": self.crypto_json(),
            "flows": self.flows.flows.load(Relaxed),
            "flow_table": {
                "created": self.flows.created.load(Relaxed),
                "idle_evictions": self.flows.idle_evictions.load(Relaxed),
                "forced_evictions": self.flows.forced_evictions.load(Relaxed),
                "gateway_evictions": self.flows.gateway_evictions.load(Relaxed),
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
        for m in CHANNEL_METRICS {
            let Some(name) = m.prom else { continue };
            let rows = Channel::ALL
                .iter()
                .map(|&ch| {
                    let labels = format!(",channel=\"{}\"", ch.name());
                    (labels, (m.read)(self, ch).to_string())
                })
                .collect();
            metric(name, m.help, "counter", rows);
        }
        let mut rows = Vec::new();
        for o in Outcome::ALL {
            for ch in Channel::ALL {
                let n = self.decision_count(o, ch);
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
        let rows = DropReason::ALL
            .iter()
            .map(|&r| {
                (
                    format!(",reason=\"{}\"", r.name()),
                    self.malformed[r as usize].load(Relaxed).to_string(),
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
            let h = c.stats();
            let rows = HANDSHAKE_METRICS
                .iter()
                .map(|(name, _, read)| (format!(",event=\"{name}\""), read(&h).to_string()))
                .collect();
            let help: Vec<String> = HANDSHAKE_METRICS
                .iter()
                .map(|(name, help, _)| format!("{name}: {help}"))
                .collect();
            metric(
                "handshakes_total",
                &format!("Handshake events ({})", help.join("; ")),
                "counter",
                rows,
            );
            let peers = self.endpoint.peers().len();
            let sessions = self
                .endpoint
                .peers()
                .iter()
                .filter(|p| c.has_session(p.slot()))
                .count();
            metric(
                "sessions",
                "Peers with an established session now",
                "gauge",
                vec![(String::new(), sessions.to_string())],
            );
            let now = self.epoch.elapsed().as_nanos() as Nanos;
            let ages = self
                .endpoint
                .peers()
                .iter()
                .filter_map(|p| {
                    let created = c.session_created(p.slot())?;
                    let age = now.saturating_sub(created) as f64 / 1e9;
                    Some((
                        format!(",peer=\"{}\"", escape_label(p.name())),
                        age.to_string(),
                    ))
                })
                .collect();
            metric(
                "session_age_seconds",
                "Age of the current session with each peer (the client: its gateway)",
                "gauge",
                ages,
            );
            metric(
                "peers",
                "Configured peers (the gateway: devices; the client: 1)",
                "gauge",
                vec![(String::new(), peers.to_string())],
            );
        }
        let r = self.endpoint.reorder_stats();
        for m in REORDER_METRICS {
            if let Some((name, kind)) = m.prom {
                metric(
                    name,
                    m.help,
                    kind,
                    vec![(String::new(), prom_number(&(m.read)(&r)))],
                );
            }
        }
        let mut rows = Vec::new();
        let (mut up, mut silent) = (Vec::new(), Vec::new());
        for p in self.endpoint.peers() {
            for ch in Channel::ALL {
                let peer = escape_label(p.name());
                let labels = format!(",peer=\"{peer}\",channel=\"{}\"", ch.name());
                // a channel reported down has no RTT: its last estimate is stale
                match p.rtt(ch) {
                    Some(_) if !p.reported_up(ch) => rows.push((labels.clone(), "NaN".into())),
                    Some(v) => rows.push((labels.clone(), (v as f64 / 1e6).to_string())),
                    None => {}
                }
                up.push((labels.clone(), u8::from(p.reported_up(ch)).to_string()));
                if let Some(ns) = p.silent_for(ch) {
                    silent.push((labels, (ns as f64 / 1e9).to_string()));
                }
            }
        }
        metric(
            "rtt_ms",
            "RTT estimate used by the policy (NaN while the channel is down)",
            "gauge",
            rows,
        );
        metric(
            "channel_up",
            "1 while the channel answers (heard within 3 probe intervals), else 0",
            "gauge",
            up,
        );
        metric(
            "channel_silence_seconds",
            "Time since anything was last heard on the channel",
            "gauge",
            silent,
        );
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
                ("gateway_limit", &self.flows.gateway_evictions),
            ]
            .into_iter()
            .map(|(r, v)| (format!(",reason=\"{r}\""), v.load(Relaxed).to_string()))
            .collect(),
        );
        for m in crate::device_limit_metrics::DEVICE_METRICS {
            let rows = self
                .endpoint
                .peers()
                .iter()
                .map(|p| {
                    let v = (m.read)(&p.limits.get());
                    (format!(",peer=\"{}\"", p.name()), v.to_string())
                })
                .collect();
            metric(m.prom, m.help, m.kind, rows);
        }
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
        Stats::new("client", "all-hbc".into(), true, Arc::clone(tx.shared()), 2)
    }

    #[test]
    fn every_device_limit_is_in_the_json_and_the_metrics_per_peer() {
        let s = stats();
        let json = s.to_json();
        let limits = &json["peers"][0]["limits"];
        let text = s.to_prometheus();
        for m in crate::device_limit_metrics::DEVICE_METRICS {
            assert_eq!(limits[m.json].as_u64(), Some(0), "{}", m.json);
            let line = format!("dchannel_{}{{role=\"client\",peer=\"gateway\"}} 0", m.prom);
            assert!(text.contains(&line), "{line}");
            assert!(text.contains(&format!("# TYPE dchannel_{} {}", m.prom, m.kind)));
        }
        assert!(json["flow_table"]["gateway_evictions"].is_u64());
        // rule (c)'s estimate, 0 without --llc-share probe
        assert_eq!(json["peers"][0]["llc_others_bytes"].as_f64(), Some(0.0));
    }

    #[test]
    fn prometheus_has_every_per_channel_counter() {
        let s = stats();
        // two workers: the outputs sum them
        s.worker(1).channels[Channel::Llc.index()].sent(116);
        s.worker(0).channels[Channel::Hbc.index()].received(60);
        s.worker(0).channels[Channel::Hbc.index()]
            .probe_rx
            .fetch_add(1, Relaxed);
        s.worker(1).channels[Channel::Hbc.index()]
            .probe_rx
            .fetch_add(1, Relaxed);
        s.dropped(DropReason::BadToken);
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
            // never heard: not up, never down, no silence to report
            "dchannel_channel_up{role=\"client\",peer=\"gateway\",channel=\"llc\"} 0",
            "dchannel_channel_downs_total{role=\"client\",channel=\"llc\"} 0",
            "# TYPE dchannel_channel_silence_seconds gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        let json = s.to_json();
        let keys = |v: &Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        // the keys the lab reads (lab/dchlab), JSON names beside Prometheus ones
        assert_eq!(
            keys(&json["channels"]["llc"]),
            [
                "control_rx",
                "control_tx",
                "downs",
                "dup_dropped",
                "dup_sent",
                "kernel_drops",
                "probe_rx",
                "probe_tx",
                "rx_bytes",
                "rx_pkts",
                "tx_bursts",
                "tx_bytes",
                "tx_pkts",
                "wake_tx"
            ]
        );
        assert_eq!(
            keys(&json["reorder"]),
            [
                "enabled",
                "fifo_releases",
                "held",
                "in_order_releases",
                "late_after_timeout",
                "max_occupancy_bytes",
                "mean_occupancy_bytes",
                "overflow_releases",
                "passed_through",
                "timeout_ms",
                "timeout_releases"
            ]
        );
        assert_eq!(json["reorder"]["timeout_ms"].as_f64(), Some(0.0));
        assert!(json["reorder"]["held"].is_u64());
        assert_eq!(json["malformed"]["bad_token"], 1);
        // main's 17, egress_denied (h-egress) and other_worker (h-workers)
        assert_eq!(json["malformed"].as_object().unwrap().len(), 19);
        assert!(text.contains("# TYPE dchannel_reorder_timeout_ms gauge"));
        assert!(!text.contains("dchannel_reorder_held"));
        assert_eq!(json["channels"]["llc"]["tx_bytes"], 116);
        assert_eq!(json["channels"]["hbc"]["kernel_drops"], 0);
        assert_eq!(json["rtt_ms"]["hbc"], Value::Null);
        assert_eq!(json["peers"][0]["peer"], "gateway");
        assert_eq!(json["crypto"], Value::Null, "--insecure: no crypto object");
    }

    #[test]
    fn packet_classes_and_bursts_are_summed_over_workers_per_channel() {
        let s = stats();
        let (llc, hbc) = (Channel::Llc.index(), Channel::Hbc.index());
        s.worker(0).classes[PacketClass::TcpPureAck as usize][llc].fetch_add(2, Relaxed);
        s.worker(1).classes[PacketClass::TcpPureAck as usize][llc].fetch_add(1, Relaxed);
        s.worker(1).classes[PacketClass::QuicShortData as usize][hbc].fetch_add(4, Relaxed);
        s.worker(0).channels[hbc].tx_bursts.fetch_add(1, Relaxed);
        s.worker(1).channels[hbc].tx_bursts.fetch_add(2, Relaxed);
        let json = s.to_json();
        // only the classes that occurred, as "<channel>:<class>" (like `decisions`)
        assert_eq!(
            json["classes"],
            serde_json::json!({"llc:tcp_pure_ack": 3, "hbc:quic_short_data": 4})
        );
        assert_eq!(json["channels"]["hbc"]["tx_bursts"], 3);
        assert_eq!(json["channels"]["llc"]["tx_bursts"], 0);
    }

    #[test]
    fn crypto_drops_are_counted_per_reason_and_in_total() {
        use dchannel_crypto::{CryptoDrop, PrivateKey};
        let mut s = stats();
        let auth = AeadAuth::client(
            PrivateKey::generate(),
            PrivateKey::generate().public_key(),
            Default::default(),
        );
        s.crypto = Some(auth.clone());
        // what the agent does with a refused datagram: the endpoint's reason
        s.dropped(dchannel_crypto::endpoint::drop_reason(
            CryptoDrop::AuthFailed,
        ));
        s.dropped(DropReason::NoSession);
        let json = s.to_json();
        assert_eq!(json["malformed"]["unauthentic"], 1);
        assert_eq!(json["malformed"]["no_session"], 1);
        // the per-reason counts come from the crypto table itself (none opened here)
        assert_eq!(json["crypto"]["drops"]["auth_failed"], 0);
        assert_eq!(
            json["crypto"]["drops"].as_object().unwrap().len(),
            CryptoDrop::ALL.len()
        );
        assert_eq!(json["crypto"]["handshakes"]["initiations_sent"], 0);
        let text = s.to_prometheus();
        assert!(text.contains("dchannel_crypto_drops_total{role=\"client\",reason=\"replay\"} 0"));
        assert!(text.contains("dchannel_malformed_total{role=\"client\",reason=\"unauthentic\"} 1"));
        // handshake and session counters on the metrics port, named as in the JSON
        let keys: Vec<&str> = json["crypto"]["handshakes"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = [
            "answered",
            "completed_as_initiator",
            "gave_up",
            "initiations_sent",
            "queue_overflow",
            "retries",
            "stale",
        ];
        want.sort();
        assert_eq!(keys, want);
        for k in want {
            let line = format!("dchannel_handshakes_total{{role=\"client\",event=\"{k}\"}} 0");
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(text
            .lines()
            .any(|l| l == "dchannel_sessions{role=\"client\"} 0"));
        assert!(text
            .lines()
            .any(|l| l == "dchannel_peers{role=\"client\"} 1"));
        // no session yet: the session-age gauge is declared and has no row
        assert!(text.contains("# TYPE dchannel_session_age_seconds gauge\n"));
        assert!(!text.contains("dchannel_session_age_seconds{"));
    }
}
