//! `pkt-state` (HotMobile'21, Algorithm 1): a packet goes on the LLC iff it is
//! smaller than the MTU *and* the previous packet of its flow was smaller than
//! the MTU. Full-size packets mark a bulk phase; the first small packet after
//! one (the tail of a burst) stays on the HBC so it does not overtake it.

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;

/// `pkt-state`: HotMobile'21 Algorithm 1.
pub fn pkt_state(pkt: &PacketInfo, _: &[u8], flow: &FlowState, ctx: &Ctx) -> Decision {
    // flow.prev_size is maintained by the steerer for every policy.
    let small_after_small = pkt.ip_len < ctx.mtu && flow.prev_size < ctx.mtu;
    Decision::llc_if(
        small_after_small,
        Outcome::SmallAfterSmall,
        Outcome::LargeOrAfterLarge,
    )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::{Channel, Direction};

    #[test]
    fn hotmobile21_algorithm1_sequence() {
        // MTU 1456: sequence small, full, small(after full), small -> L, H, H, L.
        let c = ctx(0, Direction::Downlink);
        let mut f = flow();
        let mut run = |len: usize| {
            let pr = udp(1, 2, len);
            let d = pkt_state(&pr.0, &pr.1, &f, &c).channel;
            f.prev_size = len; // what the steerer does after each decision
            d
        };
        assert_eq!(run(100), Channel::Llc);
        assert_eq!(run(1456), Channel::Hbc);
        assert_eq!(run(100), Channel::Hbc);
        assert_eq!(run(1455), Channel::Llc);
    }
}
