//! `asap`: the latency-critical phases of a web transfer ride the LLC, bulk
//! response data the HBC. Packet-level rules, first match wins:
//!
//! 1. UDP to or from port 53 (DNS)                         -> LLC `dns`
//! 2. TCP with SYN set (SYN, SYN-ACK)                      -> LLC `tcp_handshake`
//! 3. TCP payload starting with a TLS record header of type
//!    handshake (22) or change_cipher_spec (20), version 3.x -> LLC `tls_handshake`
//!    (either direction; a handshake flight continued in later
//!    segments that do not start a record falls to rule 4/5)
//! 4. client -> server (uplink): requests, their ACKs, FIN  -> LLC `request`
//! 5. server -> client (downlink): everything else          -> HBC `response`

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::{PacketInfo, TCP_SYN};
use crate::{Channel, Direction};

fn starts_tls_handshake_record(payload: &[u8]) -> bool {
    matches!(payload, [20 | 22, 3, minor, ..] if *minor <= 4)
}

/// `asap`: the rules of the module docs.
pub fn asap(pkt: &PacketInfo, raw: &[u8], _: &FlowState, ctx: &Ctx) -> Decision {
    if pkt.is_udp() && (pkt.sport == 53 || pkt.dport == 53) {
        return Decision::new(Channel::Llc, Outcome::Dns);
    }
    if pkt.is_tcp() {
        if pkt.tcp_flags & TCP_SYN != 0 {
            return Decision::new(Channel::Llc, Outcome::TcpHandshake);
        }
        if starts_tls_handshake_record(pkt.payload(raw)) {
            return Decision::new(Channel::Llc, Outcome::TlsHandshake);
        }
    }
    Decision::llc_if(
        ctx.dir == Direction::Uplink,
        Outcome::Request,
        Outcome::Response,
    )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::packet::{TCP_ACK, TCP_PSH};

    fn d(pr: &(PacketInfo, Vec<u8>), dir: Direction) -> (Channel, Outcome) {
        let r = asap(&pr.0, &pr.1, &flow(), &ctx(0, dir));
        (r.channel, r.outcome)
    }

    #[test]
    fn rules_in_order() {
        use Direction::*;
        assert_eq!(
            d(&udp(53, 40000, 300), Downlink),
            (Channel::Llc, Outcome::Dns)
        );
        assert_eq!(
            d(&tcp(0x12, &[]), Downlink),
            (Channel::Llc, Outcome::TcpHandshake)
        );
        // ServerHello record: 0x16 0x03 0x03 ...
        let hello = tcp(TCP_ACK | TCP_PSH, &[22, 3, 3, 0, 90, 2]);
        assert_eq!(d(&hello, Downlink), (Channel::Llc, Outcome::TlsHandshake));
        // application data record (23) downlink is a response
        let appdata = tcp(TCP_ACK | TCP_PSH, &[23, 3, 3, 5, 0, 0]);
        assert_eq!(d(&appdata, Downlink), (Channel::Hbc, Outcome::Response));
        assert_eq!(d(&appdata, Uplink), (Channel::Llc, Outcome::Request));
        assert_eq!(
            d(&tcp(TCP_ACK, &[]), Downlink),
            (Channel::Hbc, Outcome::Response)
        );
        assert_eq!(
            d(&tcp(TCP_ACK, &[]), Uplink),
            (Channel::Llc, Outcome::Request)
        );
        // UDP to another port downlink: response
        assert_eq!(
            d(&udp(443, 40000, 1200), Downlink),
            (Channel::Hbc, Outcome::Response)
        );
    }
}
