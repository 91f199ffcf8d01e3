//! Property test: no byte sequence makes the wire or packet parsers, or the
//! endpoint's receive half, panic, and every successful parse stays within the
//! input (bounded runtime: 2000 cases per property by default; PROPTEST_CASES
//! overrides).

use dchannel_core::endpoint::{self, Config, PeerConfig, ReceiveHalf, Received, Role, TokenAuth};
use dchannel_core::packet;
use dchannel_core::policy::parse_spec;
use dchannel_core::wire::{self, Header, MsgType, HEADER_LEN};
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn wire_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = wire::decode(&bytes);
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
        let _ = packet::parse(&p);
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
