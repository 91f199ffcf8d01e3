//! Steering policies: one file each, all behind the [`Policy`] trait.
//!
//! A policy sees one parsed packet, the sender's state of its flow and the
//! current channel estimates ([`Ctx`]) and picks a channel. It is sans-I/O and
//! deterministic, so every policy is unit-tested against hand-computed
//! decisions. The policies without parameters or state of their own are plain
//! functions ([`RuleFn`]), made policies by [`Rule`] under their spec name.

mod all;
mod asap;
mod burst;
mod dchannel;
mod pkt_control;
mod pkt_size;
mod pkt_state;
mod pkt_uplink;
mod prewarm;
mod realtime;

pub use all::{all_hbc, all_llc};
pub use asap::asap;
pub use burst::{Burst, BurstState};
pub use dchannel::DChannel;
pub use pkt_control::pkt_control;
pub use pkt_size::PktSize;
pub use pkt_state::pkt_state;
pub use pkt_uplink::pkt_uplink;
pub use prewarm::Prewarm;
pub use realtime::Realtime;

use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::{Channel, Direction, Nanos, MS};
use std::fmt;

/// Everything a policy may look at besides the packet and its flow.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// The decision instant.
    pub now: Nanos,
    /// Direction of the packets this sender steers.
    pub dir: Direction,
    /// Virtual LLC queue depth in bytes (see [`crate::llc_queue`]).
    pub llc_queue: f64,
    /// Configured LLC rate in bytes per nanosecond.
    pub llc_rate: f64,
    /// HBC one-way delay estimate (RTT/2), `None` until the first probe returns.
    pub hbc_owd: Option<Nanos>,
    /// LLC one-way delay estimate (RTT/2), `None` until the first probe returns.
    pub llc_owd: Option<Nanos>,
    /// Inner MTU (largest IP packet the TUN hands us).
    pub mtu: usize,
    /// Bytes each packet costs on a channel on top of its IP length
    /// (dchannel header + outer UDP/IP headers).
    pub overhead: usize,
}

/// Algorithm 1's estimated completion times for one packet (all in ns).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Estimated completion time on the HBC: `now + hbc_owd`.
    pub c_hbc: f64,
    /// Estimated completion time on the LLC: `now + llc_owd + (size + queue) / rate`.
    pub c_llc: f64,
    /// `c_hbc - max(prev_c, c_llc)`: time saved by the LLC (may be negative).
    pub reward: f64,
    /// `(size + queue) / rate`: LLC time the packet occupies.
    pub cost: f64,
}

/// NSDI'23 Algorithm 1, lines 1-4: completion times, reward and cost of
/// sending a packet of `size` wire bytes on the LLC, given the flow's `prev_c`.
pub fn estimate(size: usize, prev_c: f64, ctx: &Ctx) -> Option<Estimate> {
    let (hbc, llc) = (ctx.hbc_owd?, ctx.llc_owd?);
    let now = ctx.now as f64;
    let cost = (size as f64 + ctx.llc_queue) / ctx.llc_rate;
    let c_llc = now + llc as f64 + cost;
    let c_hbc = now + hbc as f64;
    let reward = c_hbc - prev_c.max(c_llc);
    Some(Estimate {
        c_hbc,
        c_llc,
        reward,
        cost,
    })
}

/// NSDI'23 Algorithm 1, lines 5-9: the packet whose completion times are `e`
/// takes the LLC iff `llc`; the flow's `prev_c` moves to the chosen channel's
/// completion time. Shared by every policy that keeps Algorithm 1's ordering.
pub fn steer(flow: &mut FlowState, llc: bool, e: Estimate) -> Decision {
    let (channel, done) = if llc {
        (Channel::Llc, e.c_llc)
    } else {
        (Channel::Hbc, e.c_hbc)
    };
    flow.prev_c = flow.prev_c.max(done);
    Decision {
        channel,
        outcome: Outcome::Reward,
        estimate: Some(e),
        wake_hbc: false,
        unordered: false,
        duplicate: false,
    }
}

