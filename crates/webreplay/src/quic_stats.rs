//! What QUIC's own loss recovery and congestion control did on the server side of every
//! HTTP/3 connection, written as one JSON file at exit (`--quic-stats-json`).
//!
//! Why the server: in a page load the server is the data sender, so its loss detection
//! (RFC 9002 §6: packet threshold 3, time threshold 9/8 RTT) and its congestion window
//! decide how fast a response arrives. A scheme that reorders or splits a connection's
//! packets between two channels shows up here as lost packets and congestion events
//! that the same load over one channel does not have, and as a smaller window
//! (docs/webreplay.md, "QUIC statistics").
//!
//! A connection is summarised when it ends; those still open at exit are summarised
//! then (their counters so far). Totals cover every connection; the per-connection list
//! keeps the first [`MAX_LISTED`] (a long `dch shell` session must not grow without bound).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::Serialize;

/// Connections listed one by one in the file; the totals count all of them.
pub const MAX_LISTED: usize = 10_000;

/// One connection's counters (quinn's `ConnectionStats`, server side).
#[derive(Debug, Default, Clone, Serialize)]
pub struct ConnSummary {
    /// Client `ip:port`.
    pub client: String,
    /// SNI the client sent, lower-cased (empty if none).
    pub sni: String,
    /// Whether the connection was still open when the file was written.
    pub open_at_exit: bool,
    /// Packets sent (every packet number space).
    pub sent_packets: u64,
    /// Packets declared lost by loss detection (packet or time threshold, or PTO).
    pub lost_packets: u64,
    /// Bytes of those packets.
    pub lost_bytes: u64,
    /// Times the congestion controller reduced its window (one per loss episode).
    pub congestion_events: u64,
    /// Congestion window at the end, bytes.
    pub cwnd: u64,
    /// Smoothed RTT at the end, ms.
    pub rtt_ms: f64,
    /// Minimum RTT seen, ms.
    pub min_rtt_ms: f64,
    /// UDP datagrams sent and received.
    pub udp_tx_datagrams: u64,
    pub udp_rx_datagrams: u64,
    /// ACK frames received from the client.
    pub acks_rx: u64,
    /// Largest UDP payload the path supports at the end (after PMTU discovery).
    pub current_mtu: u16,
}

impl ConnSummary {
    /// The summary of `conn` as it stands now.
    pub fn of(conn: &quinn::Connection, sni: &str, open_at_exit: bool) -> Self {
        let s = conn.stats();
        Self {
            client: conn.remote_address().to_string(),
            sni: sni.to_string(),
            open_at_exit,
            sent_packets: s.path.sent_packets,
            lost_packets: s.path.lost_packets,
            lost_bytes: s.path.lost_bytes,
            congestion_events: s.path.congestion_events,
            cwnd: s.path.cwnd,
            rtt_ms: s.path.rtt.as_secs_f64() * 1e3,
            min_rtt_ms: s.path.min_rtt.as_secs_f64() * 1e3,
            udp_tx_datagrams: s.udp_tx.datagrams,
            udp_rx_datagrams: s.udp_rx.datagrams,
            acks_rx: s.frame_rx.acks,
            current_mtu: s.path.current_mtu,
        }
    }
}

/// Sums over every connection (the row fields the lab reads).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Totals {
    pub connections: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    /// Connections with at least one congestion event.
    pub connections_with_congestion_events: u64,
    pub acks_rx: u64,
}

impl Totals {
    fn add(&mut self, c: &ConnSummary) {
        self.connections += 1;
        self.sent_packets += c.sent_packets;
        self.lost_packets += c.lost_packets;
        self.lost_bytes += c.lost_bytes;
        self.congestion_events += c.congestion_events;
        self.connections_with_congestion_events += u64::from(c.congestion_events > 0);
        self.acks_rx += c.acks_rx;
    }
}

#[derive(Serialize)]
struct File<'a> {
    totals: &'a Totals,
    /// Connections not listed in `connections` (beyond MAX_LISTED); counted in totals.
    unlisted: u64,
    connections: &'a [ConnSummary],
}

#[derive(Default)]
struct Inner {
    open: HashMap<u64, (quinn::Connection, String)>,
    ended: Vec<ConnSummary>,
    totals: Totals,
    unlisted: u64,
}

impl Inner {
    fn record(&mut self, c: ConnSummary) {
        self.totals.add(&c);
        if self.ended.len() < MAX_LISTED {
            self.ended.push(c);
        } else {
            self.unlisted += 1;
        }
    }
}

/// Shared by every QUIC endpoint of the server.
#[derive(Default)]
pub struct QuicStats {
    next_id: AtomicU64,
    inner: Mutex<Inner>,
}

/// Registration of one open connection; dropping it (however the connection's task
/// ends) summarises the connection with its final counters.
pub struct Registered {
    stats: Arc<QuicStats>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.stats.ended(self.id);
    }
}

impl QuicStats {
    /// A connection has completed its handshake.
    pub fn opened(self: &Arc<Self>, conn: &quinn::Connection, sni: &str) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.open.insert(id, (conn.clone(), sni.to_string()));
        Registered {
            stats: self.clone(),
            id,
        }
    }

    /// Connection `id` has ended: its counters are final.
    fn ended(&self, id: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((conn, sni)) = g.open.remove(&id) {
            let s = ConnSummary::of(&conn, &sni, false);
            g.record(s);
        }
    }

    /// Write everything to `path` (the open connections summarised as they stand).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let open: Vec<(quinn::Connection, String)> = g.open.drain().map(|(_, v)| v).collect();
        for (conn, sni) in open {
            g.record(ConnSummary::of(&conn, &sni, true));
        }
        let file = File {
            totals: &g.totals,
            unlisted: g.unlisted,
            connections: &g.ended,
        };
        let text = serde_json::to_string_pretty(&file).context("encoding the QUIC statistics")?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("writing the QUIC statistics to {}", path.display()))
    }
}
