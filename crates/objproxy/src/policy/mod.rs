//! Object-level steering policies, sans-I/O.
//!
//! A policy sees a snapshot of both channels ([`ChannelView`]) and the object size (when
//! known) and answers with a [`Decision`]. Nothing here touches sockets, clocks or files:
//! the proxy builds the views from TCP_INFO and interface counters, tests build them by hand.
//!
//! Units everywhere in this module: times in milliseconds, sizes in bytes, rates in bytes
//! per millisecond (1 Mbit/s = 125 B/ms; the paper's 2 Mbit/s URLLC = 250 B/ms).

pub mod ians;
pub mod obj_oracle;
pub mod obj_priority;
pub mod obj_size;
pub mod passthrough;
pub mod predict;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// One of the two channels between `ue` and `gw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// High-bandwidth channel (e.g. 5G eMBB).
    Hbc,
    /// Low-latency channel (e.g. 5G URLLC).
    Llc,
}

impl Channel {
    pub const ALL: [Channel; 2] = [Channel::Hbc, Channel::Llc];

    pub fn index(self) -> usize {
        match self {
            Channel::Hbc => 0,
            Channel::Llc => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Channel::Hbc => "hbc",
            Channel::Llc => "llc",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a policy knows about one channel at decision time (IANS' per-interface inputs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelView {
    /// Smallest smoothed RTT seen on the channel's TCP connections (ms).
    pub min_srtt_ms: f64,
    /// Median smoothed RTT of the channel's TCP connections (ms).
    pub median_srtt_ms: f64,
    /// Maximum downstream rate seen over the last 5 minutes (B/ms).
    pub max_rate: f64,
    /// Current downstream rate (B/ms).
    pub cur_rate: f64,
    /// Number of open connections on the channel.
    pub conns: u32,
    /// An open connection to the request's origin can carry the request now
    /// (idle HTTP/1.1 keep-alive connection or a live HTTP/2 connection).
    pub can_reuse: bool,
}

impl ChannelView {
    /// IANS' free capacity: `max_rate / (conns × cur/max + 1)` — the share of the maximum
    /// rate a new transfer can expect when `conns` connections already use `cur/max` of it.
    pub fn free_capacity(&self) -> f64 {
        if self.max_rate <= 0.0 {
            return 0.0;
        }
        let util = (self.cur_rate / self.max_rate).clamp(0.0, 1.0);
        self.max_rate / (f64::from(self.conns) * util + 1.0)
    }
}

/// Both channels, indexed by [`Channel::index`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Views {
    pub hbc: ChannelView,
    pub llc: ChannelView,
    /// Bytes of objects already decided for each channel (index = [`Channel::index`])
    /// that have not yet arrived: what a new object there queues behind
    /// (`obj-oracle:committed`).
    pub committed: [f64; 2],
}

impl Views {
    pub fn get(&self, ch: Channel) -> &ChannelView {
        match ch {
            Channel::Hbc => &self.hbc,
            Channel::Llc => &self.llc,
        }
    }

    /// The channel with the lowest minimum SRTT (the LLC on ties, since that is its job).
    pub fn lowest_latency(&self) -> Channel {
        if self.hbc.min_srtt_ms < self.llc.min_srtt_ms {
            Channel::Hbc
        } else {
            Channel::Llc
        }
    }
}

/// Why a channel was chosen; counted in the stats JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// IANS step 1: the lowest-latency channel, latency part > capacity part.
    LatencyDominated,
    /// IANS step 2 / obj-oracle: smallest predicted completion time.
    PredictedFaster,
    /// obj-size: below the threshold.
    BelowThreshold,
    /// obj-size: at or above the threshold.
    AboveThreshold,
    /// Object fully fetched by the 0-999 size-discovery request.
    SmallObject,
    /// Size unknown (no Content-Length/range support, non-GET, browser range request):
    /// the lower-latency channel fetches the whole object.
    SizeUnknown,
    /// passthrough or an object missing from the oracle's manifest.
    Default,
    /// obj-priority: the request has the highest urgency (`priority: u=0`).
    HighestPriority,
    /// obj-priority: any lower urgency (including no `priority` header, urgency 3).
    LowerPriority,
}

/// A policy's answer for one object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub channel: Channel,
    pub reason: Reason,
}

