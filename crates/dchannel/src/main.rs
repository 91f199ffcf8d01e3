//! `dchannel`: the agent binary (roles `client` and `gateway`) and its key
//! tools (`genkey`, `pubkey`).

mod agent;
mod arrival_log;
mod batch_recv;
mod batch_send;
mod cli;
mod config;
mod control;
mod csv_log;
mod decision_log;
mod device_limit_metrics;
mod device_plan;
mod final_publish;
mod handshake_log;
mod keytool;
mod live_devices;
mod llc_share_config;
mod metrics;
mod net;
mod oracle;
mod own_addrs;
mod poll_loop;
mod prefilter;
mod receive_loop;
mod reuseport;
mod route_keeper;
mod send_loop;
mod show;
mod stats;
mod tun;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use cli::{Cli, Common, Role};
use config::{Agent, Auth};
use dchannel_core::endpoint::{self, ConfigError, DatagramAuth, ReceiveHalf, SendHalf, Shared};
use dchannel_core::endpoint::{PeerConfig, TokenAuth};
use dchannel_core::policy::parse_spec;
use live_devices::LiveDevices;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing_subscriber::EnvFilter;

/// Blocks `signals` in this thread (and the threads it spawns afterwards);
/// returns the set, for sigwait.
fn block(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Blocks SIGINT/SIGTERM (and SIGHUP, blocked since start) in this thread and
/// the threads it spawns, so that the main thread can wait for them with sigwait.
fn block_signals() -> libc::sigset_t {
    block(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
}

/// A SIGHUP (a closed terminal, a reflexive `systemctl reload`, `kill -HUP`)
/// never stops the agent (dying would lose the stats): an encrypted gateway
/// reads its devices file again and applies the changes
/// ([`LiveDevices::on_sighup`]); other agents log it and run on.
fn log_sighup() {
    tracing::info!(
        "SIGHUP ignored: only an encrypted gateway reloads (its devices file); \
         running on, stats kept"
    );
}

/// Waits for SIGINT or SIGTERM; meanwhile, with `refusals` (the gateway's
/// encryption layer), logs refused handshakes (handshake_log.rs). SIGHUP:
/// `live` reloads its devices file, else [`log_sighup`].
fn wait_for_stop(
    set: &libc::sigset_t,
    refusals: Option<&dchannel_crypto::endpoint::AeadAuth>,
    live: Option<&Mutex<LiveDevices>>,
) -> i32 {
    let mut log = handshake_log::RefusalLog::default();
    loop {
        let sig = match refusals {
            None => wait_for_signal(set),
            Some(aead) => {
                if let Some(line) = log.check(Instant::now(), &aead.drops()) {
                    tracing::warn!("{line}");
                }
                match poll_signal(set, Duration::from_secs(1)) {
                    Some(sig) => sig,
                    None => continue,
                }
            }
        };
        if sig != libc::SIGHUP {
            return sig;
        }
        match live {
            Some(l) => l.lock().unwrap_or_else(|e| e.into_inner()).on_sighup(),
            None => log_sighup(),
        }
    }
}

/// A signal of `set` pending within `timeout`, if any.
fn poll_signal(set: &libc::sigset_t, timeout: Duration) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: set is an initialised sigset_t, ts a valid timespec; no siginfo wanted.
    let r = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (r > 0).then_some(r)
}

/// When the client says why it has no session yet: first after this long,
/// then every [`SESSION_WARN_EVERY`].
const SESSION_FIRST_WARN: Duration = Duration::from_secs(3);
const SESSION_WARN_EVERY: Duration = Duration::from_secs(10);

/// Encrypted client start-up: READY means connected, so wait until the
/// handshake with the gateway has given a session (the probes start it at
/// once and retry it every second). Until then, say why at warn, with the
/// handshake counters. SIGINT/SIGTERM end the wait (returned: the agent then
/// stops as usual, stats written); SIGHUP is ignored.
fn wait_for_session(
    aead: &dchannel_crypto::endpoint::AeadAuth,
    sigs: &libc::sigset_t,
) -> Option<i32> {
    let start = Instant::now();
    let mut next_warn = SESSION_FIRST_WARN;
    let mut warned = false;
    loop {
        if aead.has_session(0) {
            if warned {
                tracing::warn!(
                    "session with the gateway established after {:.1} s",
                    start.elapsed().as_secs_f64()
                );
            }
            return None;
        }
        match poll_signal(sigs, Duration::from_millis(5)) {
            Some(libc::SIGHUP) => log_sighup(),
            Some(sig) => return Some(sig),
            None => {}
        }
        if start.elapsed() >= next_warn {
            let s = aead.stats();
            tracing::warn!(
                "not READY: no session with the gateway after {} s: handshake sent {} times \
                 ({} retries, {} rounds given up), no answer: wrong --gateway-key or gateway \
                 port, this device's key not in the gateway's devices file, or both channels \
                 down?",
                next_warn.as_secs(),
                s.initiations_sent,
                s.retries,
                s.gave_up
            );
            warned = true;
            next_warn += SESSION_WARN_EVERY;
        }
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: set is an initialised sigset_t; sig a valid out pointer.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}

/// Client start-up: waits (at most `timeout`) until the first probe round has
/// given one-way delays for both channels, then one more HBC one-way delay (and a
/// small margin), by which time the gateway has had the D-ACK and published its own
/// estimates too (a first sample is published at once, see the receive half). Without this, the very first packets
/// (typically the application's DNS query) see no estimate and take the HBC
/// (`no_estimate`), which costs a whole HBC RTT on the first lookup.
fn wait_for_estimates(shared: &Shared, timeout: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if shared.all_estimated() {
            std::thread::sleep(
                Duration::from_nanos(shared.max_hbc_owd()) + Duration::from_millis(5),
            );
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// The endpoint's two halves for each of `workers` workers over `peers` with
/// `auth` (errors name the flags).
type Halves<A> = Vec<(SendHalf<A>, ReceiveHalf<Vec<u8>, A>)>;

fn halves<A: DatagramAuth + Clone>(
    common: &Common,
    cfg: endpoint::Config,
    peers: Vec<PeerConfig>,
    auth: A,
    workers: usize,
) -> Result<Halves<A>> {
    let flag = if common.insecure {
        "--client"
    } else {
        "--devices"
    };
    let (spec, alpha) = (common.policy.clone(), common.alpha);
    let policy = move || parse_spec(&spec, alpha).expect("validated before");
    endpoint::new_workers(cfg, peers, auth, policy, workers)
        .map_err(|e: ConfigError| anyhow!("{flag} {e}"))
}

/// Configuration, then the agent runs with the authentication `agent.auth` asks for.
fn run(common: &Common, agent: Agent) -> Result<()> {
    let Agent {
        role,
        peers,
        socks,
        outer_ip,
        auth,
        egress,
        live,
    } = agent;
    let (mut cfg, inner_mtu) =
        config::endpoint(common, role, outer_ip, auth.overhead(), peers.len())?;
    if egress.is_some() {
        cfg.egress = egress;
    }
    let workers = socks.len();
    match auth {
        Auth::Insecure => {
            tracing::warn!(
                "--insecure: datagrams are NOT encrypted; a bearer token authenticates them"
            );
            let token = TokenAuth::new(&peers).map_err(|e| anyhow!("--client {e}"))?;
            prefilter_sockets(common, &socks, &token.shapes())?;
            let halves = halves(common, cfg, peers, token, workers)?;
            serve(common, role, socks, inner_mtu, halves, None, None)
        }
        Auth::Aead(aead) => {
            prefilter_sockets(common, &socks, &aead.shapes())?;
            let halves = halves(common, cfg, peers, aead.clone(), workers)?;
            let live = match live {
                Some(setup) => {
                    let prefixes =
                        device_plan::TunnelPrefixes::new(&common.tun_addr, &common.tun_routes)
                            .map_err(|e| anyhow!(e))?;
                    // every half shares one `Shared`: the first one's will do
                    let devices = LiveDevices::new(
                        setup.devices.clone(),
                        aead.clone(),
                        Arc::clone(halves[0].0.shared()),
                        prefixes,
                        setup.path.clone(),
                    );
                    Some((setup, Arc::new(Mutex::new(devices))))
                }
                None => None,
            };
            serve(common, role, socks, inner_mtu, halves, Some(aead), live)
        }
    }
}

/// `--kernel-prefilter on`: the kernel drops datagrams of no shape the
/// authentication layer accepts before the agent reads them (prefilter.rs).
fn prefilter_sockets(
    common: &Common,
    socks: &[[std::net::UdpSocket; 2]],
    shapes: &[endpoint::Shape],
) -> Result<()> {
    if common.kernel_prefilter == cli::OnOff::On {
        for s in socks.iter().flatten() {
            prefilter::attach(s, shapes).context("--kernel-prefilter: SO_ATTACH_FILTER")?;
        }
    }
    Ok(())
}

/// An encrypted gateway's devices, changeable while it runs.
type Live = (config::LiveSetup, Arc<Mutex<LiveDevices>>);

/// Thread start (per worker: its socket pair, TUN queue and halves); then
/// waits for SIGINT/SIGTERM and writes the stats.
fn serve<A: DatagramAuth + 'static>(
    common: &Common,
    role: endpoint::Role,
    socks: Vec<[std::net::UdpSocket; 2]>,
    inner_mtu: usize,
    mut halves: Halves<A>,
    crypto: Option<dchannel_crypto::endpoint::AeadAuth>,
    live: Option<Live>,
) -> Result<()> {
    let workers = halves.len();
    if let Some(path) = &common.rtt.hbc_owd_oracle {
        for (tx, _) in &mut halves {
            tx.set_hbc_owd_oracle(Box::new(oracle::FileOracle::open(path, role)?));
        }
        tracing::warn!(
            "steering with the emulator's true HBC delay from {} (a lab instrument, not an estimate)",
            path.display()
        );
    }
    let epoch = Instant::now();
    // The same instant on CLOCK_MONOTONIC, for logs that other agents join.
    let epoch_mono_ns = arrival_log::mono_ns();
    let overhead = common.outer_mtu - inner_mtu;
    let reorder_enabled = common.reorder == cli::OnOff::On;
    let encrypted = crypto.is_some();
    let policy_spec = parse_spec(&common.policy, common.alpha)?.spec();
    let log = match &common.outputs.decision_log {
        Some(p) => Some(Arc::new(decision_log::DecisionLog::create(
            p,
            epoch_mono_ns,
        )?)),
        None => None,
    };
    let arrivals = match &common.outputs.arrival_log {
        Some(p) => Some(Arc::new(arrival_log::ArrivalLog::create(p, epoch_mono_ns)?)),
        None => None,
    };
    let shared = Arc::clone(halves[0].0.shared());
    let mut stats = stats::Stats::new(
        role.name(),
        policy_spec.clone(),
        reorder_enabled,
        Arc::clone(&shared),
        workers,
    );
    let session_auth = crypto.clone();
    stats.crypto = crypto;
    stats.epoch = epoch;
    let (tuns, vnet_hdr) = tun::create(&common.tun, common.tun_offload == cli::OnOff::On, workers)?;
    stats.tun.offload = vnet_hdr;
    stats.busy_poll.us = common.busy_poll_us;
    stats.kernel_drop_fds = socks.iter().map(prefilter::fds).collect();
    let stats = Arc::new(stats);
    tun::configure(&common.tun, &common.tun_addr, inner_mtu)?;
    tun::route(&common.tun, &common.tun_routes)?;
    // Before any thread starts: every thread but main blocks SIGINT/SIGTERM,
    // so they wait for main's sigwait. (A thread that did not block them
    // would take a SIGTERM sent before main waits, and the default action
    // would end the agent without its stats.)
    let sigs = block_signals();
    if let Some(addr) = common.outputs.metrics_addr {
        metrics::serve(addr, Arc::clone(&stats))?;
    }
    // removes its socket file when the gateway stops
    let _control = match &live {
        Some((setup, devices)) => control::start(setup, devices, epoch)?,
        None => None,
    };
    let mut ios = Vec::with_capacity(workers);
    for (k, ((socks, tun), (tx, rx))) in socks.into_iter().zip(tuns).zip(halves).enumerate() {
        let io = Arc::new(agent::Io {
            socks,
            tun,
            stats: Arc::clone(&stats),
            epoch,
            log: log.clone(),
            arrivals: arrivals.clone(),
            max_datagram: common.outer_mtu.max(1500) + 64,
            vnet_hdr,
            final_publish: final_publish::FinalPublish::new().context("eventfd")?,
            worker: k,
        });
        ios.push(Arc::clone(&io));
        // Thread names: as before with one worker, numbered with several.
        let name = |base: &str| match workers {
            1 => base.to_string(),
            _ => format!("{base}/{k}"),
        };
        if common.busy_poll_us > 0 {
            // One thread for both directions (poll_loop.rs says why).
            let window = common.busy_poll_us * 1_000;
            std::thread::Builder::new()
                .name(name("poll"))
                .spawn(move || poll_loop::run(io, tx, rx, window))?;
        } else {
            let io_tx = Arc::clone(&io);
            std::thread::Builder::new()
                .name(name("tun->udp"))
                .spawn(move || send_loop::run_sender(io_tx, tx))?;
            std::thread::Builder::new()
                .name(name("udp->tun"))
                .spawn(move || receive_loop::run_receiver(io, rx))?;
        }
    }
    let role_name = role.name();
    tracing::info!(
        "{role_name} up: tun {} ({}, mtu {inner_mtu}{}), policy {policy_spec}, LLC {} Mbit/s, overhead {overhead} B/packet, {}{}",
        common.tun,
        common.tun_addr,
        if vnet_hdr { ", TSO" } else { "" },
        common.llc_mbit,
        if encrypted { "encrypted" } else { "INSECURE (plaintext)" },
        match workers {
            1 => String::new(),
            n => format!(", {n} workers"),
        }
    );
    let mut stopped = None;
    if role == endpoint::Role::Client {
        if let Some(aead) = &session_auth {
            stopped = wait_for_session(aead, &sigs);
        }
        if stopped.is_none()
            && !wait_for_estimates(&shared, Duration::from_millis(common.ready_wait_ms))
        {
            tracing::warn!(
                "no RTT estimate for both channels after {} ms: starting anyway (packets \
                 without an estimate take the HBC until probes answer)",
                common.ready_wait_ms
            );
        }
    }
    if stopped.is_none() {
        let mut out = std::io::stdout().lock();
        writeln!(out, "READY")?;
        out.flush()?;
    }
    let refusals = session_auth
        .as_ref()
        .filter(|_| role == endpoint::Role::Gateway);
    let live_devices = live.as_ref().map(|(_, d)| &**d);
    let sig = stopped.unwrap_or_else(|| wait_for_stop(&sigs, refusals, live_devices));
    tracing::info!("signal {sig}: writing stats and exiting");
    // Datagrams the peer sent just before it was stopped too (the lab stops both
    // agents together) land within a few ms on any path the lab uses; then the
    // receive thread drains its sockets and publishes its reorder stats once more.
    std::thread::sleep(Duration::from_millis(5));
    for io in &ios {
        if !io.final_publish.request(Duration::from_millis(200)) {
            tracing::warn!("receive thread did not publish within 200 ms: stats may be stale");
        }
    }
    if let Some(l) = &log {
        l.flush();
    }
    if let Some(a) = &arrivals {
        a.flush();
    }
    if let Some(p) = &common.outputs.stats_json {
        let text = serde_json::to_string_pretty(&stats.to_json())?;
        std::fs::write(p, text + "\n").with_context(|| format!("--stats-json {}", p.display()))?;
    }
    Ok(())
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: not in files, pipes and journals.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    if matches!(cli.role, Role::Client(_) | Role::Gateway(_)) {
        // Before any thread exists, so that every thread inherits it: a SIGHUP
        // during start-up waits for wait_for_stop instead of killing the agent.
        block(&[libc::SIGHUP]);
    }
    let common = match &cli.role {
        Role::Client(a) => &a.common,
        Role::Gateway(a) => &a.common,
        Role::Genkey(a) => keytool::exit(keytool::genkey(a)),
        Role::Pubkey(a) => keytool::exit(keytool::pubkey(a)),
        Role::Show(a) => keytool::exit(show::show(a)),
        Role::Set(a) => keytool::exit(control::set(a)),
        Role::Syncconf(a) => keytool::exit(control::syncconf(a)),
    };
    if let Err(e) = config::validate(common) {
        eprintln!("dchannel: error: {e:#}");
        std::process::exit(2);
    }
    let res = match &cli.role {
        Role::Client(a) => config::client(a).and_then(|b| run(&a.common, b)),
        Role::Gateway(a) => config::gateway(a).and_then(|b| run(&a.common, b)),
        Role::Genkey(_) | Role::Pubkey(_) | Role::Show(_) | Role::Set(_) | Role::Syncconf(_) => {
            unreachable!("handled above")
        }
    };
    match res {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("dchannel: error: {e:#}");
            std::process::exit(1);
        }
    }
}
