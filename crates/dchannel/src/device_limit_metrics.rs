//! Per-device limit counters in the stats JSON (`peers[].limits`) and the
//! Prometheus metrics (`dchannel_device_*{peer=...}`): what the reorder buffer
//! and the sender's flow table hold for each device, and how often the device
//! hit its own limit or lost state to a gateway-wide cap (docs/reliability.md,
//! "Isolation between devices"), and what its LLC share (`--llc-share
//! token-bucket`, docs/llc_sharing.md) admitted to the LLC and diverted to the
//! HBC. One list, both outputs.

use dchannel_core::endpoint::DeviceLimitStats;
use serde_json::{Map, Value};

/// One per-device value: its key in `peers[].limits`, its Prometheus metric
/// (`dchannel_<prom>{peer="<name>"}`), kind, help and where it comes from.
pub struct DeviceMetric {
    pub json: &'static str,
    pub prom: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    pub read: fn(&DeviceLimitStats) -> u64,
}

/// Every per-device limit value.
pub const DEVICE_METRICS: &[DeviceMetric] = &[
    DeviceMetric {
        json: "reorder_flows",
        prom: "device_reorder_flows",
        kind: "gauge",
        help: "Reorder-buffer flows of the device",
        read: |d| d.reorder.flows as u64,
    },
    DeviceMetric {
        json: "reorder_memory_bytes",
        prom: "device_reorder_memory_bytes",
        kind: "gauge",
        help: "Reorder-buffer memory of the device: held buffers (capacity) and gaps",
        read: |d| d.reorder.memory_bytes as u64,
    },
    DeviceMetric {
        json: "reorder_device_flow_limit_evictions",
        prom: "device_reorder_device_flow_limit_evictions_total",
        kind: "counter",
        help: "Reorder flows of the device evicted at its own limit (--reorder-device-flows)",
        read: |d| d.reorder.device_flow_limit_evictions,
    },
    DeviceMetric {
        json: "reorder_gateway_flow_limit_evictions",
        prom: "device_reorder_gateway_flow_limit_evictions_total",
        kind: "counter",
        help: "Reorder flows of the device evicted at the gateway-wide limit (--reorder-flows), the device having the most",
        read: |d| d.reorder.gateway_flow_limit_evictions,
    },
    DeviceMetric {
        json: "reorder_device_memory_limit_hits",
        prom: "device_reorder_device_memory_limit_hits_total",
        kind: "counter",
        help: "Times the device reached its reorder memory limit (--reorder-device-bytes) and released early",
        read: |d| d.reorder.device_memory_limit_hits,
    },
    DeviceMetric {
        json: "reorder_gateway_memory_limit_hits",
        prom: "device_reorder_gateway_memory_limit_hits_total",
        kind: "counter",
        help: "Times the gateway reached its reorder memory limit (--reorder-total-bytes) and this device, holding the most, released early",
        read: |d| d.reorder.gateway_memory_limit_hits,
    },
    DeviceMetric {
        json: "sender_flows",
        prom: "device_sender_flows",
        kind: "gauge",
        help: "Flows in the sender's flow table for the device",
        read: |d| d.sender_flows,
    },
    DeviceMetric {
        json: "sender_idle_evictions",
        prom: "device_sender_idle_evictions_total",
        kind: "counter",
        help: "Sender flows of the device evicted for being idle",
        read: |d| d.sender.idle_evictions,
    },
    DeviceMetric {
        json: "sender_flow_limit_evictions",
        prom: "device_sender_flow_limit_evictions_total",
        kind: "counter",
        help: "Sender flows of the device evicted at its own limit (--flow-capacity)",
        read: |d| d.sender.forced_evictions,
    },
    DeviceMetric {
        json: "sender_gateway_flow_limit_evictions",
        prom: "device_sender_gateway_flow_limit_evictions_total",
        kind: "counter",
        help: "Sender flows of the device evicted at the gateway-wide limit (--gateway-flows), the device having the most",
        read: |d| d.sender.gateway_evictions,
    },
    DeviceMetric {
        json: "llc_share_packets",
        prom: "device_llc_share_packets_total",
        kind: "counter",
        help: "Packets the policy put on the LLC that the device's LLC share admitted (--llc-share token-bucket)",
        read: |d| d.llc_share.llc_packets,
    },
    DeviceMetric {
        json: "llc_share_bytes",
        prom: "device_llc_share_bytes_total",
        kind: "counter",
        help: "Outer bytes of the packets the device's LLC share admitted to the LLC",
        read: |d| d.llc_share.llc_bytes,
    },
    DeviceMetric {
        json: "llc_share_diverted_packets",
        prom: "device_llc_share_diverted_packets_total",
        kind: "counter",
        help: "Packets the policy put on the LLC that were over the device's LLC share and went on the HBC",
        read: |d| d.llc_share.diverted_packets,
    },
    DeviceMetric {
        json: "llc_share_diverted_bytes",
        prom: "device_llc_share_diverted_bytes_total",
        kind: "counter",
        help: "Outer bytes of the packets over the device's LLC share sent on the HBC",
        read: |d| d.llc_share.diverted_bytes,
    },
];

/// `peers[].limits` of one device.
pub fn to_json(d: &DeviceLimitStats) -> Value {
    let m: Map<String, Value> = DEVICE_METRICS
        .iter()
        .map(|m| (m.json.into(), Value::from((m.read)(d))))
        .collect();
    Value::Object(m)
}
