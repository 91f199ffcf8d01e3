//! `webreplay`: HTTPS replay server for the dchannel testbed. See `webreplay --help` and
//! docs/webreplay.md.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use tokio::sync::{mpsc, watch};

use webreplay::access_log::AccessLog;
use webreplay::cdn::{CdnConfig, Tier};
use webreplay::certs::{self, CertAuthority};
use webreplay::corpus::Corpus;
use webreplay::quic::{self, QuicCtx};
use webreplay::quic_stats::QuicStats;
use webreplay::server::{accept_loop, Builders, ListenerCtx, TlsSites};
use webreplay::service::AppState;
use webreplay::{hosts, listener};

/// HTTPS replay server: one origin per hosts-file name, each on its own address, with a
/// certificate per origin signed by the testbed CA, HTTP/2 + HTTP/1.1 by ALPN (and HTTP/3
/// over QUIC with --h3-port), recorded page
/// corpora served with their think times, and built-in `GET /bytes/N` and `GET /health`.
///
/// Prints `READY` on stdout once every listener is bound; SIGINT/SIGTERM stop it gracefully
/// (exit 0). Logs go to stderr (filter with RUST_LOG, e.g. RUST_LOG=webreplay=debug).
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Cli {
    /// Hosts file (/etc/hosts syntax: `198.19.128.1 server.test [more.names]`); every name is
    /// an origin, every address gets an HTTP and an HTTPS listener.
    #[arg(long, value_name = "FILE")]
    hosts: PathBuf,

    /// CA certificate (PEM) that signs the per-origin leaf certificates.
    #[arg(long, value_name = "CA.pem", required_unless_present = "check")]
    ca_cert: Option<PathBuf>,

    /// CA private key (PEM, PKCS#8; ECDSA P-256 expected).
    #[arg(long, value_name = "CA.key", required_unless_present = "check")]
    ca_key: Option<PathBuf>,

    /// Only check that the hosts file and the corpus can be served (the same parsers as a
    /// real start), print `OK` and exit 0; exit 1 naming the file and field otherwise.
    /// Binds nothing and needs no CA (`dch corpus info --verify` uses it).
    #[arg(long)]
    check: bool,

    /// Page corpus directory (manifest.json + bodies/); without it only the built-in
    /// endpoints are served.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,

    /// Plain-HTTP port on every address (HTTP/1.1 and h2c prior knowledge); 0 disables it.
    #[arg(long, default_value_t = 80)]
    http_port: u16,

    /// HTTPS port on every address; 0 disables it.
    #[arg(long, default_value_t = 443)]
    https_port: u16,

    /// UDP port of an HTTP/3 (QUIC) endpoint on every address, serving the same origins,
    /// certificates, think times and CDN delays as HTTPS; 0 (the default) disables HTTP/3.
    #[arg(long, default_value_t = 0)]
    h3_port: u16,

    /// Origins that do not speak QUIC: no HTTP/3 endpoint on their addresses (a client
    /// forced to QUIC gets an ICMP port unreachable), e.g. to test that a load is judged
    /// invalid when it cannot be all HTTP/3.
    #[arg(long, value_delimiter = ',', value_name = "HOST,...")]
    h3_refuse: Vec<String>,

    /// Create listening sockets with IPPROTO_MPTCP: MPTCP clients get MPTCP, plain TCP
    /// clients still work.
    #[arg(long)]
    mptcp: bool,

    /// Append one JSON object per response here (ts, client, host, alpn, method, path,
    /// status, bytes, think_ms, ttfb_ms, total_ms, ...).
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,

    /// At exit, write the server side of every HTTP/3 connection here as JSON: packets
    /// sent and declared lost, congestion events, final window and RTT, per connection
    /// and in total (QUIC's loss recovery, RFC 9002, as quinn ran it).
    #[arg(long, value_name = "FILE")]
    quic_stats_json: Option<PathBuf>,

    /// ALPN protocols offered by origins the corpus gives no `alpn` for, in preference order.
    #[arg(long, value_delimiter = ',', default_value = "h2,http/1.1")]
    default_alpn: Vec<String>,

    /// Worker threads (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,

    /// On SIGINT/SIGTERM, wait at most this long for in-flight responses.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    grace_ms: u64,

    /// Serve corpus objects through a modelled CDN: each object's tier (the manifest's
    /// `tier`, else the hit ratio) adds its delay before the response head. Implied by the
    /// other --cdn-* flags. Defaults: edge 0, parent 10, origin 50 ms; objects without a
    /// recorded tier are edge hits unless --cdn-hit-ratio says otherwise.
    #[arg(long)]
    cdn: bool,

    /// Extra delay per tier, e.g. `edge=0,parent=10,origin=50` (ms; omitted tiers keep
    /// their default).
    #[arg(long, value_name = "TIER=MS,...")]
    cdn_delays_ms: Option<String>,

    /// Tier shares of objects the manifest gives no tier, e.g. `edge=0.6,parent=0.25`
    /// (the origin gets the rest; an omitted tier is 0).
    #[arg(long, value_name = "edge=P,parent=P")]
    cdn_hit_ratio: Option<String>,

    /// Seed of the hit-ratio draw (per object: sha256 of "<seed>\0<url>").
    #[arg(long, value_name = "N")]
    cdn_seed: Option<u64>,

    /// listen(2) backlog of every listening socket.
    #[arg(long, default_value_t = 1024)]
    backlog: i32,
}

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(n) = cli.threads {
        rt.worker_threads(n.max(1));
    }
    let code = match rt
        .build()
        .context("starting the tokio runtime")
        .and_then(|rt| rt.block_on(run(cli)))
    {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("webreplay: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// The CDN model the flags ask for (`None`: no --cdn* flag given).
fn cdn_config(cli: &Cli) -> Result<Option<CdnConfig>> {
    let any = cli.cdn
        || cli.cdn_delays_ms.is_some()
        || cli.cdn_hit_ratio.is_some()
        || cli.cdn_seed.is_some();
    if !any {
        return Ok(None);
    }
    let mut c = CdnConfig::default();
    if let Some(spec) = &cli.cdn_delays_ms {
        c.parse_delays(spec).map_err(anyhow::Error::msg)?;
    }
    if let Some(spec) = &cli.cdn_hit_ratio {
        c.parse_ratio(spec).map_err(anyhow::Error::msg)?;
    }
    if let Some(seed) = cli.cdn_seed {
        c.seed = seed;
    }
    Ok(Some(c))
}

async fn run(cli: Cli) -> Result<()> {
    certs::validate_alpn(&cli.default_alpn, "--default-alpn")?;
    let cdn = cdn_config(&cli)?;
    let host_addrs = hosts::load(&cli.hosts)?;
    if cli.check {
        if let Some(dir) = &cli.corpus {
            Corpus::load(dir)?;
        }
        println!("OK");
        return Ok(());
    }
    let (Some(ca_cert), Some(ca_key)) = (&cli.ca_cert, &cli.ca_key) else {
        anyhow::bail!("--ca-cert and --ca-key are required (except with --check)");
    };
    let ca = CertAuthority::load(ca_cert, ca_key)?;
    let corpus = match &cli.corpus {
        Some(dir) => {
            let c = Corpus::load(dir)?;
            tracing::info!(name = %c.name, objects = c.objects.len(), hosts = c.hosts.len(), body_mb = c.body_bytes as f64 / 1e6, "corpus loaded");
            Some(c)
        }
        None => None,
    };

    // One certificate per origin: in a TLS config for TCP, and for QUIC's SNI resolver.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut by_name = HashMap::new();
    let mut quic_keys = HashMap::new();
    for ha in &host_addrs {
        for name in &ha.names {
            let alpn = corpus
                .as_ref()
                .and_then(|c| c.alpn.get(name))
                .cloned()
                .unwrap_or_else(|| cli.default_alpn.clone());
            let (cert, key) = ca.issue_leaf(name, Some(ha.addr))?;
            if cli.h3_port != 0 {
                quic_keys.insert(
                    name.clone(),
                    certs::certified_key(&provider, cert.clone(), key.clone_key())?,
                );
            }
            by_name.insert(
                name.clone(),
                certs::server_config(&provider, cert, key, &alpn)?,
            );
        }
    }
    let quic_keys = Arc::new(quic_keys);
    for h in &cli.h3_refuse {
        anyhow::ensure!(
            by_name.contains_key(&h.to_ascii_lowercase()),
            "--h3-refuse: {h:?} is not a name in the hosts file"
        );
    }
    if let Some(c) = &corpus {
        let unbound: Vec<&String> = c
            .hosts
            .iter()
            .filter(|h| !by_name.contains_key(*h))
            .collect();
        if !unbound.is_empty() {
            tracing::warn!(count = unbound.len(), first = %unbound[0], "corpus hosts missing from the hosts file: their objects cannot be reached by name");
        }
    }
    let tls_sites = Arc::new(TlsSites { by_name });

    let (log, log_writer) = match &cli.access_log {
        Some(p) => {
            let (l, w) = AccessLog::open(p)?;
            (l, Some(w))
        }
        None => (AccessLog::disabled(), None),
    };
    if let Some(c) = &cdn {
        tracing::info!(
            edge_ms = c.delay(Tier::Edge).as_secs_f64() * 1e3,
            parent_ms = c.delay(Tier::Parent).as_secs_f64() * 1e3,
            origin_ms = c.delay(Tier::Origin).as_secs_f64() * 1e3,
            hit_edge = c.ratio.edge(),
            hit_parent = c.ratio.parent(),
            seed = c.seed,
            "CDN tiers on"
        );
    }
    let state = Arc::new(AppState { corpus, log, cdn });
    let builders = Arc::new(Builders::new());
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);

    // Bind everything before announcing READY.
    let mut bound = Vec::new();
    for ha in &host_addrs {
        let default_host: Arc<str> = Arc::from(ha.names[0].as_str());
        for (port, tls) in [(cli.http_port, false), (cli.https_port, true)] {
            if port == 0 {
                continue;
            }
            let addr = SocketAddr::new(ha.addr, port);
            let l = listener::bind(addr, cli.mptcp, cli.backlog)?;
            tracing::info!(%addr, tls, mptcp = cli.mptcp, names = ?ha.names, "listening");
            bound.push((
                l,
                ListenerCtx {
                    state: state.clone(),
                    tls: tls.then(|| tls_sites.clone()),
                    default_host: default_host.clone(),
                    builders: builders.clone(),
                    shutdown: shutdown_rx.clone(),
                    alive: alive_tx.clone(),
                },
            ));
        }
    }
    let mut loops = Vec::new();
    let quic_stats = Arc::new(QuicStats::default());
    if cli.h3_port != 0 {
        for ha in &host_addrs {
            if ha
                .names
                .iter()
                .any(|n| cli.h3_refuse.iter().any(|r| r.eq_ignore_ascii_case(n)))
            {
                tracing::info!(names = ?ha.names, "no HTTP/3 here (--h3-refuse)");
                continue;
            }
            let addr = SocketAddr::new(ha.addr, cli.h3_port);
            let tls = certs::quic_server_config(
                &provider,
                certs::SniCerts {
                    by_name: quic_keys.clone(),
                    default_host: ha.names[0].clone(),
                },
            )?;
            let endpoint = quic::bind(addr, tls)?;
            tracing::info!(%addr, names = ?ha.names, "listening (HTTP/3, QUIC)");
            let ctx = QuicCtx {
                state: state.clone(),
                default_host: Arc::from(ha.names[0].as_str()),
                shutdown: shutdown_rx.clone(),
                alive: alive_tx.clone(),
                stats: quic_stats.clone(),
            };
            loops.push(tokio::spawn(quic::accept_loop(endpoint, ctx)));
        }
    }
    anyhow::ensure!(
        !bound.is_empty() || !loops.is_empty(),
        "nothing to listen on (--http-port, --https-port and --h3-port are all 0)"
    );
    for (l, ctx) in bound {
        loops.push(tokio::spawn(accept_loop(l, ctx)));
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "READY").context("writing READY to stdout")?;
        out.flush().context("flushing stdout")?;
    }

    wait_for_signal().await?;
    tracing::info!(
        "stopping: no new connections, waiting up to {} ms for in-flight responses",
        cli.grace_ms
    );
    let _ = shutdown_tx.send(true);
    for l in loops {
        let _ = l.await;
    }
    drop(alive_tx);
    if tokio::time::timeout(Duration::from_millis(cli.grace_ms), alive_rx.recv())
        .await
        .is_err()
    {
        tracing::warn!("grace period over; closing remaining connections");
    }
    drop(state);
    if let Some(w) = log_writer {
        w.finish();
    }
    if let Some(p) = &cli.quic_stats_json {
        quic_stats.write(p)?;
    }
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
    Ok(())
}
