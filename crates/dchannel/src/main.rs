//! `dchannel`: the agent binary (roles `client` and `gateway`).

mod agent;
mod arrival_log;
mod cli;
mod decision_log;
mod metrics;
mod net;
mod stats;
mod tun;

use agent::{Peer, Receiver, Role as AgentRole, Shared};
use anyhow::{bail, Context, Result};
use clap::Parser;
use cli::{Cli, Common, OnOff, Role};
use dchannel_core::policy::parse_spec;
use dchannel_core::reorder::ReorderConfig;
use dchannel_core::rtt::RttConfig;
use dchannel_core::steer::{SteerConfig, Steerer};
use dchannel_core::token::parse_token;
use dchannel_core::wire::HEADER_LEN;
use dchannel_core::{Direction, Nanos, MS};
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;
use tracing_subscriber::EnvFilter;

const UDP_HEADER: usize = 8;

fn ip_header(a: &SocketAddr) -> usize {
    if a.is_ipv4() {
        20
    } else {
        40
    }
}

fn ms_to_ns(v: f64, flag: &str) -> Result<Nanos> {
    if !(v.is_finite() && v >= 0.0) {
        bail!("{flag} {v}: expected a non-negative number of milliseconds");
    }
    Ok((v * MS as f64).round() as Nanos)
}

/// Blocks SIGINT/SIGTERM in this thread (and the threads it spawns) so that
/// the main thread can wait for them with sigwait.
fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: set is an initialised sigset_t; sig a valid out pointer.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}

struct Built {
    role: AgentRole,
    peers: Vec<Peer>,
    socks: [std::net::UdpSocket; 2],
    /// Outer IP header bytes (20 for IPv4, 40 for IPv6).
    outer_ip: usize,
}

fn build_client(a: &cli::ClientArgs) -> Result<Built> {
    let token = parse_token(&a.token).context("--token")?;
    let any = |gw: &SocketAddr| -> SocketAddr {
        if gw.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        }
    };
    let hbc = net::channel_socket(any(&a.hbc_gateway), Some(&a.hbc_dev), "HBC socket")?;
    let llc = net::channel_socket(any(&a.llc_gateway), Some(&a.llc_dev), "LLC socket")?;
    Ok(Built {
        role: AgentRole::Client,
        peers: vec![Peer::new(
            "gateway".into(),
            token,
            None,
            [Some(a.hbc_gateway), Some(a.llc_gateway)],
        )],
        socks: [hbc, llc],
        outer_ip: ip_header(&a.hbc_gateway).max(ip_header(&a.llc_gateway)),
    })
}

fn build_gateway(a: &cli::GatewayArgs) -> Result<Built> {
    let hbc = net::channel_socket(a.listen_hbc, a.hbc_dev.as_deref(), "HBC socket")?;
    let llc = net::channel_socket(a.listen_llc, a.llc_dev.as_deref(), "LLC socket")?;
    let mut peers = Vec::new();
    for (ip, tok) in &a.clients {
        peers.push(Peer::new(
            ip.to_string(),
            parse_token(tok)?,
            Some(*ip),
            [None, None],
        ));
    }
    Ok(Built {
        role: AgentRole::Gateway,
        peers,
        socks: [hbc, llc],
        outer_ip: ip_header(&a.listen_hbc).max(ip_header(&a.listen_llc)),
    })
}

/// Checks the flags that need no system access, before any socket or TUN exists.
fn validate(common: &Common) -> Result<()> {
    parse_spec(&common.policy, common.alpha).context("--policy")?;
    if common.llc_mbit.is_nan() || common.llc_mbit <= 0.0 {
        bail!(
            "--llc-mbit {}: expected a positive rate in Mbit/s",
            common.llc_mbit
        );
    }
    if !(common.hbc_rtt_scale.is_finite() && common.hbc_rtt_scale > 0.0) {
        bail!(
            "--hbc-rtt-scale {}: expected a positive factor",
            common.hbc_rtt_scale
        );
    }
    if !(0.2..=5.0).contains(&common.hbc_rtt_scale) {
        tracing::warn!(
            "--hbc-rtt-scale {} is outside the studied 0.2..5 range",
            common.hbc_rtt_scale
        );
    }
    for (v, flag) in [
        (common.pin_hbc_rtt_ms, "--pin-hbc-rtt-ms"),
        (common.pin_llc_rtt_ms, "--pin-llc-rtt-ms"),
    ] {
        if let Some(v) = v {
            ms_to_ns(v, flag)?;
        }
    }
    Ok(())
}

