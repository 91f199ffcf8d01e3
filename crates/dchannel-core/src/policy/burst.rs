//! `burst`: Algorithm 1 (`dchannel`), but a packet takes the LLC only if the
//! rest of its *burst* would too.
//!
//! ```text
//! payload-free TCP (ACK, SYN, FIN, RST): Algorithm 1 as is, not part of a burst
//! per flow: a burst = packets less than `gap` apart; `previous` = wire bytes
//! of the flow's previous burst, `so_far` = of the current one before this packet
//! expected = max(previous, so_far + size)          // the burst's expected total
//! rest     = expected - so_far                     // this packet and those after it
//! c_end    = now + llc_prop + (rest + queue_llc) / band_llc
//! reward   = c_hbc - max(prev_c, c_end)
//! cost     = (size + queue_llc) / band_llc         // as Algorithm 1
//! if reward > alpha * cost: LLC, prev_c = max(prev_c, c_llc)   // c_llc of this packet
//! else:                     HBC, prev_c = max(prev_c, c_hbc)
//! ```
//!
//! Why: what a page load waits for is the *last* byte of a response (an
//! object, a TLS flight), and the receiver delivers a flow in order. Algorithm
//! 1 decides packet by packet: the head of a 20 KB response fits the LLC, the
//! LLC queue grows until the tail goes on the HBC, and the response completes
//! at the HBC's delay anyway — the LLC bytes of its head bought nothing, but
//! queued every other flow's packets behind them. With a 2 Mbit/s LLC that
//! capacity is the binding limit (docs/results.md, issue 19: perfect delay
//! knowledge buys nothing, more LLC bandwidth buys 20 points). The flow's
//! previous burst is the prediction of this one's size (a TCP flight, a
//! response on a kept-alive connection); a flow's first burst has none, and
//! is decided exactly as Algorithm 1 decides it.
//!
//! Pure ACKs are exempt: each is useful alone (cumulative), so nothing waits
//! for the "last" one. A first version counted them into bursts: the
//! client's ACK stream of a large download became one long burst and went to
//! the HBC, and with BBR (whose pacing and RTT probes ride that ACK clock)
//! the page loads lost 6–10 points against Algorithm 1 (docs/results.md).

use super::{estimate, steer, Ctx, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::{Channel, Nanos, MS};

/// Default burst gap: packets of a TCP flight reach the sender back to back
/// (well under a millisecond apart at the gateway), flights one RTT apart
/// (at least the LLC's few milliseconds).
pub const DEFAULT_GAP: Nanos = 2 * MS;

/// What `burst` keeps per flow (in [`FlowState::burst`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstState {
    /// Wire bytes of the current burst so far.
    pub so_far: u64,
    /// Wire bytes of the flow's previous burst (0: none yet).
    pub previous: u64,
    /// When the flow's previous packet was decided (None: no packet yet).
    pub last_at: Option<Nanos>,
}

impl BurstState {
    /// Accounts a packet of `size` wire bytes at `now` (a new burst after more
    /// than `gap` of silence); returns `rest`, the bytes this packet and the
    /// rest of its burst are expected to put on a channel.
    pub fn on_packet(&mut self, now: Nanos, size: u64, gap: Nanos) -> u64 {
        let new_burst = self.last_at.map_or(true, |t| now.saturating_sub(t) > gap);
        if new_burst && self.so_far > 0 {
            self.previous = self.so_far;
            self.so_far = 0;
        }
        self.last_at = Some(now);
        let before = self.so_far;
        self.so_far += size;
        self.previous.max(self.so_far) - before
    }
}

/// `burst`: Algorithm 1 deciding on the rest of the packet's burst (module docs).
pub struct Burst {
    alpha: f64,
    gap: Nanos,
}

impl Burst {
    /// Weight `alpha` on the cost (Algorithm 1's), bursts split at `gap`.
    pub fn new(alpha: f64, gap: Nanos) -> Burst {
        Burst { alpha, gap }
    }
}

impl Policy for Burst {
    fn spec(&self) -> String {
        super::alpha_gap_spec("burst", self.alpha, self.gap)
    }

