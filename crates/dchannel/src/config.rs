//! From the command line to an endpoint configuration: flags checked before
//! anything touches the system, the peers and their sockets, and the sizes
//! that follow from the outer path (per-packet overhead, inner MTU).

use crate::cli::{ClientArgs, Common, GatewayArgs, OnOff};
use crate::net;
use anyhow::{bail, Context, Result};
use dchannel_core::endpoint::{Config, PeerConfig, Role};
use dchannel_core::policy::parse_spec;
use dchannel_core::reorder::ReorderConfig;
use dchannel_core::token::parse_token;
use dchannel_core::wire::HEADER_LEN;
use dchannel_core::{Nanos, MS};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

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

/// One agent as configured: its role, peers and channel sockets.
pub struct Agent {
    /// Client or gateway.
    pub role: Role,
    /// The gateway (client role) or the served clients (gateway role).
    pub peers: Vec<PeerConfig>,
    /// One UDP socket per channel (index = Channel).
    pub socks: [UdpSocket; 2],
    /// Outer IP header bytes (20 for IPv4, 40 for IPv6).
    pub outer_ip: usize,
}

/// The client: one peer, the gateway, at its configured endpoints.
pub fn client(a: &ClientArgs) -> Result<Agent> {
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
    Ok(Agent {
        role: Role::Client,
        peers: vec![PeerConfig {
            name: "gateway".into(),
            token,
            tunnel_addr: None,
            endpoints: [Some(a.hbc_gateway), Some(a.llc_gateway)],
        }],
        socks: [hbc, llc],
        outer_ip: ip_header(&a.hbc_gateway).max(ip_header(&a.llc_gateway)),
    })
}

/// The gateway: one peer per `--client`, endpoints learned when heard.
pub fn gateway(a: &GatewayArgs) -> Result<Agent> {
    let hbc = net::channel_socket(a.listen_hbc, a.hbc_dev.as_deref(), "HBC socket")?;
    let llc = net::channel_socket(a.listen_llc, a.llc_dev.as_deref(), "LLC socket")?;
    let mut peers = Vec::new();
    for (ip, tok) in &a.clients {
        peers.push(PeerConfig {
            name: ip.to_string(),
            token: parse_token(tok)?,
            tunnel_addr: Some(*ip),
            endpoints: [None, None],
        });
    }
    Ok(Agent {
        role: Role::Gateway,
        peers,
        socks: [hbc, llc],
        outer_ip: ip_header(&a.listen_hbc).max(ip_header(&a.listen_llc)),
    })
}

/// Checks the flags that need no system access, before any socket or TUN exists.
pub fn validate(common: &Common) -> Result<()> {
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

/// The endpoint configuration for `role` over an outer path with `outer_ip`
/// header bytes, and the inner (TUN) MTU that follows.
pub fn endpoint(common: &Common, role: Role, outer_ip: usize) -> Result<(Config, usize)> {
    validate(common)?;
    let overhead = outer_ip + UDP_HEADER + HEADER_LEN;
    if common.outer_mtu < overhead + 576 {
        bail!(
            "--outer-mtu {}: expected at least {}",
            common.outer_mtu,
            overhead + 576
        );
    }
    let inner_mtu = common.outer_mtu - overhead;
    let mut cfg = Config::new(role);
    cfg.steer.mtu = inner_mtu;
    cfg.steer.overhead = overhead;
    cfg.steer.llc_bits_per_sec = common.llc_mbit * 1e6;
    cfg.steer.flow_capacity = common.flow_capacity.max(1);
    cfg.steer.flow_idle = common.flow_idle_s * 1000 * MS;
    cfg.rtt.interval = common.probe_interval_ms.max(1) * MS;
    cfg.rtt.window = common.rtt_window_ms.max(1) * MS;
    cfg.rtt.pin = [
        common
            .pin_hbc_rtt_ms
            .map(|v| ms_to_ns(v, "--pin-hbc-rtt-ms"))
            .transpose()?,
        common
            .pin_llc_rtt_ms
            .map(|v| ms_to_ns(v, "--pin-llc-rtt-ms"))
            .transpose()?,
    ];
    cfg.rtt.hbc_scale = common.hbc_rtt_scale;
    cfg.rtt.dead_after = common.channel_dead_ms * MS;
    cfg.reorder = (common.reorder == OnOff::On).then(|| ReorderConfig {
        timeout: common.reorder_timeout_ms * MS,
        max_flow_bytes: common.reorder_flow_bytes,
        max_total_bytes: common.reorder_total_bytes,
        ..ReorderConfig::default()
    });
    cfg.estimate_all = common.decision_log.is_some();
    Ok((cfg, inner_mtu))
}
