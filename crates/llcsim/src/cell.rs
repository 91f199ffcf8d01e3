//! One URLLC cell: N users browsing, every packet steered by the real core,
//! every LLC packet queued in the cell's one shared LLC queue per direction.
//!
//! Each user is a device with the two senders of a deployment: its client's
//! uplink [`Steerer`] and the gateway's downlink [`Steerer`] for it, each with
//! its own policy instance, flow table and virtual LLC queue of capacity C
//! (the agents' `--llc-mbit`), exactly as the agents run them. The user
//! browses: it waits a uniform random start offset in `[0, think)`, replays a
//! page load (a [`Trace`] drawn uniformly at random), thinks for an
//! exponentially distributed time of mean `think` after the page's last
//! packet (the reading time of 3GPP2 C.R1002-0 §4.1.1's web model, mean 30 s
//! there; the same model as the testbed's background users), and starts another, until the next start would fall after the
//! simulated duration.
//!
//! Sharing rules (crates/dchannel-core/src/llc_share): (a) `none`: the
//! steerers' decisions stand (each sees only its own virtual queue); (b)
//! `share`: a packet the policy put on the LLC passes the gateway's per-device
//! token bucket ([`PerDeviceShare`], C split equally among the N users, burst
//! one MTU) or goes to the HBC instead, in both directions (the uplink bucket
//! stands for the client or the cell's scheduler enforcing it). The steerer's
//! own virtual queue has already counted it, as an agent that is not told of
//! the diversion would.
//!
//! What it leaves out (open-loop replay): packet times are the recorded ones,
//! so queueing on the LLC never delays a later packet of the same flow (no TCP
//! feedback), the HBC is not modelled (infinite capacity, the recorded delay),
//! and the agents' delay estimates are fixed (`hbc_owd`, `llc_owd`) rather than
//! measured by probes that would see the shared queue.

use crate::quantiles::{nearest_rank, LogHistogram};
use crate::rng::SplitMix64;
use crate::shared_llc::{Offer, SharedLlc};
use crate::trace::Trace;
use anyhow::{bail, Result};
use dchannel_core::llc_share::{PerDeviceShare, ShareConfig};
use dchannel_core::policy::parse_spec;
use dchannel_core::steer::{ChannelView, SteerConfig, Steerer};
use dchannel_core::{Channel, Direction, Nanos, MS};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How the users share the LLC (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// (a) no coordination: each device's own virtual queue only.
    None,
    /// (b) the gateway's per-device token bucket, over-budget to the HBC.
    Share,
}

/// Everything a cell run depends on.
#[derive(Clone, Debug, Serialize)]
pub struct CellConfig {
    /// Users (devices) in the cell.
    pub users: u32,
    /// LLC capacity per direction, bits/s (the shared queue's and each agent's).
    pub capacity_bps: f64,
    /// The shared queue's drop-tail limit, bytes.
    pub limit_bytes: u64,
    /// Sharing rule.
    pub rule: Rule,
    /// Rule (b)'s burst per device, bytes.
    pub share_burst: u32,
    /// Steering policy spec (`dchannel`, `dchannel:alpha=0.5`, ...).
    pub policy: String,
    /// One-way delays the agents assume (ns).
    pub hbc_owd: Nanos,
    /// See `hbc_owd`.
    pub llc_owd: Nanos,
    /// Wire bytes per packet on top of the IP length (the agents' overhead).
    pub overhead: usize,
    /// Pages start within `[0, duration)` (ns).
    pub duration: Nanos,
    /// Mean think time between pages (ns); also the start offset's range.
    pub think: Nanos,
    /// Seed of the users' start offsets, pages and think times.
    pub seed: u64,
}