impl Decision {
    pub fn new(channel: Channel, reason: Reason) -> Self {
        Decision { channel, reason }
    }

    /// The channel with the smaller predicted fetch time `t`; ties go to the HBC,
    /// which does not take capacity from latency-critical objects.
    pub fn predicted_faster(t: impl Fn(Channel) -> f64) -> Self {
        let ch = if t(Channel::Llc) < t(Channel::Hbc) {
            Channel::Llc
        } else {
            Channel::Hbc
        };
        Decision::new(ch, Reason::PredictedFaster)
    }
}

/// The policies the proxy can run (`--policy`).
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyKind {
    Ians,
    ObjSize {
        threshold: u64,
    },
    /// `obj-oracle`, or with `committed` (`obj-oracle:committed`) counting the bytes
    /// already committed to each channel ([`obj_oracle`]).
    ObjOracle {
        committed: bool,
    },
    /// Only the highest-priority requests on the LLC ([`obj_priority`]).
    ObjPriority,
    Passthrough,
}

impl PolicyKind {
    /// Whether the policy learns sizes with the IANS `Range: bytes=0-999` request.
    pub fn discovers_size(&self) -> bool {
        matches!(self, PolicyKind::Ians | PolicyKind::ObjSize { .. })
    }

    /// Decide for an object of known `size`. `tls` says whether a new connection would
    /// need a TLS handshake. obj-oracle and ians share the completion-time model.
    pub fn decide(&self, size: u64, views: &Views, tls: bool) -> Decision {
        match self {
            PolicyKind::Ians => ians::decide(size, views, tls),
            PolicyKind::ObjSize { threshold } => obj_size::decide(size, *threshold),
            PolicyKind::ObjOracle { committed } => obj_oracle::decide(size, views, tls, *committed),
            // Decided from the request headers, not the size (the proxy calls
            // obj_priority::decide directly); without them the default urgency applies.
            PolicyKind::ObjPriority => obj_priority::decide(obj_priority::Priority::default()),
            PolicyKind::Passthrough => passthrough::decide(),
        }
    }

    /// The channel that fetches objects whose size stays unknown, and the probe channel.
    pub fn probe_channel(&self, views: &Views) -> Channel {
        match self {
            PolicyKind::Ians => views.lowest_latency(),
            PolicyKind::ObjSize { .. } => Channel::Llc,
            PolicyKind::ObjOracle { .. } | PolicyKind::ObjPriority | PolicyKind::Passthrough => {
                Channel::Hbc
            }
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyKind::Ians => f.write_str("ians"),
            PolicyKind::ObjSize { threshold } => write!(f, "obj-size:{threshold}"),
            PolicyKind::ObjOracle { committed: false } => f.write_str("obj-oracle"),
            PolicyKind::ObjOracle { committed: true } => f.write_str("obj-oracle:committed"),
            PolicyKind::ObjPriority => f.write_str("obj-priority"),
            PolicyKind::Passthrough => f.write_str("passthrough"),
        }
    }
}

impl FromStr for PolicyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ians" => Ok(PolicyKind::Ians),
            "obj-oracle" => Ok(PolicyKind::ObjOracle { committed: false }),
            "obj-oracle:committed" => Ok(PolicyKind::ObjOracle { committed: true }),
            "obj-priority" => Ok(PolicyKind::ObjPriority),
            "passthrough" => Ok(PolicyKind::Passthrough),
            _ => {
                if let Some(n) = s.strip_prefix("obj-size:") {
                    let threshold = parse_size(n).ok_or_else(|| {
                        format!("policy {s:?}: obj-size threshold {n:?} is not a byte count (e.g. 6000, 6KB, 6KiB)")
                    })?;
                    Ok(PolicyKind::ObjSize { threshold })
                } else {
                    Err(format!(
                        "unknown policy {s:?}; expected one of ians, obj-size:N, obj-oracle, obj-oracle:committed, obj-priority, passthrough"
                    ))
                }
            }
        }
    }
}

