//! `pkt-size:N`: IP packets smaller than N bytes go on the LLC, the rest on the
//! HBC (NSDI'23 §6 "best packet size" baseline, swept over 250..1400).

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;

/// `pkt-size:N`: IP packets shorter than N bytes on the LLC.
pub struct PktSize {
    /// N: the LLC takes IP packets shorter than this many bytes.
    pub threshold: usize,
}

impl Policy for PktSize {
    fn spec(&self) -> String {
        format!("pkt-size:{}", self.threshold)
    }

    fn decide(&mut self, pkt: &PacketInfo, _: &[u8], _: &mut FlowState, _: &Ctx) -> Decision {
        Decision::llc_if(pkt.ip_len < self.threshold, Outcome::Small, Outcome::Large)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::{Channel, Direction};

    #[test]
    fn strictly_smaller_goes_llc() {
        let cases = [
            (udp(1, 2, 749), Channel::Llc),
            (udp(1, 2, 750), Channel::Hbc),
            (tcp(0x10, &[]), Channel::Llc),
        ];
        assert_steers("pkt-size:750", &ctx(0, Direction::Uplink), &cases);
    }
}
