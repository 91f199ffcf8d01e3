//! `all-hbc`: every packet on the high-bandwidth channel (the eMBB-only baseline).

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `all-hbc`: every packet on the HBC.
pub struct AllHbc;

impl Policy for AllHbc {
    fn spec(&self) -> String {
        "all-hbc".into()
    }

    fn decide(&mut self, _: &PacketInfo, _: &[u8], _: &mut FlowState, _: &Ctx) -> Decision {
        Decision::new(Channel::Hbc, Outcome::Fixed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::Direction;

    #[test]
    fn always_hbc() {
        let c = ctx(0, Direction::Uplink);
        assert_eq!(
            decide(&mut AllHbc, &tcp(0x02, &[]), &c).channel,
            Channel::Hbc
        );
        assert_eq!(
            decide(&mut AllHbc, &udp(1, 53, 60), &c).channel,
            Channel::Hbc
        );
    }
}