/// One page load of one user.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageResult {
    /// The user (0-based).
    pub user: u32,
    /// Its page loads so far, this one included, minus one.
    pub seq: u32,
    /// The trace replayed.
    pub page: String,
    /// When it started (ms since the cell started).
    pub start_ms: f64,
    /// Packets and their wire bytes, both directions.
    pub pkts: u64,
    /// See `pkts`.
    pub bytes: u64,
    /// Packets that went onto the shared LLC (queued or overflowed), and bytes.
    pub llc_pkts: u64,
    /// See `llc_pkts`.
    pub llc_bytes: u64,
    /// `llc_pkts / pkts`.
    pub llc_frac: f64,
    /// Packets the policy put on the LLC that rule (b) sent to the HBC.
    pub diverted_pkts: u64,
    /// LLC packets lost to the shared queue's limit.
    pub overflow_pkts: u64,
    /// Shared-LLC queueing delay of its queued LLC packets (ms), nearest rank;
    /// `None` without any.
    pub wait_p50_ms: Option<f64>,
    /// See `wait_p50_ms`.
    pub wait_p95_ms: Option<f64>,
    /// See `wait_p50_ms`.
    pub wait_p99_ms: Option<f64>,
}

/// The whole cell.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CellSummary {
    /// Page loads completed.
    pub pages: u64,
    /// Packets and wire bytes, both directions.
    pub pkts: u64,
    /// See `pkts`.
    pub bytes: u64,
    /// See [`PageResult::llc_pkts`].
    pub llc_pkts: u64,
    /// See `llc_pkts`.
    pub llc_bytes: u64,
    /// See [`PageResult::diverted_pkts`].
    pub diverted_pkts: u64,
    /// See [`PageResult::overflow_pkts`].
    pub overflow_pkts: u64,
    /// Queueing delay of every queued LLC packet (ms, within 1/128).
    pub wait_p50_ms: Option<f64>,
    /// See `wait_p50_ms`.
    pub wait_p95_ms: Option<f64>,
    /// See `wait_p50_ms`.
    pub wait_p99_ms: Option<f64>,
    /// Time of the last packet (ms).
    pub span_ms: f64,
}

/// Per-page counters while it plays.
#[derive(Default)]
struct PageAcc {
    pkts: u64,
    bytes: u64,
    llc_pkts: u64,
    llc_bytes: u64,
    diverted: u64,
    overflow: u64,
    waits_ns: Vec<f64>,
}

struct User {
    up: Steerer,
    down: Steerer,
    rng: SplitMix64,
    trace: usize,
    next: usize,
    start: Nanos,
    seq: u32,
    acc: PageAcc,
}