    fn decide(&mut self, pkt: &PacketInfo, _: &[u8], flow: &mut FlowState, ctx: &Ctx) -> Decision {
        let size = pkt.ip_len + ctx.overhead;
        let rest = if pkt.is_tcp_control() {
            size as u64 // an ACK is useful alone: Algorithm 1's own decision
        } else {
            flow.burst.on_packet(ctx.now, size as u64, self.gap)
        };
        let (Some(this), Some(whole)) = (
            estimate(size, flow.prev_c, ctx),
            estimate(rest as usize, flow.prev_c, ctx),
        ) else {
            return Decision::new(Channel::Hbc, Outcome::NoEstimate);
        };
        // the decision on the burst's end; `prev_c` and the logged estimate are
        // the packet's own (what the reward-error analysis, Fig. 11, compares)
        steer(flow, whole.reward > self.alpha * this.cost, this)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::DChannel;
    use super::*;
    use crate::Direction;

    // Test setting (NSDI'23 §4.1 footnote, as in dchannel.rs): LLC 250 B/ms,
    // one-way delays HBC 20 ms / LLC 5 ms, alpha 0.75. Algorithm 1 sends a
    // lone packet (empty queue) on the LLC iff 15 - s/250 > 0.75 s/250, i.e.
    // s < 15 * 250 / 1.75 = 2142.86 B.

    fn at(now: Nanos, queue: f64) -> Ctx {
        let mut c = ctx(now, Direction::Downlink);
        c.llc_queue = queue;
        c
    }

    fn send(p: &mut dyn Policy, f: &mut FlowState, len: usize, now: Nanos, queue: f64) -> Channel {
        let pk = udp(1, 2, len);
        p.decide(&pk.0, &pk.1, f, &at(now, queue)).channel
    }

    #[test]
    fn bursts_split_at_the_gap_and_remember_the_previous_total() {
        let mut b = BurstState::default();
        // first burst: 3 x 1000 B, 0.1 ms apart; no history, rest = the packet
        assert_eq!(b.on_packet(0, 1000, 2 * MS), 1000);
        assert_eq!(b.on_packet(MS / 10, 1000, 2 * MS), 1000);
        assert_eq!(b.on_packet(2 * MS / 10, 1000, 2 * MS), 1000);
        // 2 ms later is still the same burst (gap is exclusive)
        assert_eq!(b.on_packet(2 * MS + 2 * MS / 10, 500, 2 * MS), 500);
        assert_eq!((b.so_far, b.previous), (3500, 0));
        // 10 ms of silence: a new burst, expected 3500 B, of which 400 B now
        assert_eq!(b.on_packet(12 * MS, 400, 2 * MS), 3500);
        assert_eq!(b.on_packet(12 * MS + 1, 400, 2 * MS), 3100);
        // past the prediction, the rest is the packet itself
        for _ in 0..7 {
            b.on_packet(12 * MS + 2, 400, 2 * MS);
        }
        assert_eq!(b.so_far, 3600);
        assert_eq!(b.on_packet(12 * MS + 3, 400, 2 * MS), 400);
    }

    #[test]
    fn a_flows_first_burst_is_decided_as_algorithm_1_decides_it() {
        let (mut burst, mut alg1) = (Burst::new(0.75, 2 * MS), DChannel::new(0.75));
        let (mut fb, mut fa) = (flow(), flow());
        // ten 600 B packets 0.05 ms apart, the queue growing by what went on the LLC
        let mut queue = 0.0;
        for i in 0..10 {
            let now = 100 * MS + i * MS / 20;
            let (cb, ca) = (
                send(&mut burst, &mut fb, 600, now, queue),
                send(&mut alg1, &mut fa, 600, now, queue),
            );
            assert_eq!(cb, ca, "packet {i}");
            if ca == Channel::Llc {
                queue += 600.0;
            }
        }
        // 600 + 1200 < 2142.86 <= 600 + 1800: three on the LLC, the rest HBC
        assert_eq!(queue, 1800.0);
        assert_eq!(fb.prev_c, fa.prev_c);
    }

    #[test]
    fn a_packet_whose_burst_will_spill_onto_the_hbc_stays_off_the_llc() {
        let mut p = Burst::new(0.75, 2 * MS);
        let mut f = flow();
        // previous burst: 10 x 1000 B (the first goes on the LLC, as Algorithm 1's)
        assert_eq!(send(&mut p, &mut f, 1000, 100 * MS, 0.0), Channel::Llc);
        for i in 1..10 {
            send(&mut p, &mut f, 1000, 100 * MS + i, 1000.0);
        }
        // 50 ms later, a 1000 B packet that Algorithm 1 sends on the LLC (1000 <
        // 2142.86) but whose burst is expected to total 10,000 B: the burst's end
        // on the LLC is 5 + 10000/250 = 45 ms away against 20 on the HBC -> HBC
        let mut alg1 = DChannel::new(0.75);
        assert_eq!(
            send(&mut alg1, &mut flow(), 1000, 150 * MS, 0.0),
            Channel::Llc
        );
        assert_eq!(send(&mut p, &mut f, 1000, 150 * MS, 0.0), Channel::Hbc);
    }

    #[test]
    fn a_small_burst_after_a_small_one_takes_the_llc() {
        let mut p = Burst::new(0.75, 2 * MS);
        let mut f = flow();
        // a 1500 B request flight, then 40 ms later its next 500 B packet:
        // rest 1500 B: reward 15 - 1500/250 = 9 ms > 0.75 * 500/250 = 1.5 ms -> LLC
        assert_eq!(send(&mut p, &mut f, 1000, 100 * MS, 0.0), Channel::Llc);
        assert_eq!(
            send(&mut p, &mut f, 500, 100 * MS + 1, 1000.0),
            Channel::Llc
        );
        assert_eq!(send(&mut p, &mut f, 500, 140 * MS, 0.0), Channel::Llc);
        // that burst was the 500 B packet alone: behind 1000 B of queue,
        // 15 - (500 + 1000)/250 = 9 ms > 0.75 * 1500/250 = 4.5 ms -> LLC
        assert_eq!(send(&mut p, &mut f, 500, 180 * MS, 1000.0), Channel::Llc);
        // a 1500 B burst expected, behind 1200 B: 15 - (1500 + 1200)/250 = 4.2 ms
        // < 0.75 * (500 + 1200)/250 = 5.1 ms -> HBC, where Algorithm 1 sees
        // 15 - 6.8 = 8.2 ms > 5.1 ms -> LLC
        let mut g = flow();
        g.burst = BurstState {
            so_far: 1500,
            previous: 0,
            last_at: Some(0),
        };
        assert_eq!(send(&mut p, &mut g, 500, 180 * MS, 1200.0), Channel::Hbc);
        let mut alg1 = DChannel::new(0.75);
        assert_eq!(
            send(&mut alg1, &mut flow(), 500, 180 * MS, 1200.0),
            Channel::Llc
        );
    }

    #[test]
    fn acks_are_decided_alone_and_do_not_join_a_burst() {
        let mut p = Burst::new(0.75, 2 * MS);
        let mut f = flow();
        f.burst = BurstState {
            so_far: 10_000,
            previous: 0,
            last_at: Some(100 * MS),
        };
        // 0.5 ms into a 10 KB data burst (whose next packet would go HBC), a
        // 40 B pure ACK: Algorithm 1's 15 - 40/250 > 0.75 * 40/250 -> LLC
        let ack = tcp(crate::packet::TCP_ACK, &[]);
        let d = p.decide(&ack.0, &ack.1, &mut f, &at(100 * MS + MS / 2, 0.0));
        assert_eq!(d.channel, Channel::Llc);
        assert_eq!(f.burst.so_far, 10_000, "the ACK is not part of the burst");
        assert_eq!(f.burst.last_at, Some(100 * MS));
        // a data packet 1 ms later does join it (no previous burst: decided on
        // itself, 1000 B < 2142.86 B -> LLC)
        assert_eq!(send(&mut p, &mut f, 1000, 100 * MS + MS, 0.0), Channel::Llc);
        assert_eq!(f.burst.so_far, 11_000);
    }

    #[test]
    fn no_estimate_means_hbc() {
        let mut p = Burst::new(0.75, 2 * MS);
        let mut c = at(0, 0.0);
        c.hbc_owd = None;
        let pk = udp(1, 2, 100);
        let d = p.decide(&pk.0, &pk.1, &mut flow(), &c);
        assert_eq!((d.channel, d.outcome), (Channel::Hbc, Outcome::NoEstimate));
    }
}