/// Why a packet went where it went; counted per channel in the stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `dchannel`: reward > alpha * cost (LLC) or not (HBC).
    Reward = 0,
    /// `dchannel` before both RTT estimates exist: HBC (safe default).
    NoEstimate,
    /// `all-hbc` / `all-llc`.
    Fixed,
    /// `pkt-size`: smaller than N bytes.
    Small,
    /// `pkt-size`: N bytes or larger.
    Large,
    /// `pkt-control`: payload-free TCP (SYN, ACK, FIN, RST).
    TcpControl,
    /// `pkt-control`: anything but payload-free TCP.
    Other,
    /// `pkt-uplink`: client to server.
    Uplink,
    /// `pkt-uplink`: server to client.
    Downlink,
    /// `pkt-state`: this and the previous packet below MTU size.
    SmallAfterSmall,
    /// `pkt-state`: this or the previous packet at MTU size.
    LargeOrAfterLarge,
    /// `asap`: DNS (UDP port 53).
    Dns,
    /// `asap`: TCP SYN or SYN-ACK.
    TcpHandshake,
    /// `asap`: TLS handshake or ChangeCipherSpec record.
    TlsHandshake,
    /// `asap`: other uplink (requests).
    Request,
    /// `asap`: other downlink (responses).
    Response,
    /// Inner packet could not be parsed: sent on the HBC without a flow.
    Unparsed,
    /// The chosen channel is down (no probe answer): sent on the other one.
    ChannelDown,
    /// `pkt-state`, `pkt-control`: a QUIC long-header packet (the handshake; crate::quic).
    QuicHandshake,
    /// `pkt-control`: a small QUIC short-header packet (stands in for a pure ACK).
    QuicControl,
    /// `realtime`: STUN, or a DTLS handshake/ChangeCipherSpec/alert record.
    RtSetup,
    /// `realtime`: RTCP (receiver reports, NACK, PLI, congestion-control feedback).
    RtRtcp,
    /// `realtime`: a DTLS application-data record: the data channel (input events).
    RtInput,
    /// `realtime`: an RTP packet, steered with its frame.
    RtMedia,
    /// Put on the LLC by the policy, but over the device's LLC share
    /// (`--llc-capacity`/`--llc-share-rate`, rule (b) of crate::llc_share):
    /// sent on the HBC instead.
    OverShare,
}

impl Outcome {
    /// Number of outcomes (size of per-outcome counter arrays).
    pub const COUNT: usize = Outcome::OverShare as usize + 1;
    /// Every outcome, in counter order.
    pub const ALL: [Outcome; Outcome::COUNT] = [
        Outcome::Reward,
        Outcome::NoEstimate,
        Outcome::Fixed,
        Outcome::Small,
        Outcome::Large,
        Outcome::TcpControl,
        Outcome::Other,
        Outcome::Uplink,
        Outcome::Downlink,
        Outcome::SmallAfterSmall,
        Outcome::LargeOrAfterLarge,
        Outcome::Dns,
        Outcome::TcpHandshake,
        Outcome::TlsHandshake,
        Outcome::Request,
        Outcome::Response,
        Outcome::Unparsed,
        Outcome::ChannelDown,
        Outcome::QuicHandshake,
        Outcome::QuicControl,
        Outcome::RtSetup,
        Outcome::RtRtcp,
        Outcome::RtInput,
        Outcome::RtMedia,
        Outcome::OverShare,
    ];

    /// Stable name (stats keys, decision log).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Reward => "reward",
            Outcome::NoEstimate => "no_estimate",
            Outcome::Fixed => "fixed",
            Outcome::Small => "small",
            Outcome::Large => "large",
            Outcome::TcpControl => "tcp_control",
            Outcome::Other => "other",
            Outcome::Uplink => "uplink",
            Outcome::Downlink => "downlink",
            Outcome::SmallAfterSmall => "small_after_small",
            Outcome::LargeOrAfterLarge => "large_or_after_large",
            Outcome::Dns => "dns",
            Outcome::TcpHandshake => "tcp_handshake",
            Outcome::TlsHandshake => "tls_handshake",
            Outcome::Request => "request",
            Outcome::Response => "response",
            Outcome::Unparsed => "unparsed",
            Outcome::ChannelDown => "channel_down",
            Outcome::QuicHandshake => "quic_handshake",
            Outcome::QuicControl => "quic_control",
            Outcome::RtSetup => "rt_setup",
            Outcome::RtRtcp => "rt_rtcp",
            Outcome::RtInput => "rt_input",
            Outcome::RtMedia => "rt_media",
            Outcome::OverShare => "over_share",
        }
    }
}

