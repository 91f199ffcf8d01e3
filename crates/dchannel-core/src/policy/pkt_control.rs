//! `pkt-control`: TCP segments without payload (SYN, SYN-ACK, pure ACK, FIN,
//! RST) go on the LLC; everything else (data, UDP, ICMP) on the HBC.
//!
//! QUIC rule (its flags are encrypted; what stays visible: crate::quic): a long-header
//! packet is the handshake, TCP's SYN/SYN-ACK → LLC (`quic_handshake`); a short-header
//! packet of at most `quic::ACK_ONLY_MAX` UDP bytes stands in for a pure ACK → LLC
//! (`quic_control`); larger short-header packets are data → HBC (`other`).

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::quic;
use crate::Channel;

/// `pkt-control`: payload-free TCP segments, and QUIC's handshake and ACK-sized
/// packets, on the LLC.
pub fn pkt_control(pkt: &PacketInfo, _: &[u8], _: &FlowState, _: &Ctx) -> Decision {
    match pkt.quic {
        Some(quic::Kind::Handshake) => Decision::new(Channel::Llc, Outcome::QuicHandshake),
        Some(quic::Kind::Control) => Decision::new(Channel::Llc, Outcome::QuicControl),
        Some(quic::Kind::Data) => Decision::new(Channel::Hbc, Outcome::Other),
        None => Decision::llc_if(pkt.is_tcp_control(), Outcome::TcpControl, Outcome::Other),
    }
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

    /// Real QUIC packets (crate::quic::vectors): the handshake and the ACK-sized packets
    /// of both ends on the LLC, the request and the data on the HBC.
    #[test]
    fn quic_handshake_and_acks_on_llc() {
        use crate::policy::Outcome;
        use crate::quic::vectors;
        let c = ctx(0, Direction::Downlink);
        for (name, channel, outcome) in [
            ("client-initial", Channel::Llc, Outcome::QuicHandshake),
            ("client-handshake", Channel::Llc, Outcome::QuicHandshake),
            ("server-initial", Channel::Llc, Outcome::QuicHandshake),
            ("client-ack", Channel::Llc, Outcome::QuicControl),
            ("server-ack", Channel::Llc, Outcome::QuicControl),
            ("client-request", Channel::Hbc, Outcome::Other),
            ("server-data-small", Channel::Hbc, Outcome::Other),
            ("server-data-full", Channel::Hbc, Outcome::Other),
        ] {
            let d = super::pkt_control(&vectors::get(name).0, &vectors::get(name).1, &flow(), &c);
            assert_eq!((d.channel, d.outcome), (channel, outcome), "{name}");
        }
    }
}
