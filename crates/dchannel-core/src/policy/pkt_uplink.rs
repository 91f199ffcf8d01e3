//! `pkt-uplink`: client-to-server packets on the LLC, server-to-client on the
//! HBC (requests are small and latency-bound, responses are bulk).

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Direction;

/// `pkt-uplink`: uplink on the LLC, downlink on the HBC.
pub fn pkt_uplink(_: &PacketInfo, _: &[u8], _: &FlowState, ctx: &Ctx) -> Decision {
    Decision::llc_if(
        ctx.dir == Direction::Uplink,
        Outcome::Uplink,
        Outcome::Downlink,
    )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::Channel;

    #[test]
    fn by_direction() {
        let big = udp(1, 2, 1400);
        let (up, down) = (ctx(0, Direction::Uplink), ctx(0, Direction::Downlink));
        assert_steers("pkt-uplink", &up, &[(big.clone(), Channel::Llc)]);
        assert_steers("pkt-uplink", &down, &[(big, Channel::Hbc)]);
    }
}
