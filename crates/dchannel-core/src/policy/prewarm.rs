//! `prewarm`: Algorithm 1 (`dchannel`) for every packet, and one more rule at
//! the device: keep the HBC radio awake for the reply.
//!
//! ```text
//! channel = Algorithm 1 (dchannel.rs), unchanged
//! client (uplink) only:
//!   if channel == LLC and now - last_hbc >= gap: wake_hbc, last_hbc = now
//!   if channel == HBC:                           last_hbc = now
//! ```
//!
//! `wake_hbc` makes the client send a tiny one-way
//! [`ProbeKind::Wake`](crate::wire::ProbeKind::Wake) datagram on the HBC beside
//! the packet; the gateway counts it and drops it.
//!
//! Why: a cellular HBC radio sleeps after a short inactivity (connected-mode
//! DRX) and a downlink packet that reaches a sleeping device waits for its next
//! wake-up (up to the wake period: tens of ms on mmWave). Under `all-hbc` the
//! request itself goes up the HBC and wakes the radio before the reply comes
//! down. Algorithm 1 puts requests, handshakes and ACKs (small) on the LLC, so
//! the HBC is silent just before the reply's large packets come down it: every
//! request/response round pays the sleep that `all-hbc` does not. Any uplink
//! transmission wakes the radio (the device's scheduling request starts its
//! active time), so a wake datagram on the HBC beside the LLC request buys the
//! wake-up without one byte more on the LLC. `gap` bounds the wakes to one per
//! `gap` (default 10 ms: at most ~100 small datagrams per second on the HBC
//! uplink, while the radio's inactivity timer is 30 ms or more on the networks
//! we know). At the gateway (downlink) the policy is Algorithm 1 exactly: a
//! wake sent down the HBC would itself wait for the sleeping radio.