/// A policy's verdict on one packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The channel picked.
    pub channel: Channel,
    /// Why.
    pub outcome: Outcome,
    /// Algorithm 1's estimate when the policy computed it (`dchannel`).
    pub estimate: Option<Estimate>,
    /// Also wake the device's HBC radio: the sender sends a
    /// [`ProbeKind::Wake`](crate::wire::ProbeKind::Wake) on the HBC beside
    /// this packet (`prewarm`; only meaningful at the client).
    pub wake_hbc: bool,
    /// The packet carries its own ordering (RTP sequence numbers and a jitter
    /// buffer, DTLS/SCTP record numbers): the receiver's reorder buffer passes
    /// it on at once instead of holding it behind its flow's earlier packets
    /// (the header's [`FLAG_UNORDERED`](crate::wire::FLAG_UNORDERED); `realtime`).
    pub unordered: bool,
    /// Also send a copy of the packet on the other channel, so that it arrives
    /// at the faster channel's delay whatever the estimates say (`realtime-dup`:
    /// input events). Both copies carry [`FLAG_DUPLICATE`](crate::wire::FLAG_DUPLICATE);
    /// the receiver delivers the first and drops the second (crate::dedupe).
    pub duplicate: bool,
}

impl Decision {
    /// A decision without estimate.
    pub fn new(channel: Channel, outcome: Outcome) -> Decision {
        Decision {
            channel,
            outcome,
            estimate: None,
            wake_hbc: false,
            unordered: false,
            duplicate: false,
        }
    }

    /// The LLC for outcome `llc` when `on_llc` holds, else the HBC for `hbc`:
    /// the shape of every two-way rule.
    pub fn llc_if(on_llc: bool, llc: Outcome, hbc: Outcome) -> Decision {
        if on_llc {
            Decision::new(Channel::Llc, llc)
        } else {
            Decision::new(Channel::Hbc, hbc)
        }
    }
}

/// A steering policy.
pub trait Policy: Send {
    /// The canonical spec string (e.g. `pkt-size:750`).
    fn spec(&self) -> String;
    /// Picks a channel for `pkt` (parsed from `raw`); may update `flow`.
    fn decide(&mut self, pkt: &PacketInfo, raw: &[u8], flow: &mut FlowState, ctx: &Ctx)
        -> Decision;
}

/// A `--policy` string that is not one of the known schemes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The `--policy` string as given.
    pub spec: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "policy {:?}: {}; expected one of dchannel, dchannel:alpha=A, all-hbc, all-llc, \
             pkt-size:N, pkt-control, pkt-uplink, pkt-state, asap, \
             prewarm[:alpha=A,gap_ms=G], burst[:alpha=A,gap_ms=G], realtime[:alpha=A], \
             realtime-dup[:alpha=A]",
            self.spec, self.reason
        )
    }
}

impl std::error::Error for SpecError {}

/// A policy without parameters or state of its own: it picks from the packet
/// (parsed, and its bytes), its flow and the context alone.
pub type RuleFn = fn(&PacketInfo, &[u8], &FlowState, &Ctx) -> Decision;

/// A [`RuleFn`] as a [`Policy`], under its spec name.
#[derive(Clone, Copy)]
pub struct Rule {
    name: &'static str,
    decide: RuleFn,
}

impl Rule {
    /// The policy `name` (e.g. `pkt-control`) that decides by `decide`.
    pub const fn new(name: &'static str, decide: RuleFn) -> Rule {
        Rule { name, decide }
    }
}

impl Policy for Rule {
    fn spec(&self) -> String {
        self.name.into()
    }

    fn decide(&mut self, p: &PacketInfo, raw: &[u8], f: &mut FlowState, ctx: &Ctx) -> Decision {
        (self.decide)(p, raw, f, ctx)
    }
}

/// Every policy without parameters, by spec name.
pub const RULES: [Rule; 6] = [
    Rule::new("all-hbc", all_hbc),
    Rule::new("all-llc", all_llc),
    Rule::new("pkt-control", pkt_control),
    Rule::new("pkt-uplink", pkt_uplink),
    Rule::new("pkt-state", pkt_state),
    Rule::new("asap", asap),
];

fn check_alpha(alpha: f64) -> Result<(), &'static str> {
    if alpha.is_finite() && alpha >= 0.0 {
        Ok(())
    } else {
        Err("alpha must be a finite number >= 0")
    }
}

