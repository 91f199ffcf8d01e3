//! One sender's steering pipeline: parse -> flow state -> policy -> channel
//! fallback -> LLC queue bookkeeping -> sequence number. The client has one
//! (uplink); the gateway has one per client (downlink), each with that
//! client's virtual LLC queue.
//!
//! The fallback comes before any bookkeeping, so the virtual LLC queue, the
//! flow's `prev_c` and the counters describe the send that happens, not the
//! policy's first wish.
//!
//! Sharing the LLC with other devices (crate::llc_share, docs/llc_sharing.md):
//! with a share configured (rule (b)), a packet the policy put on the LLC is
//! admitted by this sender's own token bucket or sent on the HBC instead
//! (`over_share`), after the fallback and before the bookkeeping, so the queue
//! and `prev_c` again follow the send that happens. Rule (c) reaches the policy
//! through [`ChannelView::llc_others`]: the other users' queue the receive half
//! learned from probes, added to this sender's own virtual queue.

use crate::bursts::BurstMeter;
use crate::flow_table::FlowTable;
use crate::llc_queue::LlcQueue;
use crate::llc_share::{ShareBucket, ShareConfig, ShareStats};
use crate::packet::{self, FlowKey, PacketInfo};
use crate::packet_class::PacketClass;
use crate::policy::{estimate, Ctx, Decision, Outcome, Policy};
use crate::{Channel, Direction, Nanos, MS};

/// Configuration of one sender.
#[derive(Clone, Debug)]
pub struct SteerConfig {
    /// Direction of the packets this sender steers.
    pub dir: Direction,
    /// Inner MTU (IP bytes).
    pub mtu: usize,
    /// Wire bytes per packet on top of the IP packet (header + outer UDP/IP).
    pub overhead: usize,
    /// Rate the virtual LLC queue drains at (`--llc-mbit`).
    pub llc_bits_per_sec: f64,
    /// Flows kept at most (`--flow-capacity`).
    pub flow_capacity: usize,
    /// A flow unseen this long is forgotten.
    pub flow_idle: Nanos,
    /// This sender's share of the LLC (rule (b), `--llc-capacity` or
    /// `--llc-share-rate`); `None`: the policy's LLC packets all go on the LLC.
    pub llc_share: Option<ShareConfig>,
}

impl Default for SteerConfig {
    fn default() -> Self {
        SteerConfig {
            dir: Direction::Uplink,
            mtu: 1456,
            overhead: 44,
            llc_bits_per_sec: 2e6,
            flow_capacity: 65536,
            flow_idle: 120_000 * MS,
            llc_share: None,
        }
    }
}

/// What the sender knows about the two channels at decision time.
#[derive(Clone, Copy, Debug)]
pub struct ChannelView {
    /// HBC one-way delay estimate (RTT/2); `None` until measured.
    pub hbc_owd: Option<Nanos>,
    /// LLC one-way delay estimate (RTT/2); `None` until measured.
    pub llc_owd: Option<Nanos>,
    /// Liveness per channel (index = Channel): heard from within `--channel-dead-ms`.
    pub alive: [bool; 2],
    /// Whether the peer's endpoint on the channel is known (index = Channel).
    /// A gateway learns a client's endpoints from its datagrams; until then
    /// nothing can be sent on that channel.
    pub reachable: [bool; 2],
    /// Bytes the other users of a shared LLC are estimated to have queued
    /// (rule (c), `--llc-share probe`): added to this sender's own virtual
    /// queue as Algorithm 1's `queue_llc`. 0 without the rule.
    pub llc_others: f64,
}

impl ChannelView {
    /// Both channels alive and reachable, with the given one-way delays.
    pub fn up(hbc_owd: Option<Nanos>, llc_owd: Option<Nanos>) -> ChannelView {
        ChannelView {
            hbc_owd,
            llc_owd,
            alive: [true, true],
            reachable: [true, true],
            llc_others: 0.0,
        }
    }

