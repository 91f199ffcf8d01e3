//! One sender's steering pipeline: parse -> flow state -> policy -> LLC queue
//! bookkeeping -> sequence number. The client has one (uplink); the gateway has
//! one per client (downlink), each with that client's virtual LLC queue.

use crate::flow_table::FlowTable;
use crate::llc_queue::LlcQueue;
use crate::packet::{self, FlowKey, PacketInfo};
use crate::policy::{estimate, Ctx, Decision, Outcome, Policy};
use crate::{Channel, Direction, Nanos, MS};

#[derive(Clone, Debug)]
pub struct SteerConfig {
    pub dir: Direction,
    /// Inner MTU (IP bytes).
    pub mtu: usize,
    /// Wire bytes per packet on top of the IP packet (header + outer UDP/IP).
    pub overhead: usize,
    pub llc_bits_per_sec: f64,
    pub flow_capacity: usize,
    pub flow_idle: Nanos,
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
        }
    }
}

/// What the driver needs from the channel estimator at decision time.
#[derive(Clone, Copy, Debug)]
pub struct ChannelView {
    pub hbc_owd: Option<Nanos>,
    pub llc_owd: Option<Nanos>,
    /// Liveness per channel (index = Channel).
    pub alive: [bool; 2],
}

/// The outcome of steering one packet.
#[derive(Clone, Copy, Debug)]
pub struct Steered {
    pub channel: Channel,
    /// 0 when the packet could not be parsed (no flow, never reordered).
    pub flow_id: u16,
    pub seq: u32,
    pub decision: Decision,
    pub key: Option<FlowKey>,
    pub info: Option<PacketInfo>,
    /// Virtual LLC queue depth (bytes) the policy saw.
    pub llc_queue: f64,
}

pub struct Steerer {
    cfg: SteerConfig,
    table: FlowTable,
    queue: LlcQueue,
    policy: Box<dyn Policy>,
    /// Decisions per outcome and channel.
    counts: [[u64; 2]; Outcome::COUNT],
    /// Fill in Algorithm 1's estimate for policies that do not compute it
    /// (for the decision log); off on the hot path unless logging.
    pub estimate_all: bool,
}

impl Steerer {
    pub fn new(cfg: SteerConfig, policy: Box<dyn Policy>) -> Steerer {
        Steerer {
            table: FlowTable::new(cfg.flow_capacity, cfg.flow_idle),
            queue: LlcQueue::new(cfg.llc_bits_per_sec),
            cfg,
            policy,
            counts: [[0; 2]; Outcome::COUNT],
            estimate_all: false,
        }
    }

    pub fn policy_spec(&self) -> String {
        self.policy.spec()
    }

    pub fn flows(&self) -> usize {
        self.table.len()
    }

    pub fn flow_table(&self) -> &FlowTable {
        &self.table
    }

    /// Decisions per (outcome, channel).
    pub fn counts(&self) -> &[[u64; 2]; Outcome::COUNT] {
        &self.counts
    }

    /// Evicts idle flows; call every second or so.
    pub fn expire(&mut self, now: Nanos) {
        self.table.expire(now);
    }

    pub fn steer(&mut self, now: Nanos, pkt: &[u8], view: &ChannelView) -> Steered {
        let llc_queue = self.queue.depth(now);
        let info = match packet::parse(pkt) {
            Ok(i) => i,
            Err(_) => {
                let channel = if view.alive[0] || !view.alive[1] {
                    Channel::Hbc
                } else {
                    Channel::Llc
                };
                return self.finish(
                    now,
                    pkt.len(),
                    Decision::new(channel, Outcome::Unparsed),
                    0,
                    0,
                    None,
                    None,
                    llc_queue,
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
        if !view.alive[d.channel.index()] && view.alive[d.channel.other().index()] {
            d.channel = d.channel.other();
            d.outcome = Outcome::ChannelDown;
        }
        if self.estimate_all && d.estimate.is_none() {
            d.estimate = estimate(info.ip_len + self.cfg.overhead, prev_c, &ctx);
        }
        flow.prev_size = info.ip_len;
        let (id, seq) = (flow.id, flow.next_seq);
        flow.next_seq = flow.next_seq.wrapping_add(1);
        self.finish(
            now,
            info.ip_len,
            d,
            id,
            seq,
            Some(key),
            Some(info),
            llc_queue,
        )
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::build;
    use crate::policy::parse_spec;

    fn view() -> ChannelView {
        ChannelView {
            hbc_owd: Some(20 * MS),
            llc_owd: Some(5 * MS),
            alive: [true, true],
        }
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
        let mut v = view();
        v.alive = [true, false];
        let x = s.steer(0, &build::udp4_sized(100), &v);
        assert_eq!(
            (x.channel, x.decision.outcome),
            (Channel::Hbc, Outcome::ChannelDown)
        );
    }

    #[test]
    fn unparsable_goes_hbc_without_flow_and_is_counted() {
        let mut s = steerer("all-llc");
        let x = s.steer(0, &[0x45, 0, 0], &view());
        assert_eq!((x.channel, x.flow_id), (Channel::Hbc, 0));
        assert_eq!(s.counts()[Outcome::Unparsed as usize], [1, 0]);
    }
}
