//! `pkt-uplink`: client-to-server packets on the LLC, server-to-client on the
//! HBC (requests are small and latency-bound, responses are bulk).

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::{Channel, Direction};

/// `pkt-uplink`: uplink on the LLC, downlink on the HBC.
pub struct PktUplink;

impl Policy for PktUplink {
    fn spec(&self) -> String {
        "pkt-uplink".into()
    }

    fn decide(&mut self, _: &PacketInfo, _: &[u8], _: &mut FlowState, ctx: &Ctx) -> Decision {
        match ctx.dir {
            Direction::Uplink => Decision::new(Channel::Llc, Outcome::Uplink),
            Direction::Downlink => Decision::new(Channel::Hbc, Outcome::Downlink),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn by_direction() {
        let mut p = PktUplink;
        let big = udp(1, 2, 1400);
        assert_eq!(
            decide(&mut p, &big, &ctx(0, Direction::Uplink)).channel,
            Channel::Llc
        );
        assert_eq!(
            decide(&mut p, &big, &ctx(0, Direction::Downlink)).channel,
            Channel::Hbc
        );
    }
}
