//! `pkt-state` (HotMobile'21, Algorithm 1): a packet goes on the LLC iff it is
//! smaller than the MTU *and* the previous packet of its flow was smaller than
//! the MTU. Full-size packets mark a bulk phase; the first small packet after
//! one (the tail of a burst) stays on the HBC so it does not overtake it.

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `pkt-state`: HotMobile'21 Algorithm 1.
pub struct PktState;

impl Policy for PktState {
    fn spec(&self) -> String {
        "pkt-state".into()
    }

    fn decide(&mut self, pkt: &PacketInfo, _: &[u8], flow: &mut FlowState, ctx: &Ctx) -> Decision {
        // flow.prev_size is maintained by the steerer for every policy.
        if pkt.ip_len < ctx.mtu && flow.prev_size < ctx.mtu {
            Decision::new(Channel::Llc, Outcome::SmallAfterSmall)
        } else {
            Decision::new(Channel::Hbc, Outcome::LargeOrAfterLarge)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::Direction;

    #[test]
    fn hotmobile21_algorithm1_sequence() {
        // MTU 1456: sequence small, full, small(after full), small -> L, H, H, L.
        let c = ctx(0, Direction::Downlink);
        let mut p = PktState;
        let mut f = flow();
        let mut run = |len: usize| {
            let pr = udp(1, 2, len);
            let d = p.decide(&pr.0, &pr.1, &mut f, &c).channel;
            f.prev_size = len; // what the steerer does after each decision
            d
        };
        assert_eq!(run(100), Channel::Llc);
        assert_eq!(run(1456), Channel::Hbc);
        assert_eq!(run(100), Channel::Hbc);
        assert_eq!(run(1455), Channel::Llc);
    }
}
