//! Per-device limit counters (issue 37, "Isolation between devices"): what
//! the reorder buffer and the sender's flow table hold for one peer, and how
//! often that peer hit a limit or lost state to a gateway-wide cap. The
//! receive half publishes the reorder side with its other estimates (every
//! `PUBLISH_PERIOD`), the send half the flow-table side at each flow expiry;
//! the stats and metrics read them (relaxed atomics: counters, not a snapshot).
//! The device's LLC share (rule (b) of crate::llc_share) is a limit too: the
//! send half publishes what its token bucket admitted and diverted.

use crate::flow_table::FlowTableStats;
use crate::llc_share::ShareStats;
use crate::reorder::DeviceReorderStats;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One device's limit counters as last published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceLimitStats {
    /// The reorder buffer's flows, memory, limit hits and evictions.
    pub reorder: DeviceReorderStats,
    /// Flows in the sender's flow table for this peer.
    pub sender_flows: u64,
    /// The sender's flow-table counters for this peer (`forced_evictions`:
    /// its own `--flow-capacity`; `gateway_evictions`: `--gateway-flows`).
    pub sender: FlowTableStats,
    /// The device's LLC share: packets and bytes admitted to the LLC and
    /// diverted to the HBC (all 0 without `--llc-capacity`/`--llc-share-rate`).
    pub llc_share: ShareStats,
}

/// The atomics behind [`DeviceLimitStats`].
#[derive(Default)]
pub struct DeviceLimits {
    reorder_flows: AtomicU64,
    reorder_memory_bytes: AtomicU64,
    reorder_device_flow_limit_evictions: AtomicU64,
    reorder_gateway_flow_limit_evictions: AtomicU64,
    reorder_device_memory_limit_hits: AtomicU64,
    reorder_gateway_memory_limit_hits: AtomicU64,
    sender_flows: AtomicU64,
    sender_created: AtomicU64,
    sender_idle_evictions: AtomicU64,
    sender_forced_evictions: AtomicU64,
    sender_gateway_evictions: AtomicU64,
    llc_share_packets: AtomicU64,
    llc_share_bytes: AtomicU64,
    llc_share_diverted_packets: AtomicU64,
    llc_share_diverted_bytes: AtomicU64,
}

impl DeviceLimits {
    /// The counters as last published.
    pub fn get(&self) -> DeviceLimitStats {
        let l = |a: &AtomicU64| a.load(Relaxed);
        DeviceLimitStats {
            reorder: DeviceReorderStats {
                flows: l(&self.reorder_flows) as usize,
                memory_bytes: l(&self.reorder_memory_bytes) as usize,
                device_flow_limit_evictions: l(&self.reorder_device_flow_limit_evictions),
                gateway_flow_limit_evictions: l(&self.reorder_gateway_flow_limit_evictions),
                device_memory_limit_hits: l(&self.reorder_device_memory_limit_hits),
                gateway_memory_limit_hits: l(&self.reorder_gateway_memory_limit_hits),
            },
            sender_flows: l(&self.sender_flows),
            sender: FlowTableStats {
                created: l(&self.sender_created),
                idle_evictions: l(&self.sender_idle_evictions),
                forced_evictions: l(&self.sender_forced_evictions),
                gateway_evictions: l(&self.sender_gateway_evictions),
            },
            llc_share: ShareStats {
                llc_packets: l(&self.llc_share_packets),
                llc_bytes: l(&self.llc_share_bytes),
                diverted_packets: l(&self.llc_share_diverted_packets),
                diverted_bytes: l(&self.llc_share_diverted_bytes),
            },
        }
    }

    pub(crate) fn publish_reorder(&self, r: &DeviceReorderStats) {
        self.reorder_flows.store(r.flows as u64, Relaxed);
        self.reorder_memory_bytes
            .store(r.memory_bytes as u64, Relaxed);
        self.reorder_device_flow_limit_evictions
            .store(r.device_flow_limit_evictions, Relaxed);
        self.reorder_gateway_flow_limit_evictions
            .store(r.gateway_flow_limit_evictions, Relaxed);
        self.reorder_device_memory_limit_hits
            .store(r.device_memory_limit_hits, Relaxed);
        self.reorder_gateway_memory_limit_hits
            .store(r.gateway_memory_limit_hits, Relaxed);
    }

    pub(crate) fn publish_flows(&self, flows: usize, s: &FlowTableStats) {
        self.sender_flows.store(flows as u64, Relaxed);
        self.sender_created.store(s.created, Relaxed);
        self.sender_idle_evictions.store(s.idle_evictions, Relaxed);
        self.sender_forced_evictions
            .store(s.forced_evictions, Relaxed);
        self.sender_gateway_evictions
            .store(s.gateway_evictions, Relaxed);
    }

    pub(crate) fn publish_llc_share(&self, s: &ShareStats) {
        self.llc_share_packets.store(s.llc_packets, Relaxed);
        self.llc_share_bytes.store(s.llc_bytes, Relaxed);
        self.llc_share_diverted_packets
            .store(s.diverted_packets, Relaxed);
        self.llc_share_diverted_bytes
            .store(s.diverted_bytes, Relaxed);
    }
}
