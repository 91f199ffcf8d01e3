//! `chanemu`: joins two network namespaces through a TUN pair and emulates one
//! channel (uplink A→B, downlink B→A) from a profile. See docs/chanemu.md.

mod driver;
mod pcap;
mod pktlog;
mod tun;

use anyhow::{Context, Result};
use chanemu::profile::{Direction, Profile};
use chanemu::stats::DirStats;
use chanemu::time::ms_f64;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Trace-driven channel emulator between two network namespaces.
///
/// Creates one TUN device in each namespace (side A = device/ue, side B =
/// gateway), prints READY once both are up, and emulates the profile's uplink
/// (A→B) and downlink (B→A; the only direction with radio sleep) until SIGINT or
/// SIGTERM; then writes the summary (--stats) and exits 0. Addresses and routes
/// on the devices are the caller's job.
#[derive(Parser, Debug)]
#[command(
    version,
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Channel profile: a TOML file (docs/formats.md) or a built-in:
    /// `fixed:<rtt>ms/<rate>mbit` (rate may be `unlimited`), `urllc`, `embb`, or
    /// `cellreplay:<dir>`: CellReplay's model over its trace directory (uplink
    /// replays `up-delay-light-pdo`, `up-heavy-pdo`, `latency-offset-up`, downlink
    /// the `down` files), as `mm-cellular` does. In a TOML file, a direction takes
    /// one with `rate = { cellreplay = "dir" }`.
    #[arg(long, required = true)]
    profile: Option<String>,
    /// Namespace of side A (the device, ue).
    #[arg(long, required = true)]
    ns_a: Option<String>,
    /// Interface name to give the TUN device in namespace A.
    #[arg(long, required = true)]
    dev_a: Option<String>,
    /// Namespace of side B (the gateway).
    #[arg(long, required = true)]
    ns_b: Option<String>,
    /// Interface name to give the TUN device in namespace B.
    #[arg(long, required = true)]
    dev_b: Option<String>,
    /// Seed for loss and Gaussian delay draws: same seed, same schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Start offset into the traces (ms): run time 0 is trace time OFFSET.
    #[arg(long, default_value_t = 0.0)]
    offset_ms: f64,
    /// MTU of both devices.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Per-packet CSV log (dir, arrival, release, sent, outcome, size, delay, queue depth).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Summary JSON written at exit.
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Capture what crosses the link: PREFIX-uplink.pcap (A→B) and
    /// PREFIX-downlink.pcap (B→A), raw IP, stamped when each packet left the emulator.
    #[arg(long, value_name = "PREFIX")]
    pcap: Option<PathBuf>,
    /// Busy-wait this long before a release instead of sleeping in ppoll (costs CPU;
    /// helps only without real-time priority on an idle machine).
    #[arg(long, default_value_t = 0)]
    spin_us: u64,
    /// SCHED_FIFO priority of the two packet threads (0 = normal scheduling). Real-time
    /// priority keeps release times precise on a busy machine (see docs/chanemu.md); the
    /// threads sleep whenever nothing is due, and the kernel's RT throttling bounds
    /// their share. Falls back to normal scheduling with a warning if not permitted.
    #[arg(long, default_value_t = 10)]
    rt_priority: i32,
    /// Lab instrument: publish, per direction, the one-way delay a packet entering
    /// the link now would see (queue, propagation, radio sleep) in this 16-byte
    /// shared-memory file, at least every millisecond, for agents started with
    /// `--hbc-owd-oracle` (docs/chanemu.md, "The delay oracle").
    #[arg(long, value_name = "FILE")]
    oracle: Option<PathBuf>,
    /// Serve control packets first in both directions' queue (rule (d) of a
    /// shared LLC, docs/llc_sharing.md): the agents' handshakes, keepalives and
    /// probes, and data datagrams whose inner packet is small enough to be a
    /// SYN, a pure ACK, FIN or RST (src/wire_class.rs). Strict priority, not
    /// preemptive; one drop-tail limit for both classes. Not with CellReplay.
    #[arg(long)]
    control_first: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Validate a profile (and the traces it names) and print it resolved, as JSON.
    CheckProfile {
        /// Profile file or built-in name.
        profile: String,
    },
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    let res = match &cli.cmd {
        Some(Cmd::CheckProfile { profile }) => check_profile(profile),
        None => run(&cli),
    };
    if let Err(e) = res {
        eprintln!("chanemu: error: {e:#}");
        std::process::exit(1);
    }
}

fn check_profile(arg: &str) -> Result<()> {
    let p = Profile::resolve(arg)?;
    println!("{}", serde_json::to_string_pretty(&p.to_json())?);
    Ok(())
}