    /// The channel is reachable and alive.
    pub fn usable(&self, ch: Channel) -> bool {
        self.reachable[ch.index()] && self.alive[ch.index()]
    }

    /// The channel fallback rule: the channel to use instead of `chosen`, if
    /// any. An unreachable channel (no endpoint) is never used while the
    /// other is reachable; a dead channel is left for a live one. When both
    /// are equally bad the policy's choice stands.
    pub fn fallback(&self, chosen: Channel) -> Option<Channel> {
        let (c, o) = (chosen.index(), chosen.other().index());
        let usable = |i: usize| self.usable(Channel::ALL[i]);
        let better = if self.reachable[c] != self.reachable[o] {
            self.reachable[o]
        } else {
            !usable(c) && usable(o)
        };
        better.then(|| chosen.other())
    }
}

/// The outcome of steering one packet.
#[derive(Clone, Copy, Debug)]
pub struct Steered {
    /// The channel to send on (after fallback).
    pub channel: Channel,
    /// 0 when the packet could not be parsed (no flow, never reordered).
    pub flow_id: u16,
    /// The packet's per-flow sequence number.
    pub seq: u32,
    /// The decision (its channel and outcome after fallback).
    pub decision: Decision,
    /// The packet's flow, if it could be parsed.
    pub key: Option<FlowKey>,
    /// The parsed packet, if it could be parsed.
    pub info: Option<PacketInfo>,
    /// LLC queue depth (bytes) the policy saw: the virtual queue, plus the
    /// other users' estimated queue under rule (c).
    pub llc_queue: f64,
    /// What kind of packet it is (for the agents' counters; never decides).
    pub class: PacketClass,
    /// It starts a burst on its channel (crate::bursts).
    pub new_burst: bool,
    /// The channel a copy of the packet goes on too ([`Decision::duplicate`]):
    /// the other one, when it is reachable and alive (and, for the LLC, within
    /// the device's share); its LLC bytes are charged to the virtual queue.
    pub copy: Option<Channel>,
}

/// One sender's steering state: flow table, virtual LLC queue, policy.
pub struct Steerer {
    cfg: SteerConfig,
    table: FlowTable,
    queue: LlcQueue,
    policy: Box<dyn Policy>,
    /// This sender's LLC share (rule (b)), if one is configured.
    share: Option<ShareBucket>,
    /// Decisions per outcome and channel.
    counts: [[u64; 2]; Outcome::COUNT],
    /// When each channel last carried a packet of this sender.
    bursts: BurstMeter,
    /// Fill in Algorithm 1's estimate for policies that do not compute it
    /// (for the decision log); off on the hot path unless logging.
    pub estimate_all: bool,
}

impl Steerer {
    /// A sender with empty flow table and queue.
    pub fn new(cfg: SteerConfig, policy: Box<dyn Policy>) -> Steerer {
        Steerer {
            table: FlowTable::new(cfg.flow_capacity, cfg.flow_idle),
            queue: LlcQueue::new(cfg.llc_bits_per_sec),
            share: cfg.llc_share.map(ShareBucket::new),
            cfg,
            policy,
            counts: [[0; 2]; Outcome::COUNT],
            bursts: BurstMeter::default(),
            estimate_all: false,
        }
    }

    /// The policy's canonical spec.
    pub fn policy_spec(&self) -> String {
        self.policy.spec()
    }

    /// Flows in the table.
    pub fn flows(&self) -> usize {
        self.table.len()
    }

    /// The flow table (for inspection).
    pub fn flow_table(&self) -> &FlowTable {
        &self.table
    }

    /// Decisions per (outcome, channel).
    pub fn counts(&self) -> &[[u64; 2]; Outcome::COUNT] {
        &self.counts
    }

    /// Evicts the least recently seen flow for the gateway-wide flow cap
    /// ([`FlowTable::evict_for_gateway`]); false if there is none.
    pub fn evict_for_gateway(&mut self) -> bool {
        self.table.evict_for_gateway()
    }

