//! From the command line to an endpoint configuration: flags checked before
//! anything touches the system, the peers, their keys and their sockets, and
//! the sizes that follow from the outer path (per-packet overhead, inner MTU).
//!
//! Encryption is the default: the client needs `--key FILE` (its private key)
//! and `--gateway-key`, the gateway `--key FILE` and `--devices FILE`. The
//! plaintext bearer-token mode (`--token`, `--client ADDR=TOKEN`) only runs
//! with `--insecure`; mixing the two sets of flags is refused.

use crate::cli::{ClientArgs, Common, GatewayArgs, OnOff, RttArgs};
use crate::{net, own_addrs, reuseport, route_keeper};
use anyhow::{bail, Context, Result};
use dchannel_core::egress::{Cidr, EgressFilter};
use dchannel_core::endpoint::{Config, PeerConfig, Role};
use dchannel_core::policy::parse_spec;
use dchannel_core::reorder::ReorderConfig;
use dchannel_core::rtt::RttConfig;
use dchannel_core::token::parse_token;
use dchannel_core::wire::HEADER_LEN;
use dchannel_core::{Nanos, MS};
use dchannel_crypto::devices::read_devices;
use dchannel_crypto::endpoint::AeadAuth;
use dchannel_crypto::format::transport_overhead;
use dchannel_crypto::keys::read_private_key;
use dchannel_crypto::PublicKey;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

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

/// How an agent authenticates its datagrams.
pub enum Auth {
    /// `--insecure`: plaintext, the peers' tokens in the header (lab only).
    Insecure,
    /// Encrypted and authenticated (the default).
    Aead(AeadAuth),
}

impl Auth {
    /// Bytes the mode adds to every datagram besides the dchannel header.
    pub fn overhead(&self) -> usize {
        match self {
            Auth::Insecure => 0,
            Auth::Aead(_) => transport_overhead(),
        }
    }
}

