//! RTT estimation with D-SYN / D-SYN-ACK / D-ACK probes (NSDI'23 §4.2).
//!
//! The initiator (the client) sends a D-SYN on both channels every probe
//! interval (500 ms by default). The responder answers each with a D-SYN-ACK on
//! the same channel and the initiator, on receipt, takes an RTT sample and
//! answers with a D-ACK, from which the responder takes its own sample. Both
//! ends thus learn both channels' RTT. The estimate is the minimum over a
//! sliding window (base RTT without queueing); it can be pinned, and the HBC
//! one scaled (NSDI'23 Fig. 10: x0.2 .. x5).
//!
//! A minimum of one or two samples is not a base RTT: it is whatever delay those
//! probes met. So while a channel's window holds fewer than `min_samples`
//! samples (after a start, or after probes were lost) the initiator probes
//! every `fast_interval` instead of `interval`. Measured why (issue 39): on a
//! fresh agent under MM-D the first two HBC probes met a 69 ms RTT while the
//! HBC's one-way delay was 19 ms at the median; Algorithm 1 then queued data on
//! the LLC that later HBC packets overtook, which QUIC (RFC 9002 §6.1: no undo
//! of a spurious loss) takes as loss: 19-24 "lost" packets and 2.4x the PLT of
//! the same load steered with the emulator's true delay, which lost none
//! (docs/results.md, "Fig. 3 over HTTP/3").
//!
//! Liveness: a channel is down once nothing has been heard on it for
//! `dead_after` (2 s). The LLC is also declared down as soon as a probe shows
//! it silent (`llc_probe_slack`), so that traffic leaves a dead LLC within
//! one probe interval (issue 16), not 2 s:
//!
//! * initiator: a D-SYN sent on the LLC at `t0` is unanswered at
//!   `t0 + grace` and nothing has been heard on the LLC since `t0`;
//! * responder: a round's D-SYN arrived on the HBC at `t` but not on the LLC
//!   (where it is normally first) by `t + grace`, no later LLC D-SYN either, and
//!   nothing has been heard on the LLC for `grace` (`t` is the first such round:
//!   later rounds that miss the LLC too do not restart the clock);
//! * responder, between rounds: no LLC D-SYN has arrived for the spacing the
//!   initiator keeps between its LLC D-SYNs plus `grace`, and nothing has been
//!   heard on the LLC for `grace` either;
//!
//! with `grace = 2 x max(latest, min) LLC RTT + llc_probe_slack`.
//!
//! Every rule needs a D-SYN sent after the outage began. With rounds alone the
//! worst case is a whole interval plus the grace (plus the HBC's one-way delay
//! at the responder), past issue 16's bound: the gateway steered onto a dead
//! LLC 541 and 564 ms into an outage in 2 of 22 windows on 2026-11-27. So the
//! initiator also sends a D-SYN on the LLC alone every `llc_probe_interval`
//! (250 ms) between two slow rounds, which halves that phase. The responder
//! expects LLC D-SYNs at least that often, or at the longest spacing it has
//! seen between two consecutively numbered ones (a peer configured otherwise;
//! ids skipped by lost probes do not count). The LLC-only samples feed the
//! filter but not `min_samples`, so probing still speeds up after an outage.
//!
//! Anything heard on the LLC afterwards brings it back at once. Only the LLC:
//! taking a live HBC for dead (a D-SYN stuck behind an upload's queue) would
//! push everything onto the narrow LLC, while taking a live LLC for dead only
//! sends its packets the way `all-hbc` would until the next probe is answered.

use crate::wire::ProbeKind;
use crate::{Channel, Nanos, MS};
use std::collections::VecDeque;

/// Outstanding probes remembered per channel; older ones count as lost.
const MAX_OUTSTANDING: usize = 16;
/// Spacings between consecutively numbered LLC D-SYNs a responder keeps.
const LLC_GAPS: usize = 8;
/// Samples kept per channel at most (the window normally holds far fewer).
const MAX_SAMPLES: usize = 1024;

/// Probing, filtering and liveness settings.
#[derive(Clone, Debug)]
pub struct RttConfig {
    /// Sends D-SYNs (the client); the gateway only answers.
    pub initiator: bool,
    /// Time between two D-SYN rounds (`--probe-interval-ms`).
    pub interval: Nanos,
    /// Time between two rounds while a channel's window holds fewer than
    /// `min_samples` samples (`--probe-fast-interval-ms`; module docs).
    pub fast_interval: Nanos,
    /// Samples the minimum filter needs in its window before probing slows to
    /// `interval` (`--probe-min-samples`; 0 or 1: never probe fast).
    pub min_samples: usize,
    /// Sliding window of the minimum filter.
    pub window: Nanos,
    /// Fixed RTTs overriding the measurement, per channel (index = Channel).
    pub pin: [Option<Nanos>; 2],
    /// Multiplier applied to the measured HBC RTT (not to a pinned one).
    pub hbc_scale: f64,
    /// A channel with no valid datagram heard for this long counts as down.
    pub dead_after: Nanos,
    /// Slack on top of twice the LLC's RTT after which a silent probe round
    /// declares the LLC down (module docs); `None`: only `dead_after`.
    pub llc_probe_slack: Option<Nanos>,
    /// Initiator: spacing of the LLC-only D-SYNs between two slow rounds;
    /// responder: the LLC D-SYN spacing it expects at least (module docs).
    /// `None`, or no `llc_probe_slack`: full rounds only.
    pub llc_probe_interval: Option<Nanos>,
}

