//! `obj-oracle` — the NSDI'23 paper's Obj-steering: an object goes on the LLC whenever its
//! predicted fetch time there is smaller, with the size known in advance (from the corpus
//! manifest). The upper bound of object-level steering: no discovery request, no guessing.
//!
//! `obj-oracle:committed` adds what the prediction above leaves out, the bytes already
//! committed to each channel (objects decided for it that have not arrived yet):
//!
//! ```text
//! t(ch) = completion_ms(size, rtt, free capacity, reuse, tls) + committed(ch) / max_rate(ch)
//! ```
//!
//! Without it, when Chromium asks for fifty objects at once each decision sees the same
//! idle 2 Mbit/s LLC and sends it all of them (docs/results.md, "Object-level schemes":
//! the LLC's sRTT rose to 3x its minimum in 15 of 36 MM-S loads). This is the object-level
//! counterpart of Algorithm 1's virtual LLC queue.

use super::predict::completion_ms;
use super::{Channel, Decision, Views};

pub fn decide(size: u64, views: &Views, tls: bool, committed: bool) -> Decision {
    let t = |ch: Channel| {
        let v = views.get(ch);
        let own = completion_ms(size, v.median_srtt_ms, v.free_capacity(), v.can_reuse, tls);
        let queued = views.committed[ch.index()];
        if committed && queued > 0.0 {
            own + if v.max_rate > 0.0 {
                queued / v.max_rate
            } else {
                f64::INFINITY
            }
        } else {
            own
        }
    };
    Decision::predicted_faster(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ChannelView;

    fn v(rtt: f64, rate: f64, reuse: bool) -> ChannelView {
        ChannelView {
            min_srtt_ms: rtt,
            median_srtt_ms: rtt,
            max_rate: rate,
            cur_rate: 0.0,
            conns: 0,
            can_reuse: reuse,
        }
    }

    fn paper(committed: [f64; 2]) -> Views {
        Views {
            hbc: v(40.0, 25_000.0, true),
            llc: v(5.0, 250.0, true),
            committed,
        }
    }

    #[test]
    fn picks_the_faster_prediction() {
        let views = paper([0.0; 2]);
        // 8000 B: LLC 5 + 32 = 37 < HBC 40.32 → LLC.
        assert_eq!(decide(8000, &views, true, false).channel, Channel::Llc);
        // 9000 B: LLC 41 > HBC 40.36 → HBC.
        assert_eq!(decide(9000, &views, true, false).channel, Channel::Hbc);
        // Unlike IANS there is no step 1: a 100 B object on a reused LLC is 5.4 ms vs 40 ms.
        assert_eq!(decide(100, &views, true, false).channel, Channel::Llc);
    }

    #[test]
    fn committed_bytes_queue_the_next_object() {
        // 5000 B already on their way over the LLC: a 3000 B object there takes
        // 5 + 3000/250 + 5000/250 = 37 ms < HBC 40.12 ms → LLC; with 6000 B committed
        // it takes 41 ms > 40.12 → HBC. Plain obj-oracle ignores them: 17 ms → LLC.
        let views = paper([0.0, 5000.0]);
        assert_eq!(decide(3000, &views, true, true).channel, Channel::Llc);
        let views = paper([0.0, 6000.0]);
        assert_eq!(decide(3000, &views, true, true).channel, Channel::Hbc);
        assert_eq!(decide(3000, &views, true, false).channel, Channel::Llc);
        // Bytes committed to the HBC delay it too: 1 MB there = 40 ms more, so the
        // 9000 B object of the test above now goes on the LLC (41 < 80.36).
        let views = paper([1_000_000.0, 0.0]);
        assert_eq!(decide(9000, &views, true, true).channel, Channel::Llc);
    }
}