/// Runs the cell; `on_page` gets every page load as it completes.
pub fn run(
    cfg: &CellConfig,
    traces: &[Trace],
    mut on_page: impl FnMut(PageResult),
) -> Result<CellSummary> {
    if traces.is_empty() || traces.iter().all(|t| t.packets.is_empty()) {
        bail!("no trace with packets to replay");
    }
    if cfg.users == 0 {
        bail!("users: expected at least one user");
    }
    if !(cfg.capacity_bps.is_finite() && cfg.capacity_bps > 0.0) {
        bail!("capacity: expected a positive rate in bits/s");
    }
    let steer_cfg = |dir| SteerConfig {
        dir,
        overhead: cfg.overhead,
        llc_bits_per_sec: cfg.capacity_bps,
        // a page load opens ~100 flows; the table grows on demand
        flow_capacity: 4096,
        ..SteerConfig::default()
    };
    let policy = || parse_spec(&cfg.policy, 0.75).map_err(anyhow::Error::from);
    let view = ChannelView::up(Some(cfg.hbc_owd), Some(cfg.llc_owd));
    let mut llc = [
        SharedLlc::new(cfg.capacity_bps, cfg.limit_bytes),
        SharedLlc::new(cfg.capacity_bps, cfg.limit_bytes),
    ];
    let mut share = match cfg.rule {
        Rule::None => None,
        Rule::Share => {
            let c = ShareConfig::equal_split(cfg.capacity_bps as u64, cfg.users, cfg.share_burst)?;
            Some([PerDeviceShare::<u32>::new(c), PerDeviceShare::<u32>::new(c)])
        }
    };
    let mut users = Vec::with_capacity(cfg.users as usize);
    let mut heap = BinaryHeap::new();
    for u in 0..cfg.users {
        let mut rng =
            SplitMix64::new(cfg.seed ^ (u64::from(u) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let start = rng.below(cfg.think.max(1));
        let trace = pick(&mut rng, traces);
        users.push(User {
            up: Steerer::new(steer_cfg(Direction::Uplink), policy()?),
            down: Steerer::new(steer_cfg(Direction::Downlink), policy()?),
            rng,
            trace,
            next: 0,
            start,
            seq: 0,
            acc: PageAcc::default(),
        });
        if start < cfg.duration {
            heap.push(Reverse((start + traces[trace].packets[0].t, u)));
        }
    }
    let mut all = LogHistogram::default();
    let mut sum = CellSummary::default();
    while let Some(Reverse((now, u))) = heap.pop() {
        let user = &mut users[u as usize];
        let trace = &traces[user.trace];
        let pkt = &trace.packets[user.next];
        let steerer = match pkt.dir {
            Direction::Uplink => &mut user.up,
            Direction::Downlink => &mut user.down,
        };
        let st = steerer.steer(now, &pkt.raw, &view);
        let wire = pkt.raw.len() + cfg.overhead;
        let mut channel = st.channel;
        if let (Channel::Llc, Some(share)) = (channel, share.as_mut()) {
            channel = share[pkt.dir as usize].admit(now, &u, wire);
            if channel == Channel::Hbc {
                user.acc.diverted += 1;
            }
        }
        user.acc.pkts += 1;
        user.acc.bytes += wire as u64;
        if channel == Channel::Llc {
            user.acc.llc_pkts += 1;
            user.acc.llc_bytes += wire as u64;
            match llc[pkt.dir as usize].offer(now, wire) {
                Offer::Queued(wait) => {
                    user.acc.waits_ns.push(wait);
                    all.record(wait.round() as u64);
                }
                Offer::Overflow => user.acc.overflow += 1,
            }
        }
        sum.span_ms = now as f64 / MS as f64;
        user.next += 1;
        if user.next < trace.packets.len() {
            heap.push(Reverse((user.start + trace.packets[user.next].t, u)));
            continue;
        }
        // page done: report it, think, maybe start another
        let page = finish(u, user, trace, &mut sum);
        on_page(page);
        // at least 1 ns: the next page starts after this one's last packet
        let think = (user.rng.exponential(cfg.think as f64).round() as Nanos).max(1);
        let start = now + think;
        if start < cfg.duration {
            user.trace = pick(&mut user.rng, traces);
            user.next = 0;
            user.start = start;
            user.seq += 1;
            heap.push(Reverse((start + traces[user.trace].packets[0].t, u)));
        }
    }
    let ms = |v: Option<f64>| v.map(|ns| ns / MS as f64);
    sum.wait_p50_ms = ms(all.percentile(0.50));
    sum.wait_p95_ms = ms(all.percentile(0.95));
    sum.wait_p99_ms = ms(all.percentile(0.99));
    Ok(sum)
}

/// A trace with packets, uniformly at random.
fn pick(rng: &mut SplitMix64, traces: &[Trace]) -> usize {
    loop {
        let i = rng.below(traces.len() as u64) as usize;
        if !traces[i].packets.is_empty() {
            return i;
        }
    }
}

fn finish(u: u32, user: &mut User, trace: &Trace, sum: &mut CellSummary) -> PageResult {
    let mut acc = std::mem::take(&mut user.acc);
    acc.waits_ns.sort_by(f64::total_cmp);
    let q = |p| nearest_rank(&acc.waits_ns, p).map(|ns| ns / MS as f64);
    sum.pages += 1;
    sum.pkts += acc.pkts;
    sum.bytes += acc.bytes;
    sum.llc_pkts += acc.llc_pkts;
    sum.llc_bytes += acc.llc_bytes;
    sum.diverted_pkts += acc.diverted;
    sum.overflow_pkts += acc.overflow;
    PageResult {
        user: u,
        seq: user.seq,
        page: trace.name.clone(),
        start_ms: user.start as f64 / MS as f64,
        pkts: acc.pkts,
        bytes: acc.bytes,
        llc_pkts: acc.llc_pkts,
        llc_bytes: acc.llc_bytes,
        llc_frac: acc.llc_pkts as f64 / acc.pkts.max(1) as f64,
        diverted_pkts: acc.diverted,
        overflow_pkts: acc.overflow,
        wait_p50_ms: q(0.50),
        wait_p95_ms: q(0.95),
        wait_p99_ms: q(0.99),
    }
}