impl Default for RttConfig {
    fn default() -> Self {
        RttConfig {
            initiator: true,
            interval: 500 * MS,
            fast_interval: 50 * MS,
            min_samples: 8,
            window: 5_000 * MS,
            pin: [None, None],
            hbc_scale: 1.0,
            dead_after: 2_000 * MS,
            llc_probe_slack: Some(50 * MS),
            llc_probe_interval: Some(250 * MS),
        }
    }
}

/// A probe the driver must send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOut {
    /// The channel to send it on.
    pub channel: Channel,
    /// D-SYN, D-SYN-ACK or D-ACK.
    pub kind: ProbeKind,
    /// Probe id (the header's `seq`).
    pub id: u32,
}

/// Probe counters per channel (index = Channel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttStats {
    /// Probes sent (any kind).
    pub probes_sent: [u64; 2],
    /// RTT samples taken.
    pub samples: [u64; 2],
    /// Answers for probes we do not remember (late, duplicated or forged).
    pub unmatched: [u64; 2],
    /// Wake probes received (never answered; see [`ProbeKind::Wake`]).
    pub wakes: [u64; 2],
}

/// An RTT sample taken on the LLC, handed out by
/// [`RttEstimator::take_llc_sample`] (rule (c) of crate::llc_share learns the
/// shared LLC's queue from these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlcSample {
    /// The probe's id: the D-SYN's (initiator) or the D-SYN-ACK's (responder).
    pub id: u32,
    /// The RTT it measured (unfiltered, unpinned).
    pub rtt: Nanos,
}

/// One end's probe state machine and RTT filter for one peer (see the module docs).
pub struct RttEstimator {
    cfg: RttConfig,
    started: Option<Nanos>,
    next_probe: Nanos,
    next_id: u32,
    /// D-SYNs sent, awaiting D-SYN-ACK: (id, sent at).
    syn_sent: [VecDeque<(u32, Nanos)>; 2],
    /// D-SYN-ACKs sent, awaiting D-ACK: (id, sent at).
    synack_sent: [VecDeque<(u32, Nanos)>; 2],
    /// Monotonic deque (time, rtt) for the sliding minimum.
    mins: [VecDeque<(Nanos, Nanos)>; 2],
    /// When each sample of the window was taken (at most `min_samples` kept:
    /// all that matters is whether the window holds that many).
    recent: [VecDeque<Nanos>; 2],
    /// When the initiator sent its last round.
    last_round: Nanos,
    /// When the initiator last sent a D-SYN on the LLC (round or LLC-only).
    last_llc_syn: Nanos,
    /// Ids of the LLC-only D-SYNs awaiting their answer: their samples feed the
    /// filter but not `recent`, so that probing still speeds up after an LLC
    /// outage emptied the window of rounds (measured: without that, the client's
    /// slower return after an outage cost a 450 ms stall in the next one).
    llc_only_sent: VecDeque<u32>,
    last_heard: [Option<Nanos>; 2],
    /// Latest RTT sample per channel (the grace of a probe round).
    latest: [Option<Nanos>; 2],
    /// Responder: the newest D-SYN round seen per channel, (id, arrival).
    syn_seen: [Option<(u32, Nanos)>; 2],
    /// Responder: arrival on the HBC of the first D-SYN round the LLC has not
    /// delivered since its own last D-SYN (cleared by the next LLC D-SYN).
    llc_missing_since: Option<Nanos>,
    /// Responder: the latest spacings between two LLC D-SYNs whose ids follow
    /// each other (the initiator's schedule, outages excluded).
    llc_gaps: VecDeque<Nanos>,
    /// The latest LLC sample not yet taken by [`Self::take_llc_sample`].
    llc_sample: Option<LlcSample>,
    /// Counters.
    pub stats: RttStats,
}

