//! `pkt-size:N`: IP packets smaller than N bytes go on the LLC, the rest on the
//! HBC (NSDI'23 §6 "best packet size" baseline, swept over 250..1400).

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `pkt-size:N`: IP packets shorter than N bytes on the LLC.
pub struct PktSize {
    threshold: usize,
}

impl PktSize {
    /// LLC for IP packets shorter than `threshold` bytes.
    pub fn new(threshold: usize) -> PktSize {
        PktSize { threshold }
    }
}

impl Policy for PktSize {
    fn spec(&self) -> String {
        format!("pkt-size:{}", self.threshold)
    }

    fn decide(&mut self, pkt: &PacketInfo, _: &[u8], _: &mut FlowState, _: &Ctx) -> Decision {
        if pkt.ip_len < self.threshold {
            Decision::new(Channel::Llc, Outcome::Small)
        } else {
            Decision::new(Channel::Hbc, Outcome::Large)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::Direction;

    #[test]
    fn strictly_smaller_goes_llc() {
        let c = ctx(0, Direction::Uplink);
        let mut p = PktSize::new(750);
        assert_eq!(decide(&mut p, &udp(1, 2, 749), &c).channel, Channel::Llc);
        assert_eq!(decide(&mut p, &udp(1, 2, 750), &c).channel, Channel::Hbc);
        assert_eq!(decide(&mut p, &tcp(0x10, &[]), &c).channel, Channel::Llc);
    }
}