fn run(cli: &Cli) -> Result<()> {
    let (profile_arg, ns_a, dev_a, ns_b, dev_b) =
        match (&cli.profile, &cli.ns_a, &cli.dev_a, &cli.ns_b, &cli.dev_b) {
            (Some(p), Some(a), Some(da), Some(b), Some(db)) => (p, a, da, b, db),
            _ => anyhow::bail!("--profile, --ns-a, --dev-a, --ns-b and --dev-b are required"),
        };
    if !(cli.offset_ms.is_finite() && cli.offset_ms >= 0.0) {
        anyhow::bail!("--offset-ms must be ≥ 0, got {}", cli.offset_ms);
    }
    if !(68..=65535).contains(&cli.mtu) {
        anyhow::bail!("--mtu must be in 68..=65535, got {}", cli.mtu);
    }
    let profile = Profile::resolve(profile_arg)?;
    tun::check_netns(ns_a)?;
    tun::check_netns(ns_b)?;
    let log = match &cli.log {
        Some(p) => Some(Arc::new(
            pktlog::PacketLog::create(p).with_context(|| format!("create log {}", p.display()))?,
        )),
        None => None,
    };

    // Unique temporary names in the root namespace: pid + side.
    let pid = std::process::id();
    let tun_a = tun::Tun::create(&format!("cea{pid}"))?;
    let tun_b = tun::Tun::create(&format!("ceb{pid}"))?;
    tun::place(&tun_a, ns_a, dev_a, cli.mtu).with_context(|| format!("side A ({ns_a}/{dev_a})"))?;
    tun::place(&tun_b, ns_b, dev_b, cli.mtu).with_context(|| format!("side B ({ns_b}/{dev_b})"))?;

    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }

    let offset = ms_f64(cli.offset_ms);
    let stop = Arc::new(AtomicBool::new(false));
    let activity = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    let mono_at_epoch = monotonic_ns();
    let wall_at_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let (capture, [tap_up, tap_down]) = match &cli.pcap {
        Some(prefix) => {
            let (c, [u, d]) = pcap::Capture::start(prefix, wall_at_epoch)?;
            (Some(c), [Some(u), Some(d)])
        }
        None => (None, [None, None]),
    };
    let oracle = match &cli.oracle {
        Some(p) => Some(Arc::new(
            dchannel_base::oracle::DelayOracle::create(p)
                .with_context(|| format!("--oracle {}", p.display()))?,
        )),
        None => None,
    };
    let pipeline = |dir: Direction| {
        let p = profile.pipeline(dir, cli.seed, offset);
        if cli.control_first {
            p.with_control_first()
                .context("--control-first: not with a CellReplay profile (no queue to split)")
        } else {
            Ok(p)
        }
    };
    // both directions are checked before any thread starts
    pipeline(Direction::Uplink)?;
    pipeline(Direction::Downlink)?;
    let mk = |dir: Direction, input: i32, output: i32, pcap| driver::DirectionIo {
        dir,
        input,
        output,
        pipe: pipeline(dir).expect("checked above"),
        buf_size: cli.mtu.max(1500) as usize + 64,
        spin_ns: cli.spin_us * 1000,
        rt_priority: cli.rt_priority,
        epoch,
        stop: stop.clone(),
        log: log.clone(),
        pcap,
        uplink_activity: activity.clone(),
        oracle: oracle.clone(),
    };
    let up = mk(Direction::Uplink, tun_a.raw(), tun_b.raw(), tap_up);
    let down = mk(Direction::Downlink, tun_b.raw(), tun_a.raw(), tap_down);
    let hu = std::thread::Builder::new()
        .name("uplink".into())
        .spawn(move || up.run())?;
    let hd = std::thread::Builder::new()
        .name("downlink".into())
        .spawn(move || down.run())?;

    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "READY")?;
        out.flush()?;
    }
    tracing::info!(profile = %profile.name, ns_a, dev_a, ns_b, dev_b, seed = cli.seed, offset_ms = cli.offset_ms, "running");
    while !STOP.load(Ordering::SeqCst) && !hu.is_finished() && !hd.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    let up_stats = hu
        .join()
        .map_err(|_| anyhow::anyhow!("uplink thread panicked"))?;
    let down_stats = hd
        .join()
        .map_err(|_| anyhow::anyhow!("downlink thread panicked"))?;
    if let Some(l) = &log {
        l.flush();
    }
    // the taps went with the packet threads: the writer drains and flushes
    // (a failed capture, e.g. a full disk, is reported but does not cost the stats)
    let pcap_counts = capture.and_then(|c| {
        c.finish()
            .map_err(|e| tracing::error!(error = %e, "pcap capture failed"))
            .ok()
    });
    report(
        cli,
        [mono_at_epoch, wall_at_epoch],
        &profile,
        &up_stats,
        &down_stats,
        pcap_counts,
        epoch.elapsed(),
    )?;
    drop((tun_a, tun_b)); // closing the descriptors removes both devices
    Ok(())
}

/// CLOCK_MONOTONIC now (ns): the clock every namespace shares, so run time 0 (where
/// fault schedules start) can be matched with the agents' logs.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn report(
    cli: &Cli,
    [mono_at_epoch, wall_at_epoch]: [u64; 2],
    profile: &Profile,
    up: &DirStats,
    down: &DirStats,
    pcap: Option<[pcap::DirCounts; 2]>,
    ran: Duration,
) -> Result<()> {
    let mut summary = serde_json::json!({
        "profile": profile.name,
        "seed": cli.seed,
        "offset_ms": cli.offset_ms,
        "duration_s": ran.as_secs_f64(),
        "start_mono_ns": mono_at_epoch,
        "start_unix_ns": wall_at_epoch,
        "uplink": up.to_json(),
        "downlink": down.to_json(),
    });
    if let (Some([u, d]), Some(prefix)) = (pcap, &cli.pcap) {
        let dir = |c: pcap::DirCounts, name: &str| {
            serde_json::json!({
                "file": pcap::file_name(prefix, name),
                "records": c.records,
                "dropped": c.dropped,
            })
        };
        summary["pcap"] =
            serde_json::json!({"uplink": dir(u, "uplink"), "downlink": dir(d, "downlink")});
        if u.dropped + d.dropped > 0 {
            tracing::warn!(
                uplink = u.dropped,
                downlink = d.dropped,
                "pcap writer fell behind; records dropped"
            );
        }
    }
    if let Some(p) = &cli.stats {
        std::fs::write(p, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("write stats {}", p.display()))?;
    }
    eprintln!(
        "chanemu: profile {} ran {:.1} s",
        profile.name,
        ran.as_secs_f64()
    );
    eprintln!("{}", up.human("uplink"));
    eprintln!("{}", down.human("downlink"));
    Ok(())
}