    /// Evicts idle flows; call every second or so.
    pub fn expire(&mut self, now: Nanos) {
        self.table.expire(now);
    }

    /// Virtual LLC queue depth (bytes) at `now`.
    pub fn llc_queue(&mut self, now: Nanos) -> f64 {
        self.queue.depth(now)
    }

    /// When the virtual LLC queue will be empty if nothing more is put on it
    /// (what the receive half needs for rule (c), [`LlcQueue::empty_at`]).
    pub fn llc_empty_at(&self) -> Nanos {
        self.queue.empty_at()
    }

    /// What the LLC share decided so far (`None`: no share configured).
    pub fn share_stats(&self) -> Option<ShareStats> {
        self.share.as_ref().map(|b| b.stats())
    }

    /// Steers one inner packet: picks its channel (policy, then the
    /// [`ChannelView::fallback`] rule), charges the virtual LLC queue if that
    /// channel is the LLC, and numbers it within its flow.
    pub fn steer(&mut self, now: Nanos, pkt: &[u8], view: &ChannelView) -> Steered {
        let llc_queue = self.queue.depth(now) + view.llc_others;
        let info = match packet::parse(pkt) {
            Ok(i) => i,
            Err(_) => {
                // No flow, no policy: the HBC unless only the LLC can carry it.
                let channel = view.fallback(Channel::Hbc).unwrap_or(Channel::Hbc);
                return self.finish(
                    now,
                    pkt.len(),
                    Decision::new(channel, Outcome::Unparsed),
                    0,
                    0,
                    None,
                    None,
                    llc_queue,
                    PacketClass::Other,
                );
            }
        };
        let key = info.key(self.cfg.dir);
        let ctx = Ctx {
            now,
            dir: self.cfg.dir,
            llc_queue,
            llc_rate: self.queue.rate(),
            hbc_owd: view.hbc_owd,
            llc_owd: view.llc_owd,
            mtu: self.cfg.mtu,
            overhead: self.cfg.overhead,
        };
        let flow = self.table.get_or_insert(key, now);
        let prev_c = flow.prev_c;
        let mut d = self.policy.decide(&info, pkt, flow, &ctx);
        let wire_bytes = info.ip_len + self.cfg.overhead;
        let instead = match view.fallback(d.channel) {
            Some(other) => Some((other, Outcome::ChannelDown)),
            // Over the device's share: the HBC, never a drop (only while the
            // HBC can be reached; else the packet has no other way out).
            None if d.channel == Channel::Llc && view.reachable[Channel::Hbc.index()] => self
                .share
                .as_mut()
                .map(|b| b.admit(now, wire_bytes))
                .filter(|&ch| ch == Channel::Hbc)
                .map(|ch| (ch, Outcome::OverShare)),
            None => None,
        };
        if let Some((other, outcome)) = instead {
            d.channel = other;
            d.outcome = outcome;
            // The policy advanced prev_c for the channel it wanted; the flow's
            // previous packet now completes on the other one.
            if let Some(e) = d.estimate {
                let c = match other {
                    Channel::Hbc => e.c_hbc,
                    Channel::Llc => e.c_llc,
                };
                flow.prev_c = prev_c.max(c);
            }
        }
        if self.estimate_all && d.estimate.is_none() {
            d.estimate = estimate(info.ip_len + self.cfg.overhead, prev_c, &ctx);
        }
        flow.prev_size = info.ip_len;
        let (id, seq) = (flow.id, flow.next_seq);
        flow.next_seq = flow.next_seq.wrapping_add(1);
        let class = PacketClass::of(Some(&info));
        let copy = d.channel.other();
        let copy = (d.duplicate && view.usable(copy)).then_some(copy);
        // A copy on the LLC is LLC traffic like any other: within the share, charged.
        let copy = copy.filter(|&c| {
            c == Channel::Hbc
                || self
                    .share
                    .as_mut()
                    .map_or(true, |b| b.admit(now, wire_bytes) == Channel::Llc)
        });
        if copy == Some(Channel::Llc) {
            self.queue.enqueue(now, wire_bytes);
        }
        let mut steered = self.finish(
            now,
            info.ip_len,
            d,
            id,
            seq,
            Some(key),
            Some(info),
            llc_queue,
            class,
        );
        steered.copy = copy;
        steered
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        now: Nanos,
        ip_len: usize,
        decision: Decision,
        flow_id: u16,
        seq: u32,
        key: Option<FlowKey>,
        info: Option<PacketInfo>,
        llc_queue: f64,
        class: PacketClass,
    ) -> Steered {
        if decision.channel == Channel::Llc {
            self.queue.enqueue(now, ip_len + self.cfg.overhead);
        }
        self.counts[decision.outcome as usize][decision.channel.index()] += 1;
        Steered {
            channel: decision.channel,
            flow_id,
            seq,
            decision,
            key,
            info,
            llc_queue,
            class,
            new_burst: self.bursts.on_send(now, decision.channel),
            copy: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::build;
    use crate::policy::parse_spec;

    fn view() -> ChannelView {
        ChannelView::up(Some(20 * MS), Some(5 * MS))
    }

    /// [`view`] with only the LLC dead.
    fn llc_dead() -> ChannelView {
        ChannelView {
            alive: [true, false],
            ..view()
        }
    }

    /// Where a packet went and why.
    fn outcome(x: &Steered) -> (Channel, Outcome) {
        (x.channel, x.decision.outcome)
    }

    fn steerer(spec: &str) -> Steerer {
        Steerer::new(
            SteerConfig {
                overhead: 0,
                ..SteerConfig::default()
            },
            parse_spec(spec, 0.75).unwrap(),
        )
    }

    /// [`steerer`] with an LLC share of 1 Mbit/s and a burst of `burst` bytes.
    fn with_share(spec: &str, burst: u32) -> Steerer {
        Steerer::new(
            SteerConfig {
                overhead: 0,
                llc_share: Some(ShareConfig::new(1_000_000, burst).unwrap()),
                ..SteerConfig::default()
            },
            parse_spec(spec, 0.75).unwrap(),
        )
    }

    /// A 1000-byte UDP packet (IP length) of flow `sport`.
    fn udp1000(sport: u16) -> Vec<u8> {
        build::udp4([198, 19, 0, 2], [1, 1, 1, 1], sport, 80, &[0; 972])
    }

    #[test]
    fn over_share_llc_packets_go_to_the_hbc_and_leave_the_queue_alone() {
        // all-llc with a share of 1 Mbit/s (125 B/ms), burst 1500 B, wire
        // bytes = IP bytes (overhead 0): at t=0 the first 1000 B packet fits
        // (500 B left), the second does not -> HBC (over_share); at t=4 ms the
        // bucket holds 500 + 4 x 125 = 1000 B: the third fits.
        let mut s = with_share("all-llc", 1500);
        let a = s.steer(0, &udp1000(1), &view());
        let b = s.steer(0, &udp1000(2), &view());
        assert_eq!(outcome(&a), (Channel::Llc, Outcome::Fixed));
        assert_eq!(outcome(&b), (Channel::Hbc, Outcome::OverShare));
        // the diverted packet was not charged to the virtual LLC queue
        assert!((s.llc_queue(0) - 1000.0).abs() < 1e-6);
        let c = s.steer(4 * MS, &udp1000(3), &view());
        assert_eq!(outcome(&c), (Channel::Llc, Outcome::Fixed));
        // with the HBC unreachable, the share cannot divert: the LLC carries it
        let no_hbc = ChannelView {
            reachable: [false, true],
            ..view()
        };
        let d = s.steer(4 * MS, &udp1000(4), &no_hbc);
        assert_eq!(outcome(&d), (Channel::Llc, Outcome::Fixed));
        assert_eq!(
            s.share_stats(),
            Some(ShareStats {
                llc_packets: 2,
                llc_bytes: 2000,
                diverted_packets: 1,
                diverted_bytes: 1000,
            })
        );
        assert_eq!(s.counts()[Outcome::OverShare as usize], [1, 0]);
        // no share configured: no stats, everything as before
        let mut plain = steerer("all-llc");
        assert_eq!(plain.steer(0, &udp1000(1), &view()).channel, Channel::Llc);
        assert_eq!(plain.steer(0, &udp1000(2), &view()).channel, Channel::Llc);
        assert_eq!(plain.share_stats(), None);
    }

    #[test]
    fn over_share_moves_prev_c_to_the_hbc_completion() {
        // dchannel (HBC/LLC one-way 20/5 ms, 250 B/ms): a lone 1000 B packet
        // goes on the LLC with c_llc = 5 + 4 = 9 ms. A share whose burst (999
        // B) cannot hold it diverts it: the flow's prev_c is then c_hbc = 20 ms
        // (as for a channel fallback), not the LLC's 9 ms.
        let mut s = Steerer::new(
            SteerConfig {
                overhead: 0,
                llc_share: Some(ShareConfig::new(1_000_000, 999).unwrap()),
                ..SteerConfig::default()
            },
            parse_spec("dchannel", 0.75).unwrap(),
        );
        let pkt = udp1000(7);
        let x = s.steer(0, &pkt, &view());
        assert_eq!(outcome(&x), (Channel::Hbc, Outcome::OverShare));
        let flow = s.flow_table().get(&x.key.unwrap()).unwrap();
        assert_eq!(flow.prev_c, (20 * MS) as f64);
    }

    #[test]
    fn other_users_queue_is_added_to_queue_llc() {
        // dchannel, 15 ms gap, 250 B/ms, alpha 0.75: LLC while packet +
        // queue_llc < 2142.9 B. A lone 1000 B packet goes on the LLC; with
        // 1200 B of other users' queue (rule c) it is 2200 B: HBC.
        let mut s = steerer("dchannel");
        assert_eq!(s.steer(0, &udp1000(1), &view()).channel, Channel::Llc);
        let mut s = steerer("dchannel");
        let crowded = ChannelView {
            llc_others: 1200.0,
            ..view()
        };
        let x = s.steer(0, &udp1000(1), &crowded);
        assert_eq!(outcome(&x), (Channel::Hbc, Outcome::Reward));
        assert!((x.llc_queue - 1200.0).abs() < 1e-6);
        // 1100 B of others: 2100 B < 2142.9 B: still the LLC
        let mut s = steerer("dchannel");
        let x = s.steer(
            0,
            &udp1000(1),
            &ChannelView {
                llc_others: 1100.0,
                ..view()
            },
        );
        assert_eq!(x.channel, Channel::Llc);
    }

    #[test]
    fn queue_builds_up_and_pushes_later_packets_to_hbc() {
        // dchannel alpha 0.75, 15 ms gap, 250 B/ms: LLC while packet + queue
        // < 2142.9 B. Back-to-back 1000 B packets of different flows at t=0:
        // 1st: 1000 B -> LLC (queue 1000); 2nd: 2000 B -> LLC (queue 2000);
        // 3rd: 3000 B -> HBC.
        let mut s = steerer("dchannel");
        let ch: Vec<Channel> = (0..3)
            .map(|i| {
                s.steer(
                    0,
                    &build::udp4([198, 19, 0, 2], [1, 1, 1, 1], 1000 + i, 80, &[0; 972]),
                    &view(),
                )
                .channel
            })
            .collect();
        assert_eq!(ch, vec![Channel::Llc, Channel::Llc, Channel::Hbc]);
        // 4 ms later the queue has drained 1000 B: 1000 + 1000 = 2000 -> LLC
        let d = s.steer(
            4 * MS,
            &build::udp4([198, 19, 0, 2], [1, 1, 1, 1], 2000, 80, &[0; 972]),
            &view(),
        );
        assert_eq!(d.channel, Channel::Llc);
        assert!((d.llc_queue - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn per_flow_sequence_numbers() {
        let mut s = steerer("all-hbc");
        let a = build::tcp4([198, 19, 0, 2], [1, 1, 1, 1], 1, 80, 0x10, &[]);
        let b = build::tcp4([198, 19, 0, 2], [1, 1, 1, 1], 2, 80, 0x10, &[]);
        let r: Vec<(u16, u32)> = [&a, &a, &b, &a]
            .iter()
            .map(|p| {
                let x = s.steer(0, p, &view());
                (x.flow_id, x.seq)
            })
            .collect();
        assert_eq!(r, vec![(1, 0), (1, 1), (2, 0), (1, 2)]);
    }

    #[test]
    fn dead_channel_falls_back() {
        let mut s = steerer("all-llc");
        let v = llc_dead();
        let x = s.steer(0, &build::udp4_sized(100), &v);
        assert_eq!(outcome(&x), (Channel::Hbc, Outcome::ChannelDown));
    }

    #[test]
    fn fallback_does_not_charge_the_llc_queue() {
        // all-llc, LLC dead: 1000 B goes on the HBC, so the virtual LLC queue
        // stays empty (before, it was charged 1000 B for a send that did not happen).
        let mut s = steerer("all-llc");
        let v = llc_dead();
        let x = s.steer(0, &build::udp4_sized(1000), &v);
        assert_eq!(x.channel, Channel::Hbc);
        assert_eq!(s.llc_queue(0), 0.0);
        // LLC alive again: charged 1000 B, drained at 250 B/ms.
        let x = s.steer(0, &build::udp4_sized(1000), &view());
        assert_eq!(x.channel, Channel::Llc);
        assert!((s.llc_queue(2 * MS) - 500.0).abs() < 1e-6);
    }

    #[test]
    fn unreachable_channel_is_never_chosen() {
        // all-llc with no LLC endpoint known: HBC (channel_down), even when the
        // HBC counts as dead; the LLC is never charged.
        let mut s = steerer("all-llc");
        let mut v = view();
        v.reachable = [true, false];
        v.alive = [false, true];
        let x = s.steer(0, &build::udp4_sized(100), &v);
        assert_eq!(outcome(&x), (Channel::Hbc, Outcome::ChannelDown));
        assert_eq!(s.llc_queue(0), 0.0);
        // Unparsable packets follow the same rule: HBC unreachable -> LLC.
        v.reachable = [false, true];
        let x = s.steer(0, &[0x45, 0, 0], &v);
        assert_eq!(outcome(&x), (Channel::Llc, Outcome::Unparsed));
    }

    #[test]
    fn fallback_moves_prev_c_to_the_channel_used() {
        // dchannel, 15 ms one-way gap, 250 B/ms. A 100 B packet at t=0 wants the
        // LLC (c_llc = 5.4 ms) but the LLC is dead: it goes on the HBC, whose
        // completion c_hbc = 20 ms becomes the flow's prev_c. The next packet of
        // the flow (t = 1 ms, LLC alive): c_llc = 6.4 ms, c_hbc = 21 ms,
        // reward = 21 - max(20, 6.4) = 1 ms > 0.75 * 0.4 ms -> LLC. Had prev_c
        // stayed at the LLC's 5.4 ms, the reward would read 14.6 ms.
        let mut s = steerer("dchannel");
        let v = llc_dead();
        let pkt = build::udp4_sized(100);
        let x = s.steer(0, &pkt, &v);
        assert_eq!(x.channel, Channel::Hbc);
        let x = s.steer(MS, &pkt, &view());
        let e = x.decision.estimate.unwrap();
        assert!(
            (e.reward - 1.0 * MS as f64).abs() < 1.0,
            "reward {}",
            e.reward
        );
        assert_eq!(x.channel, Channel::Llc);
    }

    #[test]
    fn unparsable_goes_hbc_without_flow_and_is_counted() {
        let mut s = steerer("all-llc");
        let x = s.steer(0, &[0x45, 0, 0], &view());
        assert_eq!((x.channel, x.flow_id), (Channel::Hbc, 0));
        assert_eq!(s.counts()[Outcome::Unparsed as usize], [1, 0]);
    }

    /// A data-channel input event as `realtime` sees it (a DTLS application-data
    /// record, RFC 6347 §4.1, first byte 23) of 137 IP bytes, from port `sport`.
    fn input137(sport: u16) -> Vec<u8> {
        let mut rec = vec![23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9, 0, 96];
        rec.resize(13 + 96, 0xab);
        build::udp4([198, 19, 0, 2], [198, 18, 0, 1], sport, 50000, &rec)
    }

    #[test]
    fn copies_go_on_the_other_channel_and_llc_copies_are_charged() {
        // realtime-dup, gap = (20 - 5) ms x 250 B/ms = 3750 B (realtime.rs tests):
        // inputs of 137 B at one instant take the LLC while queue + 137 < 3750,
        // i.e. the first 27 (26 x 137 + 137 = 3699); each has a copy on the HBC.
        // The 28th (3699 + 137 >= 3750) goes on the HBC, its copy on the LLC,
        // charged: 28 x 137 = 3836 queued bytes.
        let mut s = steerer("realtime-dup");
        for i in 0..27 {
            let x = s.steer(0, &input137(40000), &view());
            assert_eq!(
                (x.channel, x.copy),
                (Channel::Llc, Some(Channel::Hbc)),
                "{i}"
            );
            assert_eq!(x.seq, i, "both copies carry the packet's one number");
        }
        assert!((s.llc_queue(0) - 27.0 * 137.0).abs() < 1e-6);
        let x = s.steer(0, &input137(40000), &view());
        assert_eq!((x.channel, x.copy), (Channel::Hbc, Some(Channel::Llc)));
        assert!((s.llc_queue(0) - 28.0 * 137.0).abs() < 1e-6);
        // the decisions count each packet once, on its own channel
        assert_eq!(s.counts()[Outcome::RtInput as usize], [1, 27]);
        // a dead or unreachable other channel gets no copy
        let x = s.steer(0, &input137(40000), &llc_dead());
        assert_eq!((x.channel, x.copy), (Channel::Hbc, None));
        let no_hbc = ChannelView {
            reachable: [false, true],
            ..view()
        };
        let x = s.steer(100 * MS, &input137(40001), &no_hbc);
        assert_eq!((x.channel, x.copy), (Channel::Llc, None));
        // plain realtime never copies
        let x = steerer("realtime").steer(0, &input137(40000), &view());
        assert_eq!((x.channel, x.copy), (Channel::Llc, None));
    }

    #[test]
    fn an_llc_copy_over_the_share_is_not_sent() {
        // Share of 1 Mbit/s, burst 200 B: the HBC-bound input's LLC copy (137 B)
        // fits once; a second copy at the same instant (63 B left) does not.
        let mut s = with_share("realtime-dup", 200);
        // no room on the LLC for the primary: the HBC one-way delay equals the LLC's
        let flat = ChannelView::up(Some(5 * MS), Some(5 * MS));
        let x = s.steer(0, &input137(40000), &flat);
        assert_eq!((x.channel, x.copy), (Channel::Hbc, Some(Channel::Llc)));
        let y = s.steer(0, &input137(40000), &flat);
        assert_eq!((y.channel, y.copy), (Channel::Hbc, None));
        assert!((s.llc_queue(0) - 137.0).abs() < 1e-6);
    }
}