fn run(common: &Common, built: Built) -> Result<()> {
    let epoch = Instant::now();
    // The same instant on CLOCK_MONOTONIC, for logs that other agents join.
    let epoch_mono_ns = arrival_log::mono_ns();
    let Built {
        role,
        peers,
        socks,
        outer_ip,
    } = built;
    let mut by_token = HashMap::new();
    let mut by_inner: HashMap<IpAddr, usize> = HashMap::new();
    for (i, p) in peers.iter().enumerate() {
        if by_token.insert(p.token, i).is_some() {
            bail!("--client {}: token used by another client", p.name);
        }
        if let Some(a) = p.inner {
            if by_inner.insert(a, i).is_some() {
                bail!("--client {a}: configured twice");
            }
        }
    }
    // Policy, validated before touching the system.
    let policy_spec = parse_spec(&common.policy, common.alpha)
        .context("--policy")?
        .spec();
    if common.llc_mbit.is_nan() || common.llc_mbit <= 0.0 {
        bail!(
            "--llc-mbit {}: expected a positive rate in Mbit/s",
            common.llc_mbit
        );
    }
    if !(common.hbc_rtt_scale.is_finite() && common.hbc_rtt_scale > 0.0) {
        bail!(
            "--hbc-rtt-scale {}: expected a positive factor",
            common.hbc_rtt_scale
        );
    }
    let overhead = outer_ip + UDP_HEADER + HEADER_LEN;
    if common.outer_mtu < overhead + 576 {
        bail!(
            "--outer-mtu {}: expected at least {}",
            common.outer_mtu,
            overhead + 576
        );
    }
    let inner_mtu = common.outer_mtu - overhead;
    let dir = match role {
        AgentRole::Client => Direction::Uplink,
        AgentRole::Gateway => Direction::Downlink,
    };
    let steer_cfg = SteerConfig {
        dir,
        mtu: inner_mtu,
        overhead,
        llc_bits_per_sec: common.llc_mbit * 1e6,
        flow_capacity: common.flow_capacity.max(1),
        flow_idle: common.flow_idle_s * 1000 * MS,
    };
    let log = match &common.decision_log {
        Some(p) => Some(Arc::new(decision_log::DecisionLog::create(
            p,
            epoch_mono_ns,
        )?)),
        None => None,
    };
    let arrivals = match &common.arrival_log {
        Some(p) => Some(Arc::new(arrival_log::ArrivalLog::create(p, epoch_mono_ns)?)),
        None => None,
    };
    let steerers = peers
        .iter()
        .map(|_| {
            let mut s = Steerer::new(
                steer_cfg.clone(),
                parse_spec(&common.policy, common.alpha).expect("validated above"),
            );
            s.estimate_all = log.is_some();
            s
        })
        .collect::<Vec<_>>();
    let rtt_cfg = RttConfig {
        initiator: role == AgentRole::Client,
        interval: common.probe_interval_ms.max(1) * MS,
        window: common.rtt_window_ms.max(1) * MS,
        pin: [
            common
                .pin_hbc_rtt_ms
                .map(|v| ms_to_ns(v, "--pin-hbc-rtt-ms"))
                .transpose()?,
            common
                .pin_llc_rtt_ms
                .map(|v| ms_to_ns(v, "--pin-llc-rtt-ms"))
                .transpose()?,
        ],
        hbc_scale: common.hbc_rtt_scale,
        dead_after: common.channel_dead_ms * MS,
    };
    let reorder_cfg = (common.reorder == OnOff::On).then(|| ReorderConfig {
        timeout: common.reorder_timeout_ms * MS,
        max_flow_bytes: common.reorder_flow_bytes,
        max_total_bytes: common.reorder_total_bytes,
        ..ReorderConfig::default()
    });
    let role_name = match role {
        AgentRole::Client => "client",
        AgentRole::Gateway => "gateway",
    };
    let stats = Arc::new(stats::Stats::new(
        role_name,
        policy_spec.clone(),
        reorder_cfg.is_some(),
        peers.iter().map(|p| p.name.clone()).collect(),
    ));

    let tun = tun::create(&common.tun)?;
    tun::configure(&common.tun, &common.tun_addr, inner_mtu)?;
    if let Some(addr) = common.metrics_addr {
        metrics::serve(addr, Arc::clone(&stats))?;
    }
    let shared = Arc::new(Shared {
        role,
        peers,
        by_token,
        by_inner,
        socks,
        tun,
        stats: Arc::clone(&stats),
        epoch,
        log: log.clone(),
        arrivals: arrivals.clone(),
        max_datagram: common.outer_mtu.max(1500) + 64,
    });
    let sigs = block_signals();
    {
        let sh = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("tun->udp".into())
            .spawn(move || agent::run_sender(sh, steerers))?;
        let rx = Receiver::new(Arc::clone(&shared), rtt_cfg, reorder_cfg);
        std::thread::Builder::new()
            .name("udp->tun".into())
            .spawn(move || rx.run())?;
    }
    tracing::info!(
        "{role_name} up: tun {} ({}, mtu {inner_mtu}), policy {policy_spec}, LLC {} Mbit/s, overhead {overhead} B/packet",
        common.tun,
        common.tun_addr,
        common.llc_mbit
    );
    if role == AgentRole::Client
        && !shared.wait_for_estimates(std::time::Duration::from_millis(common.ready_wait_ms))
    {
        tracing::warn!(
            "no RTT estimate for both channels after {} ms: starting anyway (packets without \
             an estimate take the HBC until probes answer)",
            common.ready_wait_ms
        );
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "READY")?;
        out.flush()?;
    }
    let sig = wait_for_signal(&sigs);
    tracing::info!("signal {sig}: writing stats and exiting");
    // Give the receive thread's 50 ms publication a chance to include the last packets.
    std::thread::sleep(std::time::Duration::from_millis(60));
    if let Some(l) = &log {
        l.flush();
    }
    if let Some(a) = &arrivals {
        a.flush();
    }
    if let Some(p) = &common.stats_json {
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
        .init();
    let cli = Cli::parse();
    let common = match &cli.role {
        Role::Client(a) => &a.common,
        Role::Gateway(a) => &a.common,
    };
    if let Err(e) = validate(common) {
        eprintln!("dchannel: error: {e:#}");
        std::process::exit(2);
    }
    let res = match &cli.role {
        Role::Client(a) => build_client(a).and_then(|b| run(&a.common, b)),
        Role::Gateway(a) => build_gateway(a).and_then(|b| run(&a.common, b)),
    };
    match res {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("dchannel: error: {e:#}");
            std::process::exit(1);
        }
    }
}
