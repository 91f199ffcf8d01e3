//! `llcsim`: simulate one URLLC cell shared by N users (see the crate docs).
//!
//! Reads page-load traces (`*.csv` in `--traces`, format in trace.rs), runs
//! the cell, writes one CSV row per page load to `--pages-out` and one JSON
//! object (configuration, cell summary, wall time) to stdout.

use anyhow::{bail, Context, Result};
use clap::Parser;
use llcsim::cell::{self, CellConfig, PageResult, Rule};
use llcsim::trace::Trace;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

/// Simulate one URLLC cell shared by N browsing users, every packet steered by
/// the real dchannel core (Algorithm 1) into one shared LLC queue.
#[derive(Parser, Debug)]
#[command(name = "llcsim")]
struct Args {
    /// Directory of page-load traces (`*.csv`, header t_ns,dir,proto,src,sport,dst,dport,ip_len).
    #[arg(long)]
    traces: PathBuf,
    /// Users in the cell.
    #[arg(long)]
    users: u32,
    /// LLC capacity per direction, Mbit/s (shared queue and each agent's --llc-mbit).
    #[arg(long)]
    capacity_mbit: f64,
    /// Sharing rule: none = (a) each device's own virtual queue, share = (b) per-device token bucket.
    #[arg(long, value_enum, default_value = "none")]
    rule: Rule,
    /// Steering policy spec, as the agents' --policy.
    #[arg(long, default_value = "dchannel")]
    policy: String,
    /// HBC one-way delay the agents assume, ms (MM-S: 20 ms measured RTT / 2).
    #[arg(long, default_value_t = 10.0)]
    hbc_owd_ms: f64,
    /// LLC one-way delay the agents assume, ms (urllc preset: 5 ms RTT / 2).
    #[arg(long, default_value_t = 2.5)]
    llc_owd_ms: f64,
    /// Wire bytes per packet on top of its IP length (the agents' default overhead).
    #[arg(long, default_value_t = 44)]
    overhead: usize,
    /// Shared queue's drop-tail limit, bytes (chanemu's default 800 packets x 1500 B).
    #[arg(long, default_value_t = 1_200_000)]
    limit_bytes: u64,
    /// Rule (b): burst per device, bytes (one MTU bounds the excess to one packet).
    #[arg(long, default_value_t = 1500)]
    share_burst: u32,
    /// Pages start within this many seconds.
    #[arg(long, default_value_t = 60.0)]
    duration_s: f64,
    /// Mean think time between page loads, s (exponential; also the start offsets' range).
    #[arg(long, default_value_t = 30.0)]
    think_s: f64,
    /// Seed of start offsets, pages and think times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write one CSV row per page load here.
    #[arg(long)]
    pages_out: Option<PathBuf>,
}

const PAGE_COLUMNS: &str = "user,seq,page,start_ms,pkts,bytes,llc_pkts,llc_bytes,llc_frac,diverted_pkts,overflow_pkts,wait_p50_ms,wait_p95_ms,wait_p99_ms";

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

fn page_row(p: &PageResult) -> String {
    format!(
        "{},{},{},{:.3},{},{},{},{},{:.6},{},{},{},{},{}",
        p.user,
        p.seq,
        p.page,
        p.start_ms,
        p.pkts,
        p.bytes,
        p.llc_pkts,
        p.llc_bytes,
        p.llc_frac,
        p.diverted_pkts,
        p.overflow_pkts,
        opt(p.wait_p50_ms),
        opt(p.wait_p95_ms),
        opt(p.wait_p99_ms)
    )
}

fn ns(seconds: f64, what: &str) -> Result<u64> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        bail!("{what}: expected a number >= 0, got {seconds}");
    }
    Ok((seconds * 1e9).round() as u64)
}

fn read_traces(dir: &PathBuf) -> Result<Vec<Trace>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("--traces {dir:?}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!("--traces {dir:?}: no *.csv trace in it");
    }
    paths.iter().map(|p| Trace::read(p)).collect()
}

fn main() -> Result<()> {
    let a = Args::parse();
    let traces = read_traces(&a.traces)?;
    let cfg = CellConfig {
        users: a.users,
        capacity_bps: a.capacity_mbit * 1e6,
        limit_bytes: a.limit_bytes,
        rule: a.rule,
        share_burst: a.share_burst,
        policy: a.policy,
        hbc_owd: ns(a.hbc_owd_ms / 1e3, "--hbc-owd-ms")?,
        llc_owd: ns(a.llc_owd_ms / 1e3, "--llc-owd-ms")?,
        overhead: a.overhead,
        duration: ns(a.duration_s, "--duration-s")?,
        think: ns(a.think_s, "--think-s")?,
        seed: a.seed,
    };
    let mut out = match &a.pages_out {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("--pages-out {p:?}"))?;
            let mut w = BufWriter::new(f);
            writeln!(w, "{PAGE_COLUMNS}")?;
            Some(w)
        }
        None => None,
    };
    let mut write_err = None;
    let started = Instant::now();
    let summary = cell::run(&cfg, &traces, |p| {
        if let (Some(w), None) = (out.as_mut(), &write_err) {
            if let Err(e) = writeln!(w, "{}", page_row(&p)) {
                write_err = Some(e);
            }
        }
    })?;
    if let Some(e) = write_err {
        return Err(e).context("writing --pages-out");
    }
    if let Some(mut w) = out {
        w.flush().context("writing --pages-out")?;
    }
    let report = serde_json::json!({
        "config": cfg,
        "traces": traces.len(),
        "summary": summary,
        "wall_s": started.elapsed().as_secs_f64(),
    });
    println!("{report}");
    Ok(())
}
