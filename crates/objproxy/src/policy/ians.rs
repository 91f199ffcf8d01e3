//! IANS — the Socket Intents threshold policy (Enghardt et al., "Informed Access Network
//! Selection: The Benefits of Socket Intents for Web Performance", policy "threshold").
//!
//! Step 1, on the channel with the lowest minimum SRTT:
//!   latency part  = SRTT if a connection can be reused, else 2·SRTT, plus 2·SRTT for TLS;
//!   capacity part = size / free capacity;
//!   latency part > capacity part → that channel (the object is latency-dominated).
//! Step 2, otherwise: the smallest predicted completion time ([`super::predict`]) with each
//! channel's median SRTT and free capacity.

use super::predict::completion_ms;
use super::{Channel, Decision, Reason, Views};

/// Step 1's latency part (ms) for the lowest-latency channel.
pub fn latency_part_ms(min_srtt_ms: f64, reuse: bool, tls: bool) -> f64 {
    // Without reuse: SYN/SYN-ACK + request/response = 2 RTT; a new TLS session adds 2 RTT.
    let base = if reuse {
        min_srtt_ms
    } else {
        2.0 * min_srtt_ms
    };
    let tls_part = if tls && !reuse {
        2.0 * min_srtt_ms
    } else {
        0.0
    };
    base + tls_part
}

/// The IANS decision for an object of `size` bytes.
pub fn decide(size: u64, views: &Views, tls: bool) -> Decision {
    let fast = views.lowest_latency();
    let v = views.get(fast);
    let latency = latency_part_ms(v.min_srtt_ms, v.can_reuse, tls);
    let cap = v.free_capacity();
    let capacity = if cap > 0.0 {
        size as f64 / cap
    } else {
        f64::INFINITY
    };
    if latency > capacity {
        return Decision::new(fast, Reason::LatencyDominated);
    }
    let t = |ch: Channel| {
        let v = views.get(ch);
        completion_ms(size, v.median_srtt_ms, v.free_capacity(), v.can_reuse, tls)
    };
    Decision::predicted_faster(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ChannelView;
    use Channel::{Hbc, Llc};
    use Reason::{LatencyDominated, PredictedFaster};

    /// The paper's setting: eMBB 40 ms / 200 Mbit/s (25000 B/ms), URLLC 5 ms / 2 Mbit/s
    /// (250 B/ms), both idle.
    fn paper(reuse_hbc: bool, reuse_llc: bool) -> Views {
        Views {
            hbc: ChannelView {
                min_srtt_ms: 40.0,
                median_srtt_ms: 40.0,
                max_rate: 25_000.0,
                cur_rate: 0.0,
                conns: 0,
                can_reuse: reuse_hbc,
            },
            llc: ChannelView {
                min_srtt_ms: 5.0,
                median_srtt_ms: 5.0,
                max_rate: 250.0,
                cur_rate: 0.0,
                conns: 0,
                can_reuse: reuse_llc,
            },
            committed: [0.0; 2],
        }
    }

    /// Asserts the decision (channel, reason) for `size` bytes over TLS.
    fn assert_decides(size: u64, views: &Views, (ch, reason): (Channel, Reason)) {
        let d = decide(size, views, true);
        assert_eq!(d, Decision::new(ch, reason), "{size} B");
    }

    #[test]
    fn latency_part_counts_handshakes() {
        assert_eq!(latency_part_ms(5.0, true, true), 5.0);
        assert_eq!(latency_part_ms(5.0, false, false), 10.0);
        assert_eq!(latency_part_ms(5.0, false, true), 20.0);
    }

    #[test]
    fn step1_small_object_new_tls_connection_goes_llc() {
        // latency 2·5 + 2·5 = 20 ms > capacity 500/250 = 2 ms → LLC at step 1.
        assert_decides(500, &paper(false, false), (Llc, LatencyDominated));
        // Reused: latency 5 ms > 1000/250 = 4 ms → still step 1.
        assert_decides(1000, &paper(true, true), (Llc, LatencyDominated));
    }

    #[test]
    fn step2_medium_object_reused_goes_llc() {
        // Step 1: latency 5 < capacity 6000/250 = 24 → step 2.
        // LLC 5 + 24 = 29 ms < HBC 40 + 0.24 = 40.24 ms → LLC.
        assert_decides(6000, &paper(true, true), (Llc, PredictedFaster));
        // 2 Mbit/s ≈ 250 B/ms and a 35 ms RTT gap: 5 + s/250 > 40 + s/25000 above 8838 B.
        assert_decides(9000, &paper(true, true), (Hbc, PredictedFaster));
    }

    #[test]
    fn step2_new_connections_shift_the_crossover() {
        // 50000 B, no reuse, TLS: LLC 15 + 5 + 200 = 220 ms; HBC 120 + 3 rounds = 240 ms.
        assert_decides(50_000, &paper(false, false), (Llc, PredictedFaster));
        // 60000 B: LLC 260 ms; HBC still 240 ms (3 rounds cover 101360 B) → HBC.
        assert_decides(60_000, &paper(false, false), (Hbc, PredictedFaster));
        // Reuse on the HBC only: 60000 B → HBC 40 + 2.4 = 42.4 ms ≪ LLC.
        assert_decides(60_000, &paper(true, false), (Hbc, PredictedFaster));
    }

    #[test]
    fn busy_llc_loses_its_capacity() {
        // LLC at full rate with 3 connections: free = 250 / (3·1 + 1) = 62.5 B/ms.
        // 3000 B reused: step 1 latency 5 < 3000/62.5 = 48 → step 2:
        // LLC 5 + 48 = 53 ms > HBC 40 + 0.12 = 40.12 ms → HBC.
        let mut v = paper(true, true);
        v.llc.cur_rate = 250.0;
        v.llc.conns = 3;
        assert_decides(3000, &v, (Hbc, PredictedFaster));
        // Idle LLC, same object: 5 + 12 = 17 ms → LLC.
        assert_decides(3000, &paper(true, true), (Llc, PredictedFaster));
    }

    #[test]
    fn step1_runs_on_whichever_channel_is_faster() {
        // The "HBC" measured faster (min 3 ms) than the LLC (5 ms): step 1 looks at the HBC.
        let mut v = paper(true, true);
        v.hbc.min_srtt_ms = 3.0;
        v.hbc.median_srtt_ms = 3.0;
        // latency 3 > 100/25000 → HBC at step 1.
        assert_decides(100, &v, (Hbc, LatencyDominated));
    }
}
