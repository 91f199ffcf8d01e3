//! Completion-time model of IANS step 2 (Enghardt et al., "Informed Access Network
//! Selection", Sec. 3: predicted completion time with TCP slow start). Shared by `ians`
//! and `obj-oracle`.
//!
//! Units: ms, bytes, B/ms.

/// First slow-start chunk: initial window of 10 segments × 1448 B MSS.
pub const FIRST_CHUNK: f64 = 14480.0;

/// RTTs before the request can be sent on a new connection: 1 for the TCP handshake,
/// plus 2 for TLS (as the IANS policy counts it, "2·SRTT more for TLS").
pub fn setup_rtts(tls: bool) -> f64 {
    if tls {
        3.0
    } else {
        1.0
    }
}

/// Predicted time (ms) to fetch `size` bytes over a channel with round-trip `rtt_ms` and
/// free capacity `cap` (B/ms).
///
/// * reuse of an open connection: `rtt + size / cap`;
/// * new connection: the setup RTTs, then slow-start rounds — one RTT each, starting with
///   a 14480 B chunk that doubles per round — while bytes remain and the chunk is below
///   half of `0.8 × cap × rtt` (i.e. the window has not yet filled 80% of the path);
///   the rest at `min(chunk / rtt, cap)`. When no slow-start round happens (the first
///   chunk already fills the path), the request still costs one RTT.
///
/// A channel without capacity never completes (`f64::INFINITY`).
pub fn completion_ms(size: u64, rtt_ms: f64, cap: f64, reuse: bool, tls: bool) -> f64 {
    if cap <= 0.0 || !cap.is_finite() {
        return f64::INFINITY;
    }
    let size = size as f64;
    if reuse {
        return rtt_ms + size / cap;
    }
    let mut t = setup_rtts(tls) * rtt_ms;
    let mut remaining = size;
    let mut chunk = FIRST_CHUNK;
    let half_bdp80 = 0.8 * cap * rtt_ms / 2.0;
    let mut rounds = 0u32;
    while remaining > 0.0 && chunk < half_bdp80 {
        t += rtt_ms;
        remaining -= chunk.min(remaining);
        chunk *= 2.0;
        rounds += 1;
    }
    if rounds == 0 {
        t += rtt_ms;
    }
    if remaining > 0.0 {
        let rate = if rtt_ms > 0.0 {
            (chunk / rtt_ms).min(cap)
        } else {
            cap
        };
        t += remaining / rate;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const HBC_CAP: f64 = 25_000.0; // 200 Mbit/s
    const LLC_CAP: f64 = 250.0; // 2 Mbit/s

    #[test]
    fn hand_computed_completion_times() {
        // (size B, rtt ms, capacity B/ms, reuse, tls, predicted ms)
        let cases = [
            // Reuse: rtt + transfer. 40 + 100000/25000 = 44 ms; 5 + 100000/250 = 405 ms.
            (100_000, 40.0, HBC_CAP, true, true, 44.0),
            (100_000, 5.0, LLC_CAP, true, true, 405.0),
            // New connection on the HBC: 40 ms, 25000 B/ms: half of 80% BDP = 400000 B, so
            // slow start runs to the end. setup 3 RTT = 120; rounds 14480 / 28960 / 57920
            // cover 100000 B → 3 RTT → 240 ms.
            (100_000, 40.0, HBC_CAP, false, true, 240.0),
            // Without TLS: 1 RTT setup → 160 ms.
            (100_000, 40.0, HBC_CAP, false, false, 160.0),
            // 1000 B: setup 120 + one round 40 = 160 ms.
            (1000, 40.0, HBC_CAP, false, true, 160.0),
            // New connection on the LLC is capacity-bound: 5 ms, 250 B/ms: half of 80% BDP
            // = 500 B < 14480, no slow-start round:
            // setup 15 + request 5 + 100000 / min(14480/5, 250) = 400 → 420 ms.
            (100_000, 5.0, LLC_CAP, false, true, 420.0),
            // 6000 B: 15 + 5 + 24 = 44 ms.
            (6000, 5.0, LLC_CAP, false, true, 44.0),
            // Slow start hands over to the rate limit: 20 ms, 2500 B/ms (20 Mbit/s):
            // threshold 0.8*2500*20/2 = 20000 B.
            // Round 1: chunk 14480 < 20000 → 20 ms, 85520 left, chunk 28960 ≥ 20000 → stop.
            // Rest: 85520 / min(28960/20 = 1448, 2500) = 59.0608... ms.
            // Total: setup 20 (no TLS) + 20 + 85520/1448.
            (
                100_000,
                20.0,
                2500.0,
                false,
                false,
                40.0 + 85_520.0 / 1448.0,
            ),
        ];
        for (size, rtt, cap, reuse, tls, want) in cases {
            let got = completion_ms(size, rtt, cap, reuse, tls);
            assert!(
                (got - want).abs() < 1e-9,
                "{size} B, {rtt} ms, {cap} B/ms, reuse {reuse}, tls {tls}: {got} ms, not {want}"
            );
        }
    }

    #[test]
    fn no_capacity_never_completes() {
        assert!(completion_ms(10, 5.0, 0.0, true, false).is_infinite());
    }
}
