//! `pkt-control`: TCP segments without payload (SYN, SYN-ACK, pure ACK, FIN,
//! RST) go on the LLC; everything else (data, UDP, ICMP) on the HBC.

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;

/// `pkt-control`: payload-free TCP segments on the LLC.
pub fn pkt_control(pkt: &PacketInfo, _: &[u8], _: &FlowState, _: &Ctx) -> Decision {
    Decision::llc_if(pkt.is_tcp_control(), Outcome::TcpControl, Outcome::Other)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::packet::{TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
    use crate::{Channel, Direction};

    #[test]
    fn only_payload_free_tcp_on_llc() {
        let control = [
            TCP_SYN,
            TCP_SYN | TCP_ACK,
            TCP_ACK,
            TCP_FIN | TCP_ACK,
            TCP_RST,
        ];
        let mut cases: Vec<_> = control.map(|f| (tcp(f, &[]), Channel::Llc)).into();
        cases.push((tcp(TCP_ACK, b"x"), Channel::Hbc));
        cases.push((udp(5000, 53, 60), Channel::Hbc));
        assert_steers("pkt-control", &ctx(0, Direction::Downlink), &cases);
    }
}
