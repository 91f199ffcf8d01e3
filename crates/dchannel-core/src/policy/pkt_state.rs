//! `pkt-state` (HotMobile'21, Algorithm 1): a packet goes on the LLC iff it is
//! smaller than the MTU *and* the previous packet of its flow was smaller than
//! the MTU. Full-size packets mark a bulk phase; the first small packet after
//! one (the tail of a burst) stays on the HBC so it does not overtake it.
//!
//! QUIC rule (crate::quic): a long-header packet is the handshake → LLC
//! (`quic_handshake`), whatever its size (a client's Initial is padded to ≥ 1200 bytes,
//! RFC 9000 §14.1, yet is no bulk data). For short-header packets "full-size" is QUIC's
//! own: QUIC fills packets to its maximum datagram size, ≥ 1200 UDP bytes and below the
//! link MTU (measured 1200..1452 on a 1500-byte path), so with the MTU test every QUIC
//! packet would be "small" and the whole download would go to the LLC. A QUIC packet is
//! full-size from `quic::FULL_PAYLOAD` UDP bytes (a flow's previous packet: from
//! `quic::FULL_IP_LEN` IP bytes); Algorithm 1 is otherwise unchanged.

use super::{Ctx, Decision, Outcome};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::quic;
use crate::Channel;

/// `pkt-state`: HotMobile'21 Algorithm 1, with the QUIC rule above.
pub fn pkt_state(pkt: &PacketInfo, _: &[u8], flow: &FlowState, ctx: &Ctx) -> Decision {
    let full_ip = match pkt.quic {
        Some(quic::Kind::Handshake) => return Decision::new(Channel::Llc, Outcome::QuicHandshake),
        Some(_) => quic::FULL_IP_LEN.min(ctx.mtu),
        None => ctx.mtu,
    };
    // flow.prev_size is maintained by the steerer for every policy.
    let small_after_small = pkt.ip_len < full_ip && flow.prev_size < full_ip;
    Decision::llc_if(
        small_after_small,
        Outcome::SmallAfterSmall,
        Outcome::LargeOrAfterLarge,
    )
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::{Channel, Direction};

    #[test]
    fn hotmobile21_algorithm1_sequence() {
        // MTU 1456: sequence small, full, small(after full), small -> L, H, H, L.
        let c = ctx(0, Direction::Downlink);
        let mut f = flow();
        let mut run = |len: usize| {
            let pr = udp(1, 2, len);
            let d = pkt_state(&pr.0, &pr.1, &f, &c).channel;
            f.prev_size = len; // what the steerer does after each decision
            d
        };
        assert_eq!(run(100), Channel::Llc);
        assert_eq!(run(1456), Channel::Hbc);
        assert_eq!(run(100), Channel::Hbc);
        assert_eq!(run(1455), Channel::Llc);
    }

    /// Real QUIC packets (crate::quic::vectors) in the order of a download: the
    /// handshake on the LLC; data packets of 1448 IP bytes (below the 1456 MTU) are
    /// full-size for QUIC, so the small packet after one stays on the HBC, and the ACK
    /// after that (small after small) goes to the LLC.
    #[test]
    fn quic_handshake_on_llc_and_full_size_is_quics() {
        use crate::policy::Outcome;
        use crate::quic::vectors;
        let c = ctx(0, Direction::Downlink);
        let mut f = flow();
        let mut run = |name: &str| {
            let (p, raw) = vectors::get(name);
            let d = pkt_state(&p, &raw, &f, &c);
            f.prev_size = p.ip_len;
            (d.channel, d.outcome)
        };
        assert_eq!(
            run("server-initial"),
            (Channel::Llc, Outcome::QuicHandshake)
        );
        assert_eq!(
            run("server-data-full"),
            (Channel::Hbc, Outcome::LargeOrAfterLarge)
        );
        assert_eq!(
            run("server-data-small"),
            (Channel::Hbc, Outcome::LargeOrAfterLarge)
        );
        assert_eq!(run("server-ack"), (Channel::Llc, Outcome::SmallAfterSmall));
        assert_eq!(
            run("client-initial"),
            (Channel::Llc, Outcome::QuicHandshake)
        );
    }
}
