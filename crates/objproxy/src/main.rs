//! `objproxy`: object-level steering proxy for the dchannel lab (see docs/objproxy.md).

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

use objproxy::config::{Binding, Config};
use objproxy::corpus::SizeOracle;
use objproxy::estimate::Prior;
use objproxy::policy::PolicyKind;

/// Explicit HTTP/HTTPS proxy that fetches every web object over the HBC or the LLC, chosen
/// per object by a policy (IANS, object size, size oracle, request priority, or passthrough).
///
/// Browsers use it with `--proxy-server=http://LISTEN`. HTTPS is intercepted: the proxy
/// answers CONNECT, terminates TLS with a certificate issued by --ca-cert/--ca-key and
/// fetches upstream over TLS verified against --upstream-ca. Prints `READY <addr>` on
/// stdout once listening; writes --stats-json on SIGTERM/SIGINT and exits.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3128")]
    listen: SocketAddr,
    /// Steering policy: ians | obj-size:N (N bytes, e.g. 6000 or 6KB) | obj-oracle |
    /// obj-oracle:committed (also counting the bytes already committed to each channel) |
    /// obj-priority (only `priority: u=0` requests on the LLC) | passthrough.
    #[arg(long, default_value = "ians")]
    policy: PolicyKind,
    /// Page corpus directory (manifest.json); required by obj-oracle for object sizes.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// CA certificate (PEM) that signs the per-host certificates shown to the browser.
    #[arg(long)]
    ca_cert: PathBuf,
    /// CA private key (PEM, PKCS#8; ECDSA P-256 in the testbed).
    #[arg(long)]
    ca_key: PathBuf,
    /// Roots for origin certificates (PEM). Default: --ca-cert.
    #[arg(long)]
    upstream_ca: Option<PathBuf>,
    /// Device for HBC connections (SO_BINDTODEVICE); its rx_bytes counter gives the rate.
    #[arg(long)]
    hbc_dev: Option<String>,
    /// Source address for HBC connections.
    #[arg(long)]
    hbc_src: Option<IpAddr>,
    /// Device for LLC connections.
    #[arg(long)]
    llc_dev: Option<String>,
    /// Source address for LLC connections.
    #[arg(long)]
    llc_src: Option<IpAddr>,
    /// Nominal LLC rate in Mbit/s: the max rate until the counters measure more.
    #[arg(long, default_value_t = 2.0)]
    llc_mbit: f64,
    /// Nominal HBC rate in Mbit/s.
    #[arg(long, default_value_t = 200.0)]
    hbc_mbit: f64,
    /// LLC RTT (ms) assumed until TCP_INFO has a sample.
    #[arg(long, default_value_t = 5.0)]
    llc_rtt_ms: f64,
    /// HBC RTT (ms) assumed until TCP_INFO has a sample.
    #[arg(long, default_value_t = 40.0)]
    hbc_rtt_ms: f64,
    /// Use only the nominal RTTs and rates (no TCP_INFO / counters): reproducible decisions.
    #[arg(long)]
    static_estimates: bool,
    /// HTTP/1.1 connections per origin and channel.
    #[arg(long, default_value_t = 6)]
    h1_per_origin: usize,
    /// Write per-channel statistics here as JSON on exit.
    #[arg(long)]
    stats_json: Option<PathBuf>,
}

fn read(p: &PathBuf, what: &str) -> Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("reading {what} {}", p.display()))
}

fn config(a: &Args) -> Result<Config> {
    let oracle = match (&a.policy, &a.corpus) {
        (_, Some(dir)) => Some(SizeOracle::load(dir)?),
        (PolicyKind::ObjOracle { .. }, None) => {
            anyhow::bail!("--policy {} needs --corpus DIR", a.policy)
        }
        _ => None,
    };
    let ca_cert_pem = read(&a.ca_cert, "--ca-cert")?;
    let upstream_ca_pem = match &a.upstream_ca {
        Some(p) => read(p, "--upstream-ca")?,
        None => ca_cert_pem.clone(),
    };
    // Mbit/s → B/ms: × 1e6 / 8 / 1000.
    let rate = |mbit: f64| mbit * 125.0;
    Ok(Config {
        listen: a.listen,
        policy: a.policy.clone(),
        ca_key_pem: read(&a.ca_key, "--ca-key")?,
        ca_cert_pem,
        upstream_ca_pem,
        bindings: [
            Binding {
                dev: a.hbc_dev.clone(),
                src: a.hbc_src,
            },
            Binding {
                dev: a.llc_dev.clone(),
                src: a.llc_src,
            },
        ],
        priors: [
            Prior {
                rtt_ms: a.hbc_rtt_ms,
                rate: rate(a.hbc_mbit),
            },
            Prior {
                rtt_ms: a.llc_rtt_ms,
                rate: rate(a.llc_mbit),
            },
        ],
        static_estimates: a.static_estimates,
        oracle,
        h1_per_origin: a.h1_per_origin,
        rate_sample: Duration::from_millis(250),
    })
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let cfg = config(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let proxy = objproxy::proxy::start(cfg).await?;
        tracing::info!(addr = %proxy.local_addr, policy = %proxy.shared.config.policy, "objproxy listening");
        println!("READY {}", proxy.local_addr);
        std::io::stdout().flush()?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        if let Some(p) = &args.stats_json {
            let snap = proxy.shared.snapshot();
            std::fs::write(p, serde_json::to_string_pretty(&snap)? + "\n")
                .with_context(|| format!("writing --stats-json {}", p.display()))?;
        }
        tracing::info!("objproxy stopped");
        Ok(())
    })
}
