//! Property test: no byte sequence makes the wire or packet parsers, or the
//! endpoint's receive half, panic; the wire decoder accepts exactly what
//! docs/wire.md allows (and what it accepts re-encodes to the same bytes),
//! and every successful parse stays within the input (bounded runtime: 2000 cases per property by default; PROPTEST_CASES
//! overrides).

use dchannel_core::endpoint::{
    self, Config, DropReason, PeerConfig, ReceiveHalf, Received, Role, TokenAuth,
};
use dchannel_core::packet;
use dchannel_core::policy::parse_spec;
use dchannel_core::wire::{self, Datagram, Header, MsgType, WireError, HEADER_LEN, PROBE_BODY_LEN};
use dchannel_core::Channel;
use proptest::prelude::*;

const TOKEN: u64 = 0x0011_2233_aabb_ccdd;

fn gateway_rx() -> ReceiveHalf<Vec<u8>, TokenAuth> {
    let peers = vec![PeerConfig {
        name: "c".into(),
        token: TOKEN,
        tunnel_addr: Some("198.19.0.2".parse().unwrap()),
        endpoints: [None, None],
    }];
    let auth = TokenAuth::new(&peers).unwrap();
    let (_, rx) = endpoint::new(Config::new(Role::Gateway), peers, auth, || {
        parse_spec("all-hbc", 0.75).unwrap()
    })
    .unwrap();
    rx
}

/// Why the format refuses `b`, decided from docs/wire.md alone (`None`: valid).
fn expected_rejection(b: &[u8]) -> Option<WireError> {
    if b.len() < HEADER_LEN {
        return Some(WireError::Truncated {
            len: b.len(),
            need: HEADER_LEN,
        });
    }
    if b[0] >> 4 != 1 {
        return Some(WireError::UnknownVersion(b[0] >> 4));
    }
    match b[0] & 0x0f {
        0 if b.len() == HEADER_LEN => Some(WireError::EmptyData),
        0 => None,
        1 if b.len() < HEADER_LEN + PROBE_BODY_LEN => Some(WireError::Truncated {
            len: b.len(),
            need: HEADER_LEN + PROBE_BODY_LEN,
        }),
        1 => {
            let (kind, channel) = (b[HEADER_LEN], b[HEADER_LEN + 1]);
            let ok = (1..=4).contains(&kind) && channel <= 1;
            (!ok).then_some(WireError::BadProbe { kind, channel })
        }
        t => Some(WireError::UnknownType(t)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every datagram is either accepted and re-encodes to the same bytes, or
    /// refused with the reason the format (docs/wire.md) gives for it.
    #[test]
    fn wire_decode_accepts_exactly_the_format_and_round_trips(
        first in prop_oneof![Just(0x10u8), Just(0x11u8), any::<u8>()],
        kind in prop_oneof![1u8..=4, any::<u8>()],
        channel in prop_oneof![0u8..=1, any::<u8>()],
        mut bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        for (at, b) in [(0, first), (HEADER_LEN, kind), (HEADER_LEN + 1, channel)] {
            if let Some(x) = bytes.get_mut(at) {
                *x = b;
            }
        }
        match wire::decode(&bytes) {
            Ok(d) => {
                prop_assert_eq!(expected_rejection(&bytes), None);
                let mut again = vec![0u8; HEADER_LEN];
                d.header().encode(&mut again);
                match d {
                    Datagram::Data { inner, .. } => again.extend_from_slice(inner),
                    Datagram::Probe { kind, channel, .. } => {
                        let mut body = [0u8; PROBE_BODY_LEN];
                        wire::encode_probe_body(&mut body, kind, channel);
                        again.extend_from_slice(&body);
                    }
                }
                // a probe's bytes past its 2-byte body are not part of it
                prop_assert_eq!(&again[..], &bytes[..again.len()]);
            }
            Err(e) => {
                prop_assert_eq!(Some(e), expected_rejection(&bytes));
                prop_assert!(!DropReason::from(e).name().is_empty());
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn packet_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(info) = packet::parse(&bytes) {
            prop_assert!(info.ip_len <= bytes.len());
            prop_assert!(info.payload_off + info.payload_len <= bytes.len().max(info.ip_len));
            let _ = info.payload(&bytes);
        }
    }

    /// Mutations of valid-looking IPv4/IPv6 headers reach the deeper layers.
    #[test]
    fn structured_packets_never_panic(
        v6 in any::<bool>(),
        proto in prop_oneof![Just(6u8), Just(17u8), Just(1u8), Just(58u8), Just(0u8), Just(44u8), Just(51u8), any::<u8>()],
        ihl in 0u8..16,
        len in 0usize..120,
        tail in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut p = tail.clone();
        p.resize(p.len().max(40), 0);
        if v6 {
            p[0] = 0x60;
            p[4..6].copy_from_slice(&(len as u16).to_be_bytes());
            p[6] = proto;
        } else {
            p[0] = 0x40 | ihl;
            p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            p[9] = proto;
        }
        if let Ok(info) = packet::parse(&p) {
            prop_assert!(info.ip_len <= p.len());
            prop_assert!(info.payload_off + info.payload_len <= p.len().max(info.ip_len));
        }
    }

    /// Datagrams with a valid token and arbitrary header bits and body reach
    /// every admission step; none panics, and whatever is delivered is the body.
    #[test]
    fn receive_half_never_panics(
        first in any::<u8>(),
        flow in any::<u16>(),
        seq in any::<u32>(),
        llc in any::<bool>(),
        body in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut rx = gateway_rx();
        let mut dg = vec![first, 0];
        dg.extend_from_slice(&flow.to_be_bytes());
        dg.extend_from_slice(&seq.to_be_bytes());
        dg.extend_from_slice(&TOKEN.to_be_bytes());
        dg.extend_from_slice(&body);
        let ch = if llc { Channel::Llc } else { Channel::Hbc };
        let r = rx.handle_datagram(0, ch, "198.18.1.2:5000".parse().unwrap(), dg);
        rx.handle_timeout(1_000_000_000);
        let out: Vec<Vec<u8>> = rx.deliveries().map(|d| d.packet().to_vec()).collect();
        if let Received::Data(_) = r {
            prop_assert_eq!(out, vec![body]);
        } else {
            prop_assert!(out.is_empty());
        }
    }

    #[test]
    fn header_round_trip(flags in any::<u8>(), flow in any::<u16>(), seq in any::<u32>(), token in any::<u64>(), probe in any::<bool>()) {
        let h = Header { msg_type: if probe { MsgType::Probe } else { MsgType::Data }, flags, flow_id: flow, seq, token };
        let mut buf = [0u8; HEADER_LEN];
        h.encode(&mut buf);
        prop_assert_eq!(Header::decode(&buf), Ok(h));
    }
}
