//! Property test: no byte sequence makes the wire or packet parsers panic, and
//! every successful parse stays within the input (bounded runtime: 2000 cases
//! per property by default; PROPTEST_CASES overrides).

use dchannel_core::packet;
use dchannel_core::wire::{self, Header, MsgType, HEADER_LEN};
use proptest::prelude::*;

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

    #[test]
    fn header_round_trip(flags in any::<u8>(), flow in any::<u16>(), seq in any::<u32>(), token in any::<u64>(), probe in any::<bool>()) {
        let h = Header { msg_type: if probe { MsgType::Probe } else { MsgType::Data }, flags, flow_id: flow, seq, token };
        let mut buf = [0u8; HEADER_LEN];
        h.encode(&mut buf);
        prop_assert_eq!(Header::decode(&buf), Ok(h));
    }
}
