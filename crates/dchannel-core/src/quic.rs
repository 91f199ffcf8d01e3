//! What a packet steerer can still see of QUIC (RFC 9000, RFC 8999) once its transport
//! header is encrypted: no SYN/FIN/ACK flags, no sequence numbers, ACKs are frames inside
//! encrypted packets. Three things stay visible, and the QUIC rules of `pkt-state` and
//! `pkt-control` are written on them:
//!
//! - the header form bit (RFC 8999 §5.1, RFC 9000 §17.2): a long-header packet (Initial,
//!   0-RTT, Handshake, Retry, version negotiation) belongs to the handshake — QUIC's
//!   counterpart of TCP's SYN/SYN-ACK and TLS's handshake records;
//! - the datagram's size: a short-header (1-RTT) packet that carries only an ACK frame is
//!   1 (flags) + DCID (0..20) + packet number (1..4) + ACK frame (≈ 5..12 without extra
//!   ranges) + 16 (AEAD tag) bytes of UDP payload. Measured in the lab (Chromium 156 ↔
//!   webreplay's quinn, 2026-11-26, `testdata/quic/`): 34-35 bytes from the client (8-byte
//!   server CID), 24 from the server (Chromium's zero-length CID). `ACK_ONLY_MAX` (48 bytes:
//!   an ACK frame of up to 12 bytes behind a 20-byte CID) stands in for "pure ACK";
//! - QUIC fills packets up to its maximum datagram size, at least 1200 bytes of UDP
//!   payload on every path (RFC 9000 §14.1), usually below the link MTU (measured: bulk
//!   downlink packets of 1200..1452 UDP bytes on a 1500-byte path). So a full QUIC packet
//!   is one of at least `FULL_PAYLOAD` bytes, not one of the link MTU.
//!
//! QUIC is not self-identifying: a UDP datagram to or from port 443 (HTTP/3, RFC 9114
//! §3.1) with a non-empty payload is taken for QUIC.

use crate::packet::PacketInfo;

/// The port QUIC is recognised by (HTTP/3's default).
pub const PORT: u16 = 443;
/// Largest UDP payload of a short-header packet taken for ACK/control only.
pub const ACK_ONLY_MAX: usize = 48;
/// UDP payload from which a QUIC packet counts as full-size (RFC 9000 §14.1's minimum
/// maximum datagram size).
pub const FULL_PAYLOAD: usize = 1200;
/// `FULL_PAYLOAD` as an IP packet length (20-byte IPv4 + 8-byte UDP header), for
/// comparing with a flow's previous packet, whose IP length is all a flow remembers.
pub const FULL_IP_LEN: usize = FULL_PAYLOAD + 28;

/// What a QUIC packet is, as far as its visible bytes tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Long header: the handshake.
    Handshake,
    /// Short header, at most `ACK_ONLY_MAX` bytes: acknowledgements and control frames.
    Control,
    /// Short header, larger: data.
    Data,
}

/// The QUIC kind of `pkt` (its bytes `raw`), or None when it is not QUIC. The parser
/// stores it as [`PacketInfo::quic`], which is what the rest of the crate reads.
pub fn classify(pkt: &PacketInfo, raw: &[u8]) -> Option<Kind> {
    if !pkt.is_udp() || (pkt.sport != PORT && pkt.dport != PORT) {
        return None;
    }
    let payload = pkt.payload(raw);
    let first = *payload.first()?;
    Some(if first & 0x80 != 0 {
        Kind::Handshake
    } else if payload.len() <= ACK_ONLY_MAX {
        Kind::Control
    } else {
        Kind::Data
    })
}

/// Real QUIC packets captured in the lab (`testdata/quic/*.hex`, IPv4, one per file).
#[cfg(test)]
pub mod vectors {
    use crate::packet::{self, PacketInfo};

    /// The bytes of a hex string (surrounding whitespace ignored).
    pub fn hex(text: &str) -> Vec<u8> {
        let t = text.trim();
        (0..t.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&t[i..i + 2], 16).unwrap())
            .collect()
    }

    /// (name, parsed, bytes) of every captured packet.
    pub fn all() -> Vec<(&'static str, PacketInfo, Vec<u8>)> {
        macro_rules! v {
            ($($name:literal),*) => {
                vec![$(($name, include_str!(concat!("../testdata/quic/", $name, ".hex")))),*]
            };
        }
        v!(
            "client-initial",
            "client-handshake",
            "server-initial",
            "client-ack",
            "server-ack",
            "client-request",
            "server-data-small",
            "server-data-full"
        )
        .into_iter()
        .map(|(name, text)| {
            let raw = hex(text);
            (name, packet::parse(&raw).unwrap(), raw)
        })
        .collect()
    }

    /// The captured packet `name`.
    pub fn get(name: &str) -> (PacketInfo, Vec<u8>) {
        let (_, p, raw) = all().into_iter().find(|v| v.0 == name).unwrap();
        (p, raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_packets_classify_by_header_form_and_size() {
        let want = [
            ("client-initial", Kind::Handshake, 1250),
            ("client-handshake", Kind::Handshake, 73),
            ("server-initial", Kind::Handshake, 1200),
            ("client-ack", Kind::Control, 34),
            ("server-ack", Kind::Control, 24),
            ("client-request", Kind::Data, 478),
            ("server-data-small", Kind::Data, 90),
            ("server-data-full", Kind::Data, 1420),
        ];
        let got = vectors::all();
        assert_eq!(got.len(), want.len());
        for ((name, p, raw), (wname, kind, len)) in got.iter().zip(want) {
            assert_eq!(*name, wname);
            assert_eq!(p.payload(raw).len(), len, "{name}: UDP payload");
            assert_eq!(classify(p, raw), Some(kind), "{name}");
            assert_eq!(p.quic, Some(kind), "{name}: the parser's record");
        }
    }

    #[test]
    fn only_udp_on_port_443_is_quic() {
        use crate::policy::testutil::{tcp, udp};
        let (p, raw) = udp(5000, 53, 60);
        assert_eq!((classify(&p, &raw), p.quic), (None, None), "DNS");
        let (p, raw) = tcp(crate::packet::TCP_ACK, b"x");
        assert_eq!((classify(&p, &raw), p.quic), (None, None), "TCP to 443");
        let (p, raw) = udp(443, 40000, 28);
        assert_eq!((classify(&p, &raw), p.quic), (None, None), "empty payload");
    }
}