use super::{Ctx, DChannel, Decision, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::{Channel, Direction, Nanos, MS};

/// Default minimum time between two wakes (and since the last HBC packet).
pub const DEFAULT_GAP: Nanos = 10 * MS;

/// `prewarm`: Algorithm 1 plus HBC wake-ups at the client (module docs).
pub struct Prewarm {
    inner: DChannel,
    alpha: f64,
    gap: Nanos,
    /// When this sender last put a packet or a wake on the HBC.
    last_hbc: Option<Nanos>,
}

impl Prewarm {
    /// Algorithm 1 with weight `alpha`; wakes at most once per `gap`.
    pub fn new(alpha: f64, gap: Nanos) -> Prewarm {
        Prewarm {
            inner: DChannel::new(alpha),
            alpha,
            gap,
            last_hbc: None,
        }
    }
}

impl Policy for Prewarm {
    fn spec(&self) -> String {
        super::alpha_gap_spec("prewarm", self.alpha, self.gap)
    }

    fn decide(
        &mut self,
        pkt: &PacketInfo,
        raw: &[u8],
        flow: &mut FlowState,
        ctx: &Ctx,
    ) -> Decision {
        let mut d = self.inner.decide(pkt, raw, flow, ctx);
        if ctx.dir != Direction::Uplink {
            return d;
        }
        match d.channel {
            Channel::Hbc => self.last_hbc = Some(ctx.now),
            Channel::Llc => {
                let quiet = self
                    .last_hbc
                    .map_or(true, |t| ctx.now.saturating_sub(t) >= self.gap);
                if quiet {
                    d.wake_hbc = true;
                    self.last_hbc = Some(ctx.now);
                }
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::MS;

    // Test setting (NSDI'23 §4.1 footnote, as in dchannel.rs): LLC 250 B/ms,
    // one-way delays HBC 20 ms / LLC 5 ms. alpha 0.75: a packet goes on the LLC
    // iff its size plus the queue is below 2142.86 B.

    fn at(now: Nanos, dir: Direction, queue: f64) -> Ctx {
        let mut c = ctx(now, dir);
        c.llc_queue = queue;
        c
    }

    /// `p`'s channel and wake for `pkt` of flow `f` sent up at `now` behind
    /// `queue` LLC bytes.
    fn up(
        p: &mut Prewarm,
        f: &mut FlowState,
        pkt: &Pkt,
        now: Nanos,
        queue: f64,
    ) -> (Channel, bool) {
        let d = p.decide(&pkt.0, &pkt.1, f, &at(now, Direction::Uplink, queue));
        (d.channel, d.wake_hbc)
    }

    #[test]
    fn wakes_the_hbc_on_an_llc_packet_after_a_quiet_gap() {
        let mut p = Prewarm::new(0.75, 10 * MS);
        let mut f = flow();
        let small = udp(1, 2, 100);
        // t = 100 ms: the first LLC packet, the HBC never used: wake.
        assert_eq!(
            up(&mut p, &mut f, &small, 100 * MS, 0.0),
            (Channel::Llc, true)
        );
        // t = 105 ms: 5 ms after the wake < gap: no second wake.
        assert_eq!(
            up(&mut p, &mut f, &small, 105 * MS, 0.0),
            (Channel::Llc, false)
        );
        // t = 110 ms: exactly one gap after the wake: wake again.
        assert_eq!(
            up(&mut p, &mut f, &small, 110 * MS, 0.0),
            (Channel::Llc, true)
        );
    }

    #[test]
    fn an_hbc_packet_counts_as_a_wake() {
        let mut p = Prewarm::new(0.75, 10 * MS);
        // t = 200 ms: 1400 B behind 1000 queued bytes = 2400 B > 2143 B -> HBC.
        let big = udp(1, 2, 1400);
        let hbc = up(&mut p, &mut flow(), &big, 200 * MS, 1000.0);
        assert_eq!(hbc, (Channel::Hbc, false));
        // t = 209 ms, another flow's small packet on the LLC: the HBC carried a
        // packet 9 ms ago, its radio is awake: no wake.
        let small = udp(3, 4, 100);
        assert_eq!(
            up(&mut p, &mut flow(), &small, 209 * MS, 0.0),
            (Channel::Llc, false)
        );
        // t = 210 ms: 10 ms since the HBC packet: wake.
        assert_eq!(
            up(&mut p, &mut flow(), &small, 210 * MS, 0.0),
            (Channel::Llc, true)
        );
    }

    #[test]
    fn channels_are_algorithm_1s_and_the_gateway_never_wakes() {
        // Same packets, same state: every channel (and prev_c) equals dchannel's;
        // downlink decisions never carry a wake.
        for dir in [Direction::Uplink, Direction::Downlink] {
            let mut a = DChannel::new(0.75);
            let mut b = Prewarm::new(0.75, 10 * MS);
            let (mut fa, mut fb) = (flow(), flow());
            let mut wakes = 0;
            for i in 0..400u64 {
                let size = [60, 100, 1400, 576, 1456, 40][(i % 6) as usize];
                let pkt = udp(1, 2, size.max(28));
                let c = at(i * 3 * MS / 2, dir, ((i * 311) % 2500) as f64);
                let da = a.decide(&pkt.0, &pkt.1, &mut fa, &c);
                let db = b.decide(&pkt.0, &pkt.1, &mut fb, &c);
                assert_eq!(da.channel, db.channel, "packet {i}");
                assert_eq!(fa.prev_c, fb.prev_c, "packet {i}");
                wakes += db.wake_hbc as u32;
            }
            match dir {
                Direction::Downlink => assert_eq!(wakes, 0),
                Direction::Uplink => assert!(wakes > 0),
            }
        }
    }

    #[test]
    fn spec_names_alpha_and_gap() {
        assert_eq!(
            Prewarm::new(0.5, 20 * MS).spec(),
            "prewarm:alpha=0.5,gap_ms=20"
        );
    }
}