/// The crypto layer's settings: stamps of our handshake initiations follow
/// the wall clock, so a restarted client is not taken for a replay; a client
/// that has heard nothing authentic for three probe intervals (a live
/// gateway answers every round) handshakes again, so a restarted gateway
/// gets a session back within about that long.
fn crypto_config(probe_interval_ms: u64) -> dchannel_crypto::Config {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    dchannel_crypto::Config {
        wall_clock_at_zero: wall,
        limits: dchannel_crypto::Limits {
            stale_after: Some(3 * probe_interval_ms.max(1) * MS),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn private_key(path: Option<&Path>, role: &str) -> Result<dchannel_crypto::PrivateKey> {
    let path = path.with_context(|| {
        format!(
            "--key FILE is required: the {role}'s private key (`dchannel genkey --out FILE`); \
             --insecure runs the plaintext lab mode instead"
        )
    })?;
    read_private_key(path).context("--key")
}

/// One agent as configured: its role, peers, keys and channel sockets.
pub struct Agent {
    /// Client or gateway.
    pub role: Role,
    /// The gateway (client role) or the served clients (gateway role).
    pub peers: Vec<PeerConfig>,
    /// One UDP socket per channel (index = Channel).
    /// Per worker, one UDP socket per channel (index = Channel); a client
    /// has one worker.
    pub socks: Vec<[UdpSocket; 2]>,
    /// Outer IP header bytes (20 for IPv4, 40 for IPv6).
    pub outer_ip: usize,
    /// Encrypted, or plaintext tokens.
    pub auth: Auth,
    /// The gateway's egress rule (its own addresses found at start); `None`
    /// at the client.
    pub egress: Option<EgressFilter>,
    /// An encrypted gateway's devices, changeable while it runs.
    pub live: Option<LiveSetup>,
}

/// What an encrypted gateway needs to change its devices while it runs
/// (live_devices.rs, control.rs).
pub struct LiveSetup {
    /// The devices as read at start (peer `i` is device `i`).
    pub devices: Vec<dchannel_crypto::devices::Device>,
    /// `--devices` (read again on SIGHUP).
    pub path: std::path::PathBuf,
    /// The control socket and whether it was asked for by name
    /// (`--control-socket`; then failing to create it is fatal).
    pub socket: std::path::PathBuf,
    pub socket_explicit: bool,
}

/// The client: one peer, the gateway, at its configured endpoints.
pub fn client(a: &ClientArgs) -> Result<Agent> {
    let (token, auth) = if a.common.insecure {
        if a.key.is_some() || a.gateway_key.is_some() {
            bail!("--key/--gateway-key: not with --insecure (the plaintext mode uses --token)");
        }
        if a.rekey_after_secs.is_some() {
            bail!("--rekey-after-secs: not with --insecure (it has no sessions to rekey)");
        }
        let t = a
            .token
            .as_deref()
            .context("--insecure needs --token HEX (this client's token at the gateway)")?;
        (parse_token(t).context("--token")?, Auth::Insecure)
    } else {
        if a.token.is_some() {
            bail!("--token: only with --insecure (encrypted agents authenticate with keys)");
        }
        let key = private_key(a.key.as_deref(), "device")?;
        let gw = a
            .gateway_key
            .as_deref()
            .context("--gateway-key BASE64 is required: the gateway's public key")?;
        let gw = PublicKey::from_base64(gw, "--gateway-key")?;
        let mut cfg = crypto_config(a.common.probe_interval_ms);
        if let Some(secs) = a.rekey_after_secs {
            cfg.limits.rekey_after_time = secs * dchannel_crypto::SECOND;
        }
        (0, Auth::Aead(AeadAuth::client(key, gw, cfg)))
    };
    let any = |gw: &SocketAddr| -> SocketAddr {
        if gw.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        }
    };
    let hbc = net::channel_socket(any(&a.hbc_gateway), Some(&a.hbc_dev), "HBC socket", false)?;
    let llc = net::channel_socket(any(&a.llc_gateway), Some(&a.llc_dev), "LLC socket", false)?;
    route_keeper::start(&[("HBC", &a.hbc_dev), ("LLC", &a.llc_dev)]);
    Ok(Agent {
        role: Role::Client,
        peers: vec![PeerConfig {
            name: "gateway".into(),
            token,
            tunnel_addr: None,
            endpoints: [Some(a.hbc_gateway), Some(a.llc_gateway)],
        }],
        socks: vec![[hbc, llc]],
        outer_ip: ip_header(&a.hbc_gateway).max(ip_header(&a.llc_gateway)),
        auth,
        egress: None,
        live: None,
    })
}

/// The gateway: one peer per device of `--devices` (or per `--client` with
/// `--insecure`), endpoints learned when heard.
pub fn gateway(a: &GatewayArgs) -> Result<Agent> {
    let workers = gateway_workers(a);
    let (peers, auth, devices) = gateway_peers(a, workers)?;
    let egress = egress(a)?;
    let live = devices.map(|(devices, path)| LiveSetup {
        devices,
        path,
        socket: a
            .control_socket
            .clone()
            .unwrap_or_else(|| crate::control::default_path(&a.common.tun)),
        socket_explicit: a.control_socket.is_some(),
    });
    let hbc = reuseport::worker_sockets(a.listen_hbc, a.hbc_dev.as_deref(), "HBC socket", workers)?;
    let llc = reuseport::worker_sockets(a.listen_llc, a.llc_dev.as_deref(), "LLC socket", workers)?;
    Ok(Agent {
        role: Role::Gateway,
        peers,
        socks: hbc.into_iter().zip(llc).map(|(h, l)| [h, l]).collect(),
        outer_ip: ip_header(&a.listen_hbc).max(ip_header(&a.listen_llc)),
        auth,
        egress: Some(egress),
        live,
    })
}

/// The gateway's egress rule: the host's addresses now (own_addrs.rs) and
/// the TUN's (it does not exist yet), with --egress-allow/--egress-deny.
fn egress(a: &GatewayArgs) -> Result<EgressFilter> {
    let mut own = own_addrs::discover().context("listing the host's addresses (getifaddrs)")?;
    let tun = a.common.tun_addr.split('/').next().unwrap_or_default();
    own.extend(tun.parse::<IpAddr>().ok());
    let rule = EgressFilter::new(&own, &a.egress_allow, &a.egress_deny)
        .map_err(|e| anyhow::anyhow!("--egress-allow/--egress-deny: {e}"))?;
    let list = |v: &[Cidr]| {
        v.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    tracing::info!(
        "egress: device packets to this host ({} addresses, read now: {}), loopback, \
         link-local, metadata, multicast and broadcast are dropped; allowed: [{}], denied: [{}]",
        own.len(),
        own.iter()
            .map(|ip| ip.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        list(&a.egress_allow),
        list(&a.egress_deny)
    );
    Ok(rule)
}

/// `--threads`, or else the cores (1 with `--busy-poll-us`: a spinning
/// thread per worker would take every core, poll_loop.rs); 1 with
/// `--insecure` (its datagrams carry no session index to steer them by:
/// reuseport.rs).
fn gateway_workers(a: &GatewayArgs) -> usize {
    let default = || match a.common.busy_poll_us {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        _ => 1,
    };
    let n = a.threads.map_or_else(default, usize::from);
    if a.common.insecure && n > 1 {
        if a.threads.is_some() {
            tracing::warn!(
                "--threads {n}: --insecure runs one worker (no session index to steer by)"
            );
        }
        return 1;
    }
    n
}

/// The devices file's devices and its path (encrypted gateways).
type DevicesRead = Option<(Vec<dchannel_crypto::devices::Device>, std::path::PathBuf)>;

/// The gateway's peers and keys (no system access besides reading the files),
/// session indices sharded over `workers`.
fn gateway_peers(a: &GatewayArgs, workers: usize) -> Result<(Vec<PeerConfig>, Auth, DevicesRead)> {
    if a.common.insecure {
        if a.key.is_some() || a.devices.is_some() {
            bail!("--key/--devices: not with --insecure (the plaintext mode uses --client)");
        }
        if a.control_socket.is_some() {
            bail!("--control-socket: not with --insecure (live configuration is for encrypted gateways, --devices FILE)");
        }
        if a.clients.is_empty() {
            bail!("--insecure needs at least one --client ADDRESS=HEXTOKEN");
        }
        let mut peers = Vec::new();
        for (ip, tok) in &a.clients {
            peers.push(PeerConfig {
                name: ip.to_string(),
                token: parse_token(tok)?,
                tunnel_addr: Some(*ip),
                endpoints: [None, None],
            });
        }
        return Ok((peers, Auth::Insecure, None));
    }
    if !a.clients.is_empty() {
        bail!("--client: only with --insecure (encrypted gateways take --devices FILE)");
    }
    let key = private_key(a.key.as_deref(), "gateway")?;
    let path = a.devices.as_deref().context(
        "--devices FILE is required: the served devices (TOML [[device]] name, public_key, \
         address; docs/deploy.md)",
    )?;
    let devices = read_devices(path)?;
    if devices.is_empty() {
        bail!("{}: no [[device]] configured", path.display());
    }
    let mut peers = Vec::with_capacity(devices.len());
    for d in &devices {
        let Some(addr) = d.address else {
            bail!(
                "{}: device {:?}: field `address` is required at the gateway (the device's \
                 tunnel address, where its downlink goes)",
                path.display(),
                d.name
            );
        };
        peers.push(PeerConfig {
            name: d.name.clone(),
            token: 0,
            tunnel_addr: Some(addr),
            endpoints: [None, None],
        });
    }
    let cfg = dchannel_crypto::Config {
        index_shards: workers as u32,
        ..crypto_config(a.common.probe_interval_ms)
    };
    let auth =
        AeadAuth::gateway(key, &devices, cfg).with_context(|| format!("{}", path.display()))?;
    Ok((peers, Auth::Aead(auth), Some((devices, path.to_path_buf()))))
}

/// `--stats-json` is written only at exit: a directory that does not exist (or
/// cannot be written) would lose the stats of the whole run, so it is refused
/// at start.
fn check_output_dir(flag: &str, path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let shown = || format!("{flag} {}: directory {}", path.display(), dir.display());
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{} is not a directory", shown()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{} does not exist", shown())
        }
        Err(e) => bail!("{}: {e}", shown()),
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .with_context(|| format!("{flag} {}", path.display()))?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        bail!("{} is not writable", shown());
    }
    Ok(())
}

/// Checks the flags that need no system access, before any socket or TUN exists.
pub fn validate(common: &Common) -> Result<()> {
    parse_spec(&common.policy, common.alpha).context("--policy")?;
    if let Some(p) = &common.outputs.stats_json {
        check_output_dir("--stats-json", p)?;
    }
    if common.llc_mbit.is_nan() || common.llc_mbit <= 0.0 {
        bail!(
            "--llc-mbit {}: expected a positive rate in Mbit/s",
            common.llc_mbit
        );
    }
    if !(common.rtt.hbc_rtt_scale.is_finite() && common.rtt.hbc_rtt_scale > 0.0) {
        bail!(
            "--hbc-rtt-scale {}: expected a positive factor",
            common.rtt.hbc_rtt_scale
        );
    }
    if !(0.2..=5.0).contains(&common.rtt.hbc_rtt_scale) {
        tracing::warn!(
            "--hbc-rtt-scale {} is outside the studied 0.2..5 range",
            common.rtt.hbc_rtt_scale
        );
    }
    for (v, flag) in [
        (common.rtt.pin_hbc_rtt_ms, "--pin-hbc-rtt-ms"),
        (common.rtt.pin_llc_rtt_ms, "--pin-llc-rtt-ms"),
    ] {
        if let Some(v) = v {
            ms_to_ns(v, flag)?;
        }
    }
    Ok(())
}

/// The RTT estimator's settings from its flags (all but the probe interval).
fn rtt_config(a: &RttArgs, rtt: &mut RttConfig) -> Result<()> {
    rtt.window = a.rtt_window_ms.max(1) * MS;
    rtt.pin = [
        a.pin_hbc_rtt_ms
            .map(|v| ms_to_ns(v, "--pin-hbc-rtt-ms"))
            .transpose()?,
        a.pin_llc_rtt_ms
            .map(|v| ms_to_ns(v, "--pin-llc-rtt-ms"))
            .transpose()?,
    ];
    rtt.hbc_scale = a.hbc_rtt_scale;
    rtt.dead_after = a.channel_dead_ms * MS;
    rtt.llc_probe_slack = (a.llc_probe_slack_ms > 0).then(|| a.llc_probe_slack_ms * MS);
    rtt.llc_probe_interval = (a.llc_probe_interval_ms > 0).then(|| a.llc_probe_interval_ms * MS);
    Ok(())
}

/// The endpoint configuration for `role` over an outer path with `outer_ip`
/// header bytes and `auth_overhead` bytes of encryption per datagram, and the
/// inner (TUN) MTU that follows. The policy's packet sizes and the LLC's
/// virtual queue count the whole outer packet, encryption included.
/// `devices`: the configured peers (an LLC capacity is split among them).
pub fn endpoint(
    common: &Common,
    role: Role,
    outer_ip: usize,
    auth_overhead: usize,
    devices: usize,
) -> Result<(Config, usize)> {
    validate(common)?;
    let overhead = outer_ip + UDP_HEADER + HEADER_LEN + auth_overhead;
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
    cfg.max_flows_total = common.gateway_flows.max(1);
    cfg.rtt.interval = common.probe_interval_ms.max(1) * MS;
    cfg.rtt.fast_interval = common.probe_fast_interval_ms.max(1) * MS;
    cfg.rtt.min_samples = common.probe_min_samples;
    rtt_config(&common.rtt, &mut cfg.rtt)?;
    cfg.reorder = (common.reorder == OnOff::On).then(|| ReorderConfig {
        timeout: common.reorder_timeout_ms * MS,
        max_flow_bytes: common.reorder_flow_bytes,
        max_total_bytes: common.reorder_total_bytes,
        max_device_bytes: common.reorder_device_bytes,
        max_flows: common.reorder_flows.max(1),
        max_device_flows: common.reorder_device_flows.max(1),
        fifo_loss: common.reorder_fifo == OnOff::On,
        adaptive: common.reorder_adaptive == OnOff::On,
        max_timeout: common.reorder_max_timeout_ms.max(common.reorder_timeout_ms) * MS,
        ..ReorderConfig::default()
    });
    cfg.estimate_all = common.outputs.decision_log.is_some();
    let pin_llc = cfg.rtt.pin[dchannel_core::Channel::Llc.index()];
    crate::llc_share_config::apply(
        &common.share,
        &mut cfg,
        devices,
        common.llc_mbit,
        common.outer_mtu,
        pin_llc,
    )?;
    Ok((cfg, inner_mtu))
}
