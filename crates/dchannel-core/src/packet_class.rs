//! What kind of packet a sender steered, for counting (the agents' `classes`
//! stats): how many acknowledgements, handshake and data packets each channel
//! carried in each direction. Issue 39 asks why a scheme gains differently over
//! QUIC than over TCP, and one candidate is ACK frequency: a TCP receiver sends
//! pure ACKs (no payload), a QUIC receiver ACK frames in small short-header
//! packets whose flags are encrypted (crate::quic: at most `ACK_ONLY_MAX` UDP
//! bytes). The two ACK-like classes are [`PacketClass::TcpPureAck`] and
//! [`PacketClass::QuicShortSmall`] ([`PacketClass::is_ack_like`]).
//!
//! The class is read from the inner packet's clear headers before it is sealed;
//! it never changes a decision.

use crate::packet::{PacketInfo, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
use crate::quic::Kind;

crate::counter_table! {
    /// The class of one steered packet.
    pub enum PacketClass {
        /// TCP SYN or SYN-ACK.
        TcpSyn,
        /// TCP without payload, ACK only (no SYN, FIN or RST).
        TcpPureAck,
        /// TCP FIN or RST without payload.
        TcpFinRst,
        /// TCP with payload.
        TcpData,
        /// QUIC long-header packet: the handshake (crate::quic).
        QuicLong,
        /// QUIC short-header packet of ACK size (crate::quic::ACK_ONLY_MAX).
        QuicShortSmall,
        /// QUIC short-header packet carrying data.
        QuicShortData,
        /// UDP that is not taken for QUIC (DNS, ...).
        OtherUdp,
        /// Anything else, and packets that could not be parsed.
        Other,
    }
}

impl PacketClass {
    /// A TCP pure ACK or a QUIC short-header packet of ACK size.
    pub fn is_ack_like(self) -> bool {
        matches!(self, PacketClass::TcpPureAck | PacketClass::QuicShortSmall)
    }

    /// The class of the parsed packet `info` (None: unparsable). A UDP packet's QUIC
    /// kind is the one the parser found ([`PacketInfo::quic`]), not worked out again.
    pub fn of(info: Option<&PacketInfo>) -> PacketClass {
        let Some(p) = info else {
            return PacketClass::Other;
        };
        if p.is_tcp() {
            let f = p.tcp_flags;
            return if f & TCP_SYN != 0 {
                PacketClass::TcpSyn
            } else if p.payload_len > 0 {
                PacketClass::TcpData
            } else if f & (TCP_FIN | TCP_RST) != 0 {
                PacketClass::TcpFinRst
            } else if f & TCP_ACK != 0 {
                PacketClass::TcpPureAck
            } else {
                PacketClass::Other
            };
        }
        match p.quic {
            Some(Kind::Handshake) => PacketClass::QuicLong,
            Some(Kind::Control) => PacketClass::QuicShortSmall,
            Some(Kind::Data) => PacketClass::QuicShortData,
            None if p.is_udp() => PacketClass::OtherUdp,
            None => PacketClass::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{self, TCP_PSH};
    use crate::policy::testutil::{tcp, udp};
    use crate::quic::vectors;

    fn class(pr: &(PacketInfo, Vec<u8>)) -> PacketClass {
        PacketClass::of(Some(&pr.0))
    }

    #[test]
    fn tcp_by_flags_and_payload() {
        assert_eq!(class(&tcp(TCP_SYN, b"")), PacketClass::TcpSyn);
        assert_eq!(class(&tcp(TCP_SYN | TCP_ACK, b"")), PacketClass::TcpSyn);
        assert_eq!(class(&tcp(TCP_ACK, b"")), PacketClass::TcpPureAck);
        assert_eq!(class(&tcp(TCP_FIN | TCP_ACK, b"")), PacketClass::TcpFinRst);
        assert_eq!(class(&tcp(TCP_RST, b"")), PacketClass::TcpFinRst);
        assert_eq!(class(&tcp(TCP_PSH | TCP_ACK, b"GET")), PacketClass::TcpData);
        // a FIN that carries the last bytes is data
        assert_eq!(class(&tcp(TCP_FIN | TCP_ACK, b"x")), PacketClass::TcpData);
        assert!(PacketClass::TcpPureAck.is_ack_like());
        assert!(!PacketClass::TcpData.is_ack_like() && !PacketClass::TcpSyn.is_ack_like());
    }

    #[test]
    fn captured_quic_packets_by_header_form_and_size() {
        // the lab's captures (crate::quic::vectors): the ACKs from both sides are
        // ACK-like, the handshake and the data are not
        let want = [
            ("client-initial", PacketClass::QuicLong),
            ("client-handshake", PacketClass::QuicLong),
            ("server-initial", PacketClass::QuicLong),
            ("client-ack", PacketClass::QuicShortSmall),
            ("server-ack", PacketClass::QuicShortSmall),
            ("client-request", PacketClass::QuicShortData),
            ("server-data-small", PacketClass::QuicShortData),
            ("server-data-full", PacketClass::QuicShortData),
        ];
        for (name, c) in want {
            let (p, _) = vectors::get(name);
            assert_eq!(PacketClass::of(Some(&p)), c, "{name}");
            assert_eq!(c.is_ack_like(), name.ends_with("-ack"), "{name}");
        }
    }

    #[test]
    fn other_udp_and_unparsable() {
        assert_eq!(class(&udp(5000, 53, 60)), PacketClass::OtherUdp);
        assert_eq!(PacketClass::of(None), PacketClass::Other);
        assert!(packet::parse(&[0x45]).is_err());
        assert_eq!(PacketClass::QuicShortSmall.name(), "quic_short_small");
        assert_eq!(PacketClass::TcpPureAck.name(), "tcp_pure_ack");
    }
}