/// `alpha=A,gap_ms=G` (either, both or none; defaults given): the parameters
/// of `prewarm` and `burst`.
fn alpha_gap(arg: Option<&str>, alpha: f64, gap: Nanos) -> Result<(f64, Nanos), String> {
    let (mut alpha, mut gap_ms) = (alpha, gap as f64 / MS as f64);
    for kv in arg.into_iter().flat_map(|a| a.split(',')) {
        let usage = || "parameters are alpha=<number>,gap_ms=<number>".to_string();
        let (k, v) = kv.split_once('=').ok_or_else(usage)?;
        let v = v
            .parse::<f64>()
            .map_err(|_| format!("{k} is not a number"))?;
        match k {
            "alpha" => alpha = v,
            "gap_ms" => gap_ms = v,
            _ => return Err(usage()),
        }
    }
    check_alpha(alpha)?;
    if !(gap_ms.is_finite() && (0.0..=60_000.0).contains(&gap_ms)) {
        return Err("gap_ms must be between 0 and 60000".into());
    }
    Ok((alpha, (gap_ms * MS as f64).round() as Nanos))
}

/// The spec `name:alpha=A,gap_ms=G` of `prewarm` and `burst`, which
/// [`alpha_gap`] parses back.
fn alpha_gap_spec(name: &str, alpha: f64, gap: Nanos) -> String {
    format!("{name}:alpha={alpha},gap_ms={}", gap as f64 / MS as f64)
}

/// Parses a policy spec string (the scheme name, verbatim).
/// `default_alpha` applies to `dchannel` without an explicit alpha.
pub fn parse_spec(spec: &str, default_alpha: f64) -> Result<Box<dyn Policy>, SpecError> {
    let err = |reason: &str| SpecError {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let (name, arg) = match spec.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (spec, None),
    };
    if let Some(rule) = RULES.iter().find(|r| r.name == name) {
        return match arg {
            None => Ok(Box::new(*rule)),
            Some(_) => Err(err("this policy takes no parameter")),
        };
    }
    match name {
        "dchannel" | "realtime" | "realtime-dup" => {
            let alpha = match arg {
                None => default_alpha,
                Some(a) => {
                    let v = a
                        .strip_prefix("alpha=")
                        .ok_or_else(|| err("parameter must be alpha=<number>"))?;
                    v.parse::<f64>().map_err(|_| err("alpha is not a number"))?
                }
            };
            check_alpha(alpha).map_err(err)?;
            Ok(match name {
                "dchannel" => Box::new(DChannel::new(alpha)),
                "realtime" => Box::new(Realtime::new(alpha)),
                _ => Box::new(Realtime::duplicating_inputs(alpha)),
            })
        }
        "prewarm" => {
            let (alpha, gap) =
                alpha_gap(arg, default_alpha, prewarm::DEFAULT_GAP).map_err(|e| err(&e))?;
            Ok(Box::new(Prewarm::new(alpha, gap)))
        }
        "burst" => {
            let (alpha, gap) =
                alpha_gap(arg, default_alpha, burst::DEFAULT_GAP).map_err(|e| err(&e))?;
            Ok(Box::new(Burst::new(alpha, gap)))
        }
        "pkt-size" => {
            let n = arg
                .ok_or_else(|| err("pkt-size needs a threshold, e.g. pkt-size:750"))?
                .parse::<usize>()
                .map_err(|_| err("threshold is not a whole number of bytes"))?;
            Ok(Box::new(PktSize { threshold: n }))
        }
        _ => Err(err("unknown policy")),
    }
}

/// Test helpers: the NSDI'23 test setting, packets and flows to decide on.
#[doc(hidden)]
pub mod testutil {
    use super::*;
    use crate::packet::{self, build};
    use crate::MS;

    /// A test packet: parsed, and its bytes.
    pub type Pkt = (PacketInfo, Vec<u8>);

    /// The context of NSDI'23 §4.1's example: LLC 2 Mbit/s, empty, one-way
    /// delays HBC 20 ms and LLC 5 ms; MTU 1456, no overhead.
    pub fn ctx(now: Nanos, dir: Direction) -> Ctx {
        Ctx {
            now,
            dir,
            llc_queue: 0.0,
            // 2 Mbit/s = 250 bytes/ms
            llc_rate: 250.0 / MS as f64,
            hbc_owd: Some(20 * MS),
            llc_owd: Some(5 * MS),
            mtu: 1456,
            overhead: 0,
        }
    }

