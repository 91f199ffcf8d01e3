//! Counters of the running proxy, written as JSON at exit (`--stats-json`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use serde::Serialize;

use crate::policy::{Channel, Reason};

/// Counters of one channel.
#[derive(Debug, Default)]
pub struct ChannelCounters {
    pub connections_opened: AtomicU64,
    pub connections_open: AtomicU64,
    pub connect_errors: AtomicU64,
    pub h2_connections: AtomicU64,
    pub requests: AtomicU64,
    /// Bytes read from / written to the channel's upstream sockets (TLS records included).
    pub wire_rx_bytes: AtomicU64,
    pub wire_tx_bytes: AtomicU64,
    /// Response body bytes that arrived over this channel.
    pub body_bytes: AtomicU64,
    /// Objects assigned to this channel, by reason.
    pub decisions: Mutex<BTreeMap<Reason, u64>>,
    /// Bytes of the objects assigned to this channel (their full sizes when known).
    pub decided_bytes: AtomicU64,
}

impl ChannelCounters {
    pub fn decision(&self, reason: Reason, size: Option<u64>) {
        *self
            .decisions
            .lock()
            .expect("stats lock")
            .entry(reason)
            .or_default() += 1;
        if let Some(s) = size {
            self.decided_bytes.fetch_add(s, Relaxed);
        }
    }
}

/// Proxy-wide counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub channels: [ChannelCounters; 2],
    pub client_requests: AtomicU64,
    pub client_connects: AtomicU64,
    pub upstream_errors: AtomicU64,
    pub probes: AtomicU64,
    pub stitched: AtomicU64,
}

#[derive(Serialize)]
pub struct ChannelSnapshot {
    pub connections_opened: u64,
    pub connections_open: u64,
    pub connect_errors: u64,
    pub h2_connections: u64,
    pub requests: u64,
    pub wire_rx_bytes: u64,
    pub wire_tx_bytes: u64,
    pub body_bytes: u64,
    pub decided_objects: u64,
    pub decided_bytes: u64,
    pub decisions: BTreeMap<Reason, u64>,
    pub min_srtt_ms: Option<f64>,
    pub median_srtt_ms: Option<f64>,
    pub max_rate_mbit: f64,
}

#[derive(Serialize)]
pub struct Snapshot {
    pub policy: String,
    pub client_requests: u64,
    pub client_connects: u64,
    pub upstream_errors: u64,
    pub probes: u64,
    pub stitched: u64,
    pub channels: BTreeMap<Channel, ChannelSnapshot>,
}

impl Stats {
    pub fn ch(&self, ch: Channel) -> &ChannelCounters {
        &self.channels[ch.index()]
    }

    /// `estimates(ch)` gives (min SRTT, median SRTT, max rate B/ms) of the channel.
    pub fn snapshot(
        &self,
        policy: String,
        estimates: impl Fn(Channel) -> (Option<f64>, Option<f64>, f64),
    ) -> Snapshot {
        let channels = Channel::ALL
            .iter()
            .map(|&ch| {
                let c = self.ch(ch);
                let decisions = c.decisions.lock().expect("stats lock").clone();
                let (min, med, max_rate) = estimates(ch);
                (
                    ch,
                    ChannelSnapshot {
                        connections_opened: c.connections_opened.load(Relaxed),
                        connections_open: c.connections_open.load(Relaxed),
                        connect_errors: c.connect_errors.load(Relaxed),
                        h2_connections: c.h2_connections.load(Relaxed),
                        requests: c.requests.load(Relaxed),
                        wire_rx_bytes: c.wire_rx_bytes.load(Relaxed),
                        wire_tx_bytes: c.wire_tx_bytes.load(Relaxed),
                        body_bytes: c.body_bytes.load(Relaxed),
                        decided_objects: decisions.values().sum(),
                        decided_bytes: c.decided_bytes.load(Relaxed),
                        decisions,
                        min_srtt_ms: min,
                        median_srtt_ms: med,
                        // B/ms → Mbit/s: × 8000 / 1e6.
                        max_rate_mbit: max_rate * 8.0 / 1000.0,
                    },
                )
            })
            .collect();
        Snapshot {
            policy,
            client_requests: self.client_requests.load(Relaxed),
            client_connects: self.client_connects.load(Relaxed),
            upstream_errors: self.upstream_errors.load(Relaxed),
            probes: self.probes.load(Relaxed),
            stitched: self.stitched.load(Relaxed),
            channels,
        }
    }
}