/// Parse `6000`, `6KB` (= 6000), `6KiB` (= 6144), `1MB`.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1024,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(min: f64, max_rate: f64, cur: f64, conns: u32) -> ChannelView {
        ChannelView {
            min_srtt_ms: min,
            median_srtt_ms: min,
            max_rate,
            cur_rate: cur,
            conns,
            can_reuse: false,
        }
    }

    #[test]
    fn free_capacity_follows_ians_formula() {
        // Idle link: the whole max rate.
        assert_eq!(view(5.0, 250.0, 0.0, 3).free_capacity(), 250.0);
        // 4 connections, link at half of max: 25000 / (4 * 0.5 + 1) = 8333.33 B/ms.
        let c = view(40.0, 25000.0, 12500.0, 4).free_capacity();
        assert!((c - 25000.0 / 3.0).abs() < 1e-9, "{c}");
        // Fully used by 1 connection: half of it is free.
        assert_eq!(view(5.0, 250.0, 250.0, 1).free_capacity(), 125.0);
        // Never measured and no prior: no capacity.
        assert_eq!(view(5.0, 0.0, 0.0, 0).free_capacity(), 0.0);
    }

    #[test]
    fn parses_policy_names() {
        assert_eq!("ians".parse::<PolicyKind>().unwrap(), PolicyKind::Ians);
        assert_eq!(
            "obj-size:6KB".parse::<PolicyKind>().unwrap(),
            PolicyKind::ObjSize { threshold: 6000 }
        );
        assert_eq!(
            "obj-size:3000".parse::<PolicyKind>().unwrap(),
            PolicyKind::ObjSize { threshold: 3000 }
        );
        assert_eq!(
            "obj-oracle".parse::<PolicyKind>().unwrap(),
            PolicyKind::ObjOracle { committed: false }
        );
        let q = "obj-oracle:committed".parse::<PolicyKind>().unwrap();
        assert_eq!(q, PolicyKind::ObjOracle { committed: true });
        assert_eq!(q.to_string(), "obj-oracle:committed");
        assert_eq!(
            "passthrough".parse::<PolicyKind>().unwrap(),
            PolicyKind::Passthrough
        );
        assert_eq!(
            "obj-priority".parse::<PolicyKind>().unwrap(),
            PolicyKind::ObjPriority
        );
        assert_eq!(PolicyKind::ObjPriority.to_string(), "obj-priority");
        let e = "obj-size:lots".parse::<PolicyKind>().unwrap_err();
        assert!(e.contains("byte count"), "{e}");
        let e = "mptcp".parse::<PolicyKind>().unwrap_err();
        assert!(e.contains("expected one of"), "{e}");
        assert_eq!(
            PolicyKind::ObjSize { threshold: 6000 }.to_string(),
            "obj-size:6000"
        );
    }

    #[test]
    fn lowest_latency_prefers_llc_on_ties() {
        let v = Views {
            hbc: view(5.0, 1.0, 0.0, 0),
            llc: view(5.0, 1.0, 0.0, 0),
            committed: [0.0; 2],
        };
        assert_eq!(v.lowest_latency(), Channel::Llc);
        let v = Views {
            hbc: view(4.0, 1.0, 0.0, 0),
            llc: view(5.0, 1.0, 0.0, 0),
            committed: [0.0; 2],
        };
        assert_eq!(v.lowest_latency(), Channel::Hbc);
    }
}
