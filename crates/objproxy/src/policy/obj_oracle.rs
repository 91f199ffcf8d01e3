//! `obj-oracle` — the NSDI'23 paper's Obj-steering: an object goes on the LLC whenever its
//! predicted fetch time there is smaller, with the size known in advance (from the corpus
//! manifest). The upper bound of object-level steering: no discovery request, no guessing.

use super::predict::completion_ms;
use super::{Channel, Decision, Reason, Views};

pub fn decide(size: u64, views: &Views, tls: bool) -> Decision {
    let t = |ch: Channel| {
        let v = views.get(ch);
        completion_ms(size, v.median_srtt_ms, v.free_capacity(), v.can_reuse, tls)
    };
    let ch = if t(Channel::Llc) < t(Channel::Hbc) {
        Channel::Llc
    } else {
        Channel::Hbc
    };
    Decision::new(ch, Reason::PredictedFaster)
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

    #[test]
    fn picks_the_faster_prediction() {
        let views = Views {
            hbc: v(40.0, 25_000.0, true),
            llc: v(5.0, 250.0, true),
        };
        // 8000 B: LLC 5 + 32 = 37 < HBC 40.32 → LLC.
        assert_eq!(decide(8000, &views, true).channel, Channel::Llc);
        // 9000 B: LLC 41 > HBC 40.36 → HBC.
        assert_eq!(decide(9000, &views, true).channel, Channel::Hbc);
        // Unlike IANS there is no step 1: a 100 B object on a reused LLC is 5.4 ms vs 40 ms.
        assert_eq!(decide(100, &views, true).channel, Channel::Llc);
    }
}
