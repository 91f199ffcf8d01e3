//! `all-llc`: every packet on the low-latency channel (the URLLC-only baseline).

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `all-llc`: every packet on the LLC.
pub struct AllLlc;

impl Policy for AllLlc {
    fn spec(&self) -> String {
        "all-llc".into()
    }

    fn decide(&mut self, _: &PacketInfo, _: &[u8], _: &mut FlowState, _: &Ctx) -> Decision {
        Decision::new(Channel::Llc, Outcome::Fixed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::Direction;

    #[test]
    fn always_llc() {
        let c = ctx(0, Direction::Downlink);
        assert_eq!(
            decide(&mut AllLlc, &udp(1, 2, 1400), &c).channel,
            Channel::Llc
        );
        assert_eq!(
            decide(&mut AllLlc, &tcp(0x10, &[0; 1000]), &c).channel,
            Channel::Llc
        );
    }
}
