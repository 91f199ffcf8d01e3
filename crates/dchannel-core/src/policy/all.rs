//! `all-hbc` and `all-llc`: every packet on one channel (the eMBB-only and
//! URLLC-only baselines).

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `all-hbc`: every packet on the HBC.
pub fn all_hbc(_: &PacketInfo, _: &[u8], _: &FlowState, _: &Ctx) -> Decision {
    Decision::new(Channel::Hbc, Outcome::Fixed)
}

/// `all-llc`: every packet on the LLC.
pub fn all_llc(_: &PacketInfo, _: &[u8], _: &FlowState, _: &Ctx) -> Decision {
    Decision::new(Channel::Llc, Outcome::Fixed)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::Direction;

    #[test]
    fn every_packet_on_its_channel() {
        let up = ctx(0, Direction::Uplink);
        let hbc = [
            (tcp(0x02, &[]), Channel::Hbc),
            (udp(1, 53, 60), Channel::Hbc),
        ];
        assert_steers("all-hbc", &up, &hbc);
        let down = ctx(0, Direction::Downlink);
        let llc = [
            (udp(1, 2, 1400), Channel::Llc),
            (tcp(0x10, &[0; 1000]), Channel::Llc),
        ];
        assert_steers("all-llc", &down, &llc);
    }
}
