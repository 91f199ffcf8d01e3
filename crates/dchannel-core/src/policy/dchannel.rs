//! `dchannel`: NSDI'23 Algorithm 1 (reward/cost steering), exactly:
//!
//! ```text
//! c_llc  = now + llc_prop + (size + queue_llc) / band_llc
//! c_hbc  = now + hbc_prop
//! reward = c_hbc - max(prev_c, c_llc)
//! cost   = (size + queue_llc) / band_llc
//! if reward > alpha * cost: LLC, prev_c = max(prev_c, c_llc)
//! else:                     HBC, prev_c = max(prev_c, c_hbc)
//! ```
//!
//! `size` is the packet's wire size (IP length + per-packet overhead), since
//! that is what occupies the LLC; `*_prop` are one-way delays (RTT/2).

use super::{estimate, steer, Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `dchannel`: NSDI'23 Algorithm 1 with weight `alpha` on the cost.
pub struct DChannel {
    alpha: f64,
}

impl DChannel {
    /// Algorithm 1 with LLC iff reward > `alpha` * cost.
    pub fn new(alpha: f64) -> DChannel {
        DChannel { alpha }
    }
}

impl Policy for DChannel {
    fn spec(&self) -> String {
        format!("dchannel:alpha={}", self.alpha)
    }

    fn decide(&mut self, pkt: &PacketInfo, _: &[u8], flow: &mut FlowState, ctx: &Ctx) -> Decision {
        let Some(e) = estimate(pkt.ip_len + ctx.overhead, flow.prev_c, ctx) else {
            return Decision::new(Channel::Hbc, Outcome::NoEstimate);
        };
        steer(flow, e.reward > self.alpha * e.cost, e)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::{Direction, MS};

    // Test setting (NSDI'23 §4.1 footnote): LLC 2 Mbit/s = 250 B/ms, one-way
    // delays HBC 20 ms / LLC 5 ms, so the gap is 15 ms and a lone packet's
    // reward 15 ms - (size + queue) / 250 B/ms turns negative at 3750 bytes.

    fn at(queue: f64) -> Ctx {
        let mut c = ctx(100 * MS, Direction::Downlink);
        c.llc_queue = queue;
        c
    }

    #[test]
    fn reward_turns_negative_near_3750_bytes_with_alpha_zero() {
        let mut p = DChannel::new(0.0);
        // 700 B packet + 3000 B queued = 3700 B: cost 14.8 ms, reward +0.2 ms -> LLC
        let d = decide(&mut p, &udp(1, 2, 700), &at(3000.0));
        assert_eq!(d.channel, Channel::Llc);
        let e = d.estimate.unwrap();
        assert!((e.cost - 14.8 * MS as f64).abs() < 1.0);
        assert!((e.reward - 0.2 * MS as f64).abs() < 1.0);
        // 800 B + 3000 B = 3800 B: cost 15.2 ms, reward -0.2 ms -> HBC
        let d = decide(&mut p, &udp(1, 2, 800), &at(3000.0));
        assert_eq!(d.channel, Channel::Hbc);
        assert!((d.estimate.unwrap().reward + 0.2 * MS as f64).abs() < 1.0);
    }

    #[test]
    fn alpha_075_threshold_is_2143_bytes() {
        // reward > 0.75 cost  <=>  15 ms > 1.75 x / 250  <=>  x < 2142.86 B
        let cases = [
            (udp(1, 2, 140), Channel::Llc),
            (udp(1, 2, 145), Channel::Hbc),
        ];
        assert_steers("dchannel:alpha=0.75", &at(2000.0), &cases);
    }

    #[test]
    fn prev_c_keeps_a_flow_behind_its_earlier_hbc_packet() {
        // A 1400 B packet at t=100 ms behind 1000 queued bytes: 2400 B > 2143 B
        // (the alpha=0.75 threshold above) -> HBC, prev_c = c_hbc.
        let mut p = DChannel::new(0.75);
        let mut f = flow();
        let big = udp(1, 2, 1400);
        let d = p.decide(&big.0, &big.1, &mut f, &at(1000.0));
        assert_eq!(d.channel, Channel::Hbc);
        assert_eq!(f.prev_c, (120 * MS) as f64); // c_hbc = 100 + 20 ms

        // A lone 100 B ACK 1 ms later with an empty queue: c_llc = 101 + 5 + 0.4
        // = 106.4 ms but prev_c = 120 ms, so reward = 121 - 120 = 1 ms and
        // cost = 0.4 ms: 1 > 0.3 -> LLC, prev_c stays 120 ms.
        let mut c = at(0.0);
        c.now = 101 * MS;
        let small = udp(1, 2, 100);
        let d = p.decide(&small.0, &small.1, &mut f, &c);
        assert_eq!(d.channel, Channel::Llc);
        assert!((d.estimate.unwrap().reward - (MS as f64)).abs() < 1.0);
        assert_eq!(f.prev_c, (120 * MS) as f64);
        // Same packet right after the big one (t=100 ms): reward = 120-120 = 0
        // which is not > 0.3 ms -> HBC: it could not arrive earlier anyway.
        let mut f2 = f.clone();
        let c0 = at(0.0);
        assert_eq!(
            p.decide(&small.0, &small.1, &mut f2, &c0).channel,
            Channel::Hbc
        );
    }

    #[test]
    fn overhead_counts_towards_size() {
        // alpha 0: threshold 3750 B wire. 3700 B IP + 60 B overhead = 3760 -> HBC.
        let mut p = DChannel::new(0.0);
        let mut c = at(0.0);
        c.overhead = 60;
        let mut f = flow();
        let mut info = udp(1, 2, 100).0;
        info.ip_len = 3700;
        assert_eq!(p.decide(&info, &[], &mut f, &c).channel, Channel::Hbc);
        c.overhead = 40;
        let mut f = flow();
        assert_eq!(p.decide(&info, &[], &mut f, &c).channel, Channel::Llc);
    }

    #[test]
    fn without_estimates_goes_hbc() {
        let mut p = DChannel::new(0.75);
        let mut c = at(0.0);
        c.llc_owd = None;
        let d = decide(&mut p, &udp(1, 2, 60), &c);
        assert_eq!((d.channel, d.outcome), (Channel::Hbc, Outcome::NoEstimate));
    }
}