    /// A new flow (id 1).
    pub fn flow() -> FlowState {
        FlowState {
            id: 1,
            next_seq: 0,
            prev_c: 0.0,
            prev_size: 0,
            last_seen: 0,
            burst: Default::default(),
        }
    }

    /// A TCP segment with `flags` and `payload` (client to server, port 443).
    pub fn tcp(flags: u8, payload: &[u8]) -> Pkt {
        let raw = build::tcp4([198, 19, 0, 2], [198, 18, 0, 1], 40000, 443, flags, payload);
        (packet::parse(&raw).unwrap(), raw)
    }

    /// A UDP packet of `len` IP bytes.
    pub fn udp(sport: u16, dport: u16, len: usize) -> Pkt {
        let raw = build::udp4(
            [198, 19, 0, 2],
            [198, 18, 0, 1],
            sport,
            dport,
            &vec![0; len - 28],
        );
        (packet::parse(&raw).unwrap(), raw)
    }

    /// `p`'s decision on `pr` in a fresh flow.
    pub fn decide(p: &mut dyn Policy, pr: &Pkt, c: &Ctx) -> Decision {
        p.decide(&pr.0, &pr.1, &mut flow(), c)
    }

    /// Asserts the channel the policy `spec` picks for each packet, each in a
    /// fresh flow, in the context `c`.
    pub fn assert_steers(spec: &str, c: &Ctx, cases: &[(Pkt, Channel)]) {
        let mut p = parse_spec(spec, 0.75).unwrap();
        for (i, (pr, channel)) in cases.iter().enumerate() {
            assert_eq!(
                decide(&mut *p, pr, c).channel,
                *channel,
                "{spec}, packet {i}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_scheme_verbatim() {
        // Each rule by its name, and the policies with parameters.
        let rules = RULES.map(|r| r.name);
        let with_parameters = [
            "dchannel",
            "dchannel:alpha=0.5",
            "pkt-size:750",
            "prewarm:alpha=0.5,gap_ms=20",
            "burst:alpha=0.5,gap_ms=3",
            "realtime",
            "realtime:alpha=0.5",
            "realtime-dup",
            "realtime-dup:alpha=0.5",
        ];
        let names = "all-hbc all-llc pkt-control pkt-uplink pkt-state asap";
        assert_eq!(rules.join(" "), names);
        for s in rules.into_iter().chain(with_parameters) {
            let p = parse_spec(s, 0.75).unwrap_or_else(|e| panic!("{e}"));
            let canon = match s {
                "dchannel" => "dchannel:alpha=0.75",
                "realtime" => "realtime:alpha=0.75",
                "realtime-dup" => "realtime-dup:alpha=0.75",
                _ => s,
            };
            assert_eq!(p.spec(), canon);
        }
    }

    #[test]
    fn rejects_bad_specs_with_reason() {
        for (s, why) in [
            ("bogus", "unknown policy"),
            ("pkt-size", "needs a threshold"),
            ("pkt-size:abc", "not a whole number"),
            ("dchannel:beta=1", "alpha=<number>"),
            ("dchannel:alpha=-1", ">= 0"),
            ("all-llc:3", "no parameter"),
            ("prewarm:gap=3", "gap_ms=<number>"),
            ("prewarm:gap_ms=x", "gap_ms is not a number"),
            ("prewarm:gap_ms=-1", "between 0 and 60000"),
            ("prewarm:alpha=-1", ">= 0"),
            ("prewarm:alpha", "parameters are"),
            ("burst:gap_ms=1e9", "between 0 and 60000"),
            ("burst:alpha=x", "alpha is not a number"),
            ("realtime:k=2", "alpha=<number>"),
            ("realtime-dup:dup", "alpha=<number>"),
        ] {
            let e = parse_spec(s, 0.75).err().expect(s).to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn burst_defaults_follow_dchannel() {
        assert_eq!(
            parse_spec("burst", 0.75).unwrap().spec(),
            "burst:alpha=0.75,gap_ms=2"
        );
    }

    #[test]
    fn prewarm_defaults_follow_dchannel() {
        assert_eq!(
            parse_spec("prewarm", 0.75).unwrap().spec(),
            "prewarm:alpha=0.75,gap_ms=10"
        );
        assert_eq!(
            parse_spec("prewarm:gap_ms=25", 0.5).unwrap().spec(),
            "prewarm:alpha=0.5,gap_ms=25"
        );
    }
}
