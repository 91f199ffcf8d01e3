//! `pkt-control`: TCP segments without payload (SYN, SYN-ACK, pure ACK, FIN,
//! RST) go on the LLC; everything else (data, UDP, ICMP) on the HBC.

use super::{Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// `pkt-control`: payload-free TCP segments on the LLC.
pub struct PktControl;

impl Policy for PktControl {
    fn spec(&self) -> String {
        "pkt-control".into()
    }

    fn decide(&mut self, pkt: &PacketInfo, _: &[u8], _: &mut FlowState, _: &Ctx) -> Decision {
        if pkt.is_tcp_control() {
            Decision::new(Channel::Llc, Outcome::TcpControl)
        } else {
            Decision::new(Channel::Hbc, Outcome::Other)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::packet::{TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
    use crate::Direction;

    #[test]
    fn only_payload_free_tcp_on_llc() {
        let c = ctx(0, Direction::Downlink);
        let mut p = PktControl;
        for f in [
            TCP_SYN,
            TCP_SYN | TCP_ACK,
            TCP_ACK,
            TCP_FIN | TCP_ACK,
            TCP_RST,
        ] {
            assert_eq!(
                decide(&mut p, &tcp(f, &[]), &c).channel,
                Channel::Llc,
                "flags {f:#x}"
            );
        }
        assert_eq!(
            decide(&mut p, &tcp(TCP_ACK, b"x"), &c).channel,
            Channel::Hbc
        );
        assert_eq!(decide(&mut p, &udp(5000, 53, 60), &c).channel, Channel::Hbc);
    }
}