impl RttEstimator {
    /// An estimator with no sample yet.
    pub fn new(cfg: RttConfig) -> RttEstimator {
        RttEstimator {
            cfg,
            started: None,
            next_probe: 0,
            next_id: 1,
            syn_sent: Default::default(),
            synack_sent: Default::default(),
            mins: Default::default(),
            recent: Default::default(),
            last_round: 0,
            last_llc_syn: 0,
            llc_only_sent: VecDeque::new(),
            last_heard: [None, None],
            latest: [None, None],
            syn_seen: [None, None],
            llc_missing_since: None,
            llc_gaps: VecDeque::new(),
            llc_sample: None,
            stats: RttStats::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &RttConfig {
        &self.cfg
    }

    /// D-SYNs due at `now`, for the initiator: a round on both channels, or
    /// one on the LLC alone between slow rounds (module docs).
    pub fn poll_probes(&mut self, now: Nanos, out: &mut Vec<ProbeOut>) {
        self.started.get_or_insert(now);
        if !self.cfg.initiator {
            return;
        }
        let channels: &[Channel] = if now >= self.next_probe {
            &Channel::ALL
        } else if self.next_llc_probe().is_some_and(|t| t <= now) {
            &[Channel::Llc]
        } else {
            return;
        };
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        for &ch in channels {
            let q = &mut self.syn_sent[ch.index()];
            if q.len() == MAX_OUTSTANDING {
                q.pop_front();
            }
            q.push_back((id, now));
            self.stats.probes_sent[ch.index()] += 1;
            out.push(ProbeOut {
                channel: ch,
                kind: ProbeKind::DSyn,
                id,
            });
        }
        self.last_llc_syn = now;
        if channels.len() == 1 {
            if self.llc_only_sent.len() == MAX_OUTSTANDING {
                self.llc_only_sent.pop_front();
            }
            self.llc_only_sent.push_back(id);
        }
        if channels.len() == 2 {
            self.last_round = now;
            self.next_probe = now + self.interval_at(now);
        }
    }

    /// When the next LLC-only D-SYN is due: `llc_probe_interval` after the last
    /// LLC D-SYN, if that is before the next round (never while probing fast).
    fn next_llc_probe(&self) -> Option<Nanos> {
        self.cfg.llc_probe_slack?;
        let t = self.last_llc_syn + self.cfg.llc_probe_interval?;
        (t < self.next_probe).then_some(t)
    }

    /// The time from the last round to the next: `fast_interval` while either
    /// channel's window holds fewer than `min_samples` samples, else `interval`.
    fn interval_at(&mut self, now: Nanos) -> Nanos {
        let window = self.cfg.window;
        let need = self.cfg.min_samples;
        let thin = self.recent.iter_mut().any(|q| {
            while q.front().is_some_and(|&t| t + window < now) {
                q.pop_front();
            }
            q.len() < need
        });
        if thin {
            self.cfg.fast_interval.min(self.cfg.interval)
        } else {
            self.cfg.interval
        }
    }

    /// When [`poll_probes`](Self::poll_probes) next has work (initiator only).
    pub fn next_deadline(&self) -> Option<Nanos> {
        let next = self
            .next_llc_probe()
            .map_or(self.next_probe, |t| t.min(self.next_probe));
        self.cfg.initiator.then_some(next)
    }

    /// Any valid datagram from the peer arrived on `ch` (liveness).
    pub fn heard(&mut self, now: Nanos, ch: Channel) {
        self.last_heard[ch.index()] = Some(now);
    }

    /// When anything was last heard on `ch` (`None`: never).
    pub fn last_heard(&self, ch: Channel) -> Option<Nanos> {
        self.last_heard[ch.index()]
    }

    /// Handles a probe that arrived on `ch`; returns the answer to send on `ch`.
    pub fn handle_probe(
        &mut self,
        now: Nanos,
        ch: Channel,
        kind: ProbeKind,
        id: u32,
    ) -> Option<ProbeOut> {
        self.started.get_or_insert(now);
        self.heard(now, ch);
        let i = ch.index();
        match kind {
            ProbeKind::DSyn => {
                let prev = self.syn_seen[i];
                let newer = prev.map_or(true, |(seen, _)| is_newer(id, seen));
                if newer {
                    self.syn_seen[i] = Some((id, now));
                }
                if let (Channel::Llc, Some((seen, at))) = (ch, prev) {
                    if id == seen.wrapping_add(1) {
                        if self.llc_gaps.len() == LLC_GAPS {
                            self.llc_gaps.pop_front();
                        }
                        self.llc_gaps.push_back(now.saturating_sub(at));
                    }
                }
                let llc = self.syn_seen[Channel::Llc.index()];
                match ch {
                    Channel::Llc => self.llc_missing_since = None,
                    // the LLC (normally first) has not delivered this round yet:
                    // the silence counts from the first such round, not the latest
                    Channel::Hbc if llc.map_or(true, |(seen, _)| is_newer(id, seen)) => {
                        self.llc_missing_since.get_or_insert(now);
                    }
                    Channel::Hbc => {}
                }
                let q = &mut self.synack_sent[i];
                if q.len() == MAX_OUTSTANDING {
                    q.pop_front();
                }
                q.push_back((id, now));
                self.stats.probes_sent[i] += 1;
                Some(ProbeOut {
                    channel: ch,
                    kind: ProbeKind::DSynAck,
                    id,
                })
            }
            ProbeKind::DSynAck => {
                let sent = take(&mut self.syn_sent[i], id);
                match sent {
                    Some(t0) => {
                        let q = &mut self.llc_only_sent;
                        let llc_only = q.iter().position(|&x| x == id).and_then(|k| q.remove(k));
                        let round = llc_only.is_none();
                        self.sample(now, ch, id, now.saturating_sub(t0), round);
                        self.stats.probes_sent[i] += 1;
                        Some(ProbeOut {
                            channel: ch,
                            kind: ProbeKind::DAck,
                            id,
                        })
                    }
                    None => {
                        self.stats.unmatched[i] += 1;
                        None
                    }
                }
            }
            ProbeKind::DAck => {
                match take(&mut self.synack_sent[i], id) {
                    Some(t1) => self.sample(now, ch, id, now.saturating_sub(t1), true),
                    None => self.stats.unmatched[i] += 1,
                }
                None
            }
            ProbeKind::Wake => {
                self.stats.wakes[i] += 1;
                None
            }
        }
    }

    /// The LLC sample the last [`handle_probe`](Self::handle_probe) took, if
    /// any (each is handed out once).
    pub fn take_llc_sample(&mut self) -> Option<LlcSample> {
        self.llc_sample.take()
    }

    /// Takes an RTT sample; `round`: from a round's probe (counts towards
    /// `min_samples`), not an LLC-only one.
    fn sample(&mut self, now: Nanos, ch: Channel, id: u32, rtt: Nanos, round: bool) {
        if ch == Channel::Llc {
            self.llc_sample = Some(LlcSample { id, rtt });
        }
        let i = ch.index();
        self.stats.samples[i] += 1;
        self.latest[i] = Some(rtt);
        let r = &mut self.recent[i];
        if round {
            if r.len() >= self.cfg.min_samples.max(1) {
                r.pop_front();
            }
            r.push_back(now);
        }
        // the window may have just filled: slow down from the last round on
        if self.cfg.initiator {
            let next = self.last_round + self.interval_at(now);
            self.next_probe = self.next_probe.max(next);
        }
        let q = &mut self.mins[i];
        while q.back().is_some_and(|&(_, r)| r >= rtt) {
            q.pop_back();
        }
        if q.len() == MAX_SAMPLES {
            q.pop_front();
        }
        q.push_back((now, rtt));
    }

    /// Minimum measured RTT over the window ending at `now` (unscaled, unpinned).
    /// With no sample in the window the latest sample stands.
    pub fn measured(&mut self, ch: Channel, now: Nanos) -> Option<Nanos> {
        let q = &mut self.mins[ch.index()];
        let window = self.cfg.window;
        while q.len() > 1 && q.front().is_some_and(|&(t, _)| t + window < now) {
            q.pop_front();
        }
        q.front().map(|&(_, r)| r)
    }

    /// The RTT the policy uses: pinned, else measured (HBC scaled).
    pub fn rtt(&mut self, ch: Channel, now: Nanos) -> Option<Nanos> {
        if let Some(p) = self.cfg.pin[ch.index()] {
            return Some(p);
        }
        let m = self.measured(ch, now)?;
        Some(match ch {
            Channel::Hbc => (m as f64 * self.cfg.hbc_scale).round() as Nanos,
            Channel::Llc => m,
        })
    }

    /// One-way delay used by Algorithm 1 (`*_prop` = RTT / 2).
    pub fn owd(&mut self, ch: Channel, now: Nanos) -> Option<Nanos> {
        self.rtt(ch, now).map(|r| r / 2)
    }

    /// False once nothing has been heard on `ch` for `dead_after` (counting
    /// from the first poll when nothing was ever heard).
    /// and, for the LLC, false while a probe round shows it silent (module docs).
    pub fn alive(&self, ch: Channel, now: Nanos) -> bool {
        let since = self.last_heard[ch.index()].or(self.started).unwrap_or(now);
        now.saturating_sub(since) <= self.cfg.dead_after
            && !(ch == Channel::Llc && self.llc_silent(now))
    }

    /// A probe round shows the LLC silent at `now` (module docs).
    fn llc_silent(&self, now: Nanos) -> bool {
        let llc = Channel::Llc.index();
        let Some(slack) = self.cfg.llc_probe_slack else {
            return false;
        };
        // min over the window: the monotonic deque's front (may be a little stale)
        let rtt = match (self.latest[llc], self.mins[llc].front()) {
            (Some(l), Some(&(_, m))) => l.max(m),
            (Some(l), None) => l,
            _ => return false, // no RTT yet: no grace to judge by
        };
        let grace = 2 * rtt + slack;
        let heard = self.last_heard[llc];
        if self.cfg.initiator {
            // the newest unanswered D-SYN whose answer is overdue
            let overdue = self.syn_sent[llc]
                .iter()
                .rev()
                .find(|&&(_, t0)| t0 + grace <= now);
            return overdue.is_some_and(|&(_, t0)| heard.map_or(true, |h| h < t0));
        }
        let quiet = heard.map_or(true, |h| h + grace <= now);
        // a round reached the HBC but not the LLC
        let round_missed = self
            .llc_missing_since
            .is_some_and(|since| since + grace <= now);
        // no LLC D-SYN for longer than the initiator's spacing
        let overdue = self.llc_probe_spacing().is_some_and(|spacing| {
            let last = self.syn_seen[llc].map(|(_, at)| at);
            last.is_some_and(|at| at + spacing + grace <= now)
        });
        quiet && (round_missed || overdue)
    }

    /// Responder: the spacing of the initiator's LLC D-SYNs, at least
    /// `llc_probe_interval` (module docs); `None`: that rule is off.
    fn llc_probe_spacing(&self) -> Option<Nanos> {
        let floor = self.cfg.llc_probe_interval?;
        Some(self.llc_gaps.iter().copied().fold(floor, Nanos::max))
    }
}

/// Probe id `a` is newer than `b` (ids wrap around).
fn is_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

fn take(q: &mut VecDeque<(u32, Nanos)>, id: u32) -> Option<Nanos> {
    let pos = q.iter().position(|&(i, _)| i == id)?;
    let (_, t) = q.remove(pos)?;
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Client and gateway probing every 500 ms from the first round on (no
    /// fast probing, no LLC-only D-SYNs: the tests below time rounds themselves).
    fn pair() -> (RttEstimator, RttEstimator) {
        let slow = RttConfig {
            min_samples: 0,
            llc_probe_interval: None,
            ..RttConfig::default()
        };
        let c = RttEstimator::new(slow.clone());
        let g = RttEstimator::new(RttConfig {
            initiator: false,
            ..slow
        });
        (c, g)
    }

    #[test]
    fn probes_fast_until_the_window_holds_min_samples() {
        // defaults: 8 samples wanted, 50 ms apart until then, then 500 ms
        let mut c = RttEstimator::new(RttConfig::default());
        let mut g = RttEstimator::new(RttConfig {
            initiator: false,
            ..RttConfig::default()
        });
        // HBC RTTs the rounds meet: the first two high (a queue at start), the
        // rest at the channel's base 30 ms; rounds at 0, 50, ..., 350 ms
        let hbc = [69, 69, 30, 45, 30, 52, 33, 30];
        for (k, &h) in hbc.iter().enumerate() {
            let t = k as Nanos * 50 * MS;
            assert_eq!(
                c.next_deadline(),
                Some(if k == 0 { 0 } else { t }),
                "round {k}"
            );
            round(&mut c, &mut g, t, [h * MS, 5 * MS]);
        }
        // 8 samples in the window: the next round is 500 ms after the last, with
        // an LLC-only D-SYN 250 ms after it in between
        assert_eq!(c.next_deadline(), Some(350 * MS + 250 * MS));
        let mut out = Vec::new();
        c.poll_probes(600 * MS, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].channel, out[0].id), (Channel::Llc, 9));
        assert_eq!(c.next_deadline(), Some(350 * MS + 500 * MS));
        // after 2 samples the minimum was the start's 69 ms; now it is the base
        assert_eq!(c.rtt(Channel::Hbc, 400 * MS), Some(30 * MS));
        // the gateway (responder) learnt the same from the D-ACKs
        assert_eq!(g.rtt(Channel::Hbc, 400 * MS), Some(30 * MS));
    }

    #[test]
    fn probes_fast_again_once_the_window_thins() {
        let cfg = RttConfig {
            window: 1_000 * MS,
            min_samples: 3,
            llc_probe_interval: None,
            ..RttConfig::default()
        };
        let mut c = RttEstimator::new(cfg.clone());
        let mut g = RttEstimator::new(RttConfig {
            initiator: false,
            ..cfg
        });
        for t in [0, 50, 100] {
            round(&mut c, &mut g, t * MS, [40 * MS, 5 * MS]);
        }
        assert_eq!(c.next_deadline(), Some(600 * MS));
        // the D-SYNs of the rounds at 0.6 and 1.1 s are lost: at 1.1 s the window
        // (1 s) holds only the sample taken at 0.14 s, so probing speeds up again
        let mut out = Vec::new();
        c.poll_probes(600 * MS, &mut out);
        assert_eq!(
            c.next_deadline(),
            Some(1_100 * MS),
            "3 samples at 0.6 s: slow"
        );
        c.poll_probes(1_100 * MS, &mut out);
        assert_eq!(
            c.next_deadline(),
            Some(1_150 * MS),
            "the window thinned: fast"
        );
    }

    /// D-SYN `p` (sent by `c` at `t0`) answered by `g` and acknowledged by `c`
    /// over a channel of round-trip `rtt` (symmetric one-way = rtt/2).
    fn exchange(c: &mut RttEstimator, g: &mut RttEstimator, t0: Nanos, p: ProbeOut, rtt: Nanos) {
        let synack = g
            .handle_probe(t0 + rtt / 2, p.channel, p.kind, p.id)
            .unwrap();
        assert_eq!(synack.kind, ProbeKind::DSynAck);
        let ack = c
            .handle_probe(t0 + rtt, p.channel, synack.kind, synack.id)
            .unwrap();
        assert_eq!(ack.kind, ProbeKind::DAck);
        assert!(g
            .handle_probe(t0 + 3 * rtt / 2, p.channel, ack.kind, ack.id)
            .is_none());
    }

    /// Runs one probe round with the given RTTs.
    fn round(c: &mut RttEstimator, g: &mut RttEstimator, t0: Nanos, rtts: [Nanos; 2]) {
        let mut out = Vec::new();
        c.poll_probes(t0, &mut out);
        assert_eq!(out.len(), 2);
        for p in out {
            exchange(c, g, t0, p, rtts[p.channel.index()]);
        }
    }

    #[test]
    fn both_ends_learn_both_rtts() {
        let (mut c, mut g) = pair();
        round(&mut c, &mut g, 0, [40 * MS, 10 * MS]);
        for e in [&mut c, &mut g] {
            assert_eq!(e.rtt(Channel::Hbc, 100 * MS), Some(40 * MS));
            assert_eq!(e.rtt(Channel::Llc, 100 * MS), Some(10 * MS));
            assert_eq!(e.owd(Channel::Hbc, 100 * MS), Some(20 * MS));
        }
    }

    #[test]
    fn probes_every_interval_and_min_over_window() {
        let (mut c, mut g) = pair();
        let mut out = Vec::new();
        c.poll_probes(0, &mut out);
        out.clear();
        c.poll_probes(499 * MS, &mut out);
        assert!(out.is_empty(), "not due before 500 ms");
        assert_eq!(c.next_deadline(), Some(500 * MS));
        // fresh estimator: rounds at 0, 0.5, 1 s with HBC 60, 40, 80 ms
        let (mut c, _) = pair();
        round(&mut c, &mut g, 0, [60 * MS, 5 * MS]);
        round(&mut c, &mut g, 500 * MS, [40 * MS, 5 * MS]);
        round(&mut c, &mut g, 1000 * MS, [80 * MS, 5 * MS]);
        assert_eq!(c.rtt(Channel::Hbc, 1100 * MS), Some(40 * MS));
        // window 5 s: at 5.6 s the 40 ms sample (taken at 0.54 s) has left it
        assert_eq!(c.rtt(Channel::Hbc, 5600 * MS), Some(80 * MS));
        // long after, the latest sample stands
        assert_eq!(c.rtt(Channel::Hbc, 60_000 * MS), Some(80 * MS));
    }

    #[test]
    fn pin_and_scale() {
        let (_, mut g) = pair();
        let mut c = RttEstimator::new(RttConfig {
            pin: [None, Some(7 * MS)],
            hbc_scale: 0.5,
            ..RttConfig::default()
        });
        round(&mut c, &mut g, 0, [40 * MS, 10 * MS]);
        assert_eq!(c.measured(Channel::Hbc, MS * 50), Some(40 * MS));
        assert_eq!(c.rtt(Channel::Hbc, MS * 50), Some(20 * MS));
        assert_eq!(c.rtt(Channel::Llc, MS * 50), Some(7 * MS));
    }

    #[test]
    fn llc_samples_are_handed_out_once_with_their_probe_id() {
        let (mut c, mut g) = pair();
        // round 1: HBC 40 ms, LLC 10 ms; both ends sample the LLC once
        round(&mut c, &mut g, 0, [40 * MS, 10 * MS]);
        assert_eq!(
            c.take_llc_sample(),
            Some(LlcSample {
                id: 1,
                rtt: 10 * MS
            })
        );
        assert_eq!(c.take_llc_sample(), None);
        assert_eq!(
            g.take_llc_sample(),
            Some(LlcSample {
                id: 1,
                rtt: 10 * MS
            })
        );
        // an HBC-only sample hands out nothing
        let mut out = Vec::new();
        c.poll_probes(500 * MS, &mut out);
        let hbc = out.iter().find(|p| p.channel == Channel::Hbc).unwrap();
        g.handle_probe(520 * MS, Channel::Hbc, hbc.kind, hbc.id);
        c.handle_probe(540 * MS, Channel::Hbc, ProbeKind::DSynAck, hbc.id);
        assert_eq!(c.take_llc_sample(), None);
        // the LLC answer of round 2 arrives late: 70 ms, still id 2
        c.handle_probe(570 * MS, Channel::Llc, ProbeKind::DSynAck, 2);
        assert_eq!(
            c.take_llc_sample(),
            Some(LlcSample {
                id: 2,
                rtt: 70 * MS
            })
        );
    }

    #[test]
    fn unmatched_answers_are_counted_not_sampled() {
        let (mut c, _) = pair();
        assert!(c
            .handle_probe(0, Channel::Llc, ProbeKind::DSynAck, 77)
            .is_none());
        assert_eq!(c.stats.unmatched[1], 1);
        assert_eq!(c.rtt(Channel::Llc, 0), None);
    }

    #[test]
    fn liveness() {
        let (mut c, _) = pair();
        let mut out = Vec::new();
        c.poll_probes(0, &mut out);
        assert!(c.alive(Channel::Llc, 2000 * MS));
        assert!(!c.alive(Channel::Llc, 2001 * MS));
        c.heard(2500 * MS, Channel::Llc);
        assert!(c.alive(Channel::Llc, 3000 * MS));
    }

    /// One round in which the LLC's D-SYN is lost; the HBC's completes.
    /// Returns the id of the round.
    fn round_llc_lost(c: &mut RttEstimator, g: &mut RttEstimator, t0: Nanos, hbc: Nanos) -> u32 {
        let mut out = Vec::new();
        c.poll_probes(t0, &mut out);
        let p = *out.iter().find(|p| p.channel == Channel::Hbc).unwrap();
        exchange(c, g, t0, p, hbc);
        p.id
    }

    /// An initiator with `cfg` and its responder after a round at 0 (HBC 22 ms,
    /// LLC 6 ms) and one at 500 ms whose LLC D-SYN is lost.
    fn llc_probe_lost(cfg: RttConfig) -> (RttEstimator, RttEstimator) {
        let (_, mut g) = pair();
        let mut c = RttEstimator::new(cfg);
        round(&mut c, &mut g, 0, [22 * MS, 6 * MS]);
        round_llc_lost(&mut c, &mut g, 500 * MS, 22 * MS);
        (c, g)
    }

    /// `e` counts the LLC down from `t` on (up 1 ms before), the HBC still up.
    fn assert_llc_down_from(e: &RttEstimator, t: Nanos) {
        assert!(e.alive(Channel::Llc, t - MS), "LLC up before {t}");
        assert!(!e.alive(Channel::Llc, t), "LLC down at {t}");
        assert!(e.alive(Channel::Hbc, t), "HBC up at {t}");
    }

    #[test]
    fn initiator_declares_the_llc_down_once_a_probe_is_overdue() {
        // HBC 22 ms, LLC 6 ms: grace = 2 x 6 + 50 = 62 ms after the lost D-SYN
        let (mut c, mut g) = llc_probe_lost(RttConfig::default());
        assert_llc_down_from(&c, 562 * MS);
        // the next round's answer brings it back at once
        round(&mut c, &mut g, 1000 * MS, [22 * MS, 6 * MS]);
        assert!(c.alive(Channel::Llc, 1006 * MS));
        assert!(c.alive(Channel::Llc, 1400 * MS));
    }

    #[test]
    fn initiator_keeps_an_llc_it_hears_from_despite_a_lost_probe() {
        let (mut c, _) = llc_probe_lost(RttConfig::default());
        c.heard(520 * MS, Channel::Llc); // a data datagram after the probe left
        assert!(c.alive(Channel::Llc, 900 * MS));
    }

    #[test]
    fn responder_declares_the_llc_down_when_a_round_misses_it() {
        // the gateway last heard the LLC at 9 ms (D-ACK of round 1); round 2's
        // D-SYN arrives on the HBC at 511 ms only: down at 511 + 62 = 573 ms
        let (mut c, mut g) = llc_probe_lost(RttConfig::default());
        assert_llc_down_from(&g, 573 * MS);
        // round 3 misses the LLC too: still down right after its HBC D-SYN (the
        // silence counts from round 2, a new round does not restart the clock)
        round_llc_lost(&mut c, &mut g, 1000 * MS, 22 * MS);
        assert!(!g.alive(Channel::Llc, 1012 * MS));
        // round 4 reaches it on the LLC: back
        round(&mut c, &mut g, 1500 * MS, [22 * MS, 6 * MS]);
        assert!(g.alive(Channel::Llc, 1503 * MS));
    }

    #[test]
    fn responder_keeps_an_llc_that_carried_data_recently() {
        let (_, mut g) = llc_probe_lost(RttConfig::default());
        g.heard(540 * MS, Channel::Llc);
        assert!(g.alive(Channel::Llc, 601 * MS)); // 540 + 62 = 602
        assert!(!g.alive(Channel::Llc, 602 * MS));
    }

    #[test]
    fn without_slack_or_for_the_hbc_only_silence_counts() {
        let (c, _) = llc_probe_lost(RttConfig {
            llc_probe_slack: None,
            ..RttConfig::default()
        });
        assert!(c.alive(Channel::Llc, 1000 * MS));
        // an HBC D-SYN lost the same way leaves the HBC up until dead_after
        let (mut c, mut g) = pair();
        round(&mut c, &mut g, 0, [22 * MS, 6 * MS]);
        let mut out = Vec::new();
        c.poll_probes(500 * MS, &mut out); // both lost
        assert!(c.alive(Channel::Hbc, 1500 * MS));
        assert!(!c.alive(Channel::Llc, 1500 * MS));
        assert!(!c.alive(Channel::Hbc, 2023 * MS)); // last heard at 22 ms + 2 s
    }

    /// Default agents (LLC-only D-SYNs every 250 ms) probing slowly from the start.
    fn pair_with_llc_probes() -> (RttEstimator, RttEstimator) {
        let cfg = RttConfig {
            min_samples: 0,
            ..RttConfig::default()
        };
        let g = RttEstimator::new(RttConfig {
            initiator: false,
            ..cfg.clone()
        });
        (RttEstimator::new(cfg), g)
    }

    /// Polls `c` at `t`: one LLC-only D-SYN, answered with the LLC's `rtt`
    /// (`None`: lost on the way to `g`). Returns its id.
    fn llc_only(c: &mut RttEstimator, g: &mut RttEstimator, t: Nanos, rtt: Option<Nanos>) -> u32 {
        let mut out = Vec::new();
        c.poll_probes(t, &mut out);
        assert_eq!(out.len(), 1, "one D-SYN at {t}");
        let p = out[0];
        assert_eq!((p.channel, p.kind), (Channel::Llc, ProbeKind::DSyn));
        if let Some(rtt) = rtt {
            exchange(c, g, t, p, rtt);
        }
        p.id
    }

    #[test]
    fn llc_only_probes_halve_the_worst_failover_of_both_ends() {
        // HBC 22 ms, LLC 6 ms: grace 2 x 6 + 50 = 62 ms. Round at 0, LLC-only
        // D-SYN at 250 ms (answered by 256 ms), then the LLC dies: the worst phase,
        // just after an answer. Rounds alone would notice at 500 + 62 = 562 ms
        // (client) and 511 + 62 = 573 ms (gateway): > 300 ms after the outage.
        let (mut c, mut g) = pair_with_llc_probes();
        round(&mut c, &mut g, 0, [22 * MS, 6 * MS]);
        assert_eq!(c.next_deadline(), Some(250 * MS));
        assert_eq!(llc_only(&mut c, &mut g, 250 * MS, Some(6 * MS)), 2);
        assert_eq!(c.next_deadline(), Some(500 * MS), "then the round");
        // the client's LLC D-SYN at 500 ms is lost: overdue at 562 ms
        round_llc_lost(&mut c, &mut g, 500 * MS, 22 * MS);
        assert_llc_down_from(&c, 562 * MS);
        // the gateway's last LLC D-SYN arrived at 253 ms (spacing 250 ms, as the
        // ids 1 -> 2 showed): overdue at 253 + 250 + 62 = 565 ms, before the twin
        // rule (573 ms). Both within 310 ms of the outage at 256 ms.
        assert_llc_down_from(&g, 565 * MS);
        // an LLC-only answer at 750 ms brings both back
        llc_only(&mut c, &mut g, 750 * MS, Some(6 * MS));
        assert!(c.alive(Channel::Llc, 756 * MS) && g.alive(Channel::Llc, 756 * MS));
    }

    #[test]
    fn llc_only_samples_do_not_keep_probing_slow() {
        // 2 samples wanted in a 1 s window; rounds at 0 and 50 ms, then slow
        let cfg = RttConfig {
            window: 1_000 * MS,
            min_samples: 2,
            ..RttConfig::default()
        };
        let mut c = RttEstimator::new(cfg.clone());
        let mut g = RttEstimator::new(RttConfig {
            initiator: false,
            ..cfg
        });
        round(&mut c, &mut g, 0, [22 * MS, 6 * MS]);
        round(&mut c, &mut g, 50 * MS, [22 * MS, 6 * MS]);
        assert_eq!(c.next_deadline(), Some(300 * MS));
        llc_only(&mut c, &mut g, 300 * MS, Some(6 * MS));
        round_llc_lost(&mut c, &mut g, 550 * MS, 22 * MS);
        llc_only(&mut c, &mut g, 800 * MS, Some(6 * MS));
        // at 1.05 s the window holds one round sample on the LLC (taken at 56 ms):
        // fast again, although the LLC-only ones (303, 803 ms) would make two
        let mut out = Vec::new();
        c.poll_probes(1_050 * MS, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(c.next_deadline(), Some(1_100 * MS));
        // they still feed the filter: the LLC's samples are all 6 ms
        assert_eq!(c.rtt(Channel::Llc, 1_050 * MS), Some(6 * MS));
        assert_eq!(c.stats.samples[Channel::Llc.index()], 4);
    }

    #[test]
    fn responder_learns_a_longer_spacing_and_skips_gaps_with_lost_ids() {
        // a client with rounds only (500 ms), a gateway expecting 250 ms at least
        let (_, mut g) = pair_with_llc_probes();
        let (mut c, _) = pair();
        round(&mut c, &mut g, 0, [22 * MS, 6 * MS]);
        // before it has seen one spacing it expects 250 ms: a false alarm at
        // 3 + 250 + 62 = 315 ms, which the next round's LLC D-SYN ends
        assert_llc_down_from(&g, 315 * MS);
        round(&mut c, &mut g, 500 * MS, [22 * MS, 6 * MS]);
        assert!(g.alive(Channel::Llc, 503 * MS));
        // ids 1 -> 2 arrived 500 ms apart: now 503 + 500 + 62 = 1065 ms
        assert_llc_down_from(&g, 1065 * MS);
        round(&mut c, &mut g, 1000 * MS, [22 * MS, 6 * MS]);
        // an outage: rounds 4-6 lost on the LLC; round 7's D-SYN at 3.0 s
        // follows id 3, not 6, so its 2 s spacing is not learnt
        for t in [1500, 2000, 2500] {
            round_llc_lost(&mut c, &mut g, t * MS, 22 * MS);
        }
        round(&mut c, &mut g, 3000 * MS, [22 * MS, 6 * MS]);
        assert_llc_down_from(&g, 3003 * MS + 500 * MS + 62 * MS);
    }

    #[test]
    fn probe_ids_compare_across_the_wrap() {
        assert!(is_newer(1, u32::MAX));
        assert!(!is_newer(u32::MAX, 1));
        assert!(!is_newer(5, 5));
    }
}
