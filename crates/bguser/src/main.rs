//! `bguser`: a background user of the lab's N-device testbed (issue 41), the Rust
//! client of `dchlab.workloads.bgusers`. It follows a schedule the lab drew (think, then
//! load a page; `plan`), loading each page cold like Chromium does on the wire
//! (`chromium`, `dns`, `load`), and logs one JSON line per finished page: page, start
//! (s since the user started), plt_ms (first request to last response), requests,
//! failed, mismatched, bytes (response bodies) — the Python replayer's fields. It prints
//! READY once set up and `pages N` at the end; SIGTERM ends it at once (a page under way
//! is not logged).

mod chromium;
mod dns;
mod load;
mod plan;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};

/// Replay page loads like Chromium: HTTP/2 + TLS 1.3 (X25519MLKEM768), one connection per
/// origin, requests in dependency order, think times between pages.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Cli {
    /// The pages' request plans (the lab's plans JSON, with headers).
    #[arg(long, value_name = "JSON")]
    plans: PathBuf,

    /// The think times and pages to load, in order ({"schedule": [[THINK_S, PAGE], ...]}).
    #[arg(long, value_name = "JSON")]
    schedule: PathBuf,

    /// Where to append one JSON line per finished page.
    #[arg(long, value_name = "JSONL")]
    log: PathBuf,

    /// CA certificates (PEM) to trust; default $SSL_CERT_FILE (the testbed sets it on ue).
    #[arg(long, value_name = "PEM")]
    ca: Option<PathBuf>,

    /// The DNS resolver (IP); default the first nameserver of /etc/resolv.conf.
    #[arg(long, value_name = "IP")]
    resolver: Option<std::net::IpAddr>,

    /// HTTP/2 connection attempts per origin and credentials group while it has no
    /// connection yet (Chromium's race with a fresh profile; docs/bgusers.md).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=6))]
    race: u16,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let plans = plan::Plans::read(&cli.plans)?;
    let text = std::fs::read_to_string(&cli.schedule)
        .with_context(|| format!("cannot read schedule {}", cli.schedule.display()))?;
    let schedule = plan::parse_schedule(&text, &cli.schedule.display().to_string(), &plans)?;
    let ca = match cli.ca {
        Some(p) => p,
        None => std::env::var_os("SSL_CERT_FILE")
            .map(PathBuf::from)
            .context("no --ca and no $SSL_CERT_FILE: which CA do the servers chain to?")?,
    };
    let roots = dchannel_base::tls::roots_from_pem_file(&ca)?;
    let resolver = match cli.resolver {
        Some(ip) => std::net::SocketAddr::new(ip, 53),
        None => dns::system_resolver()?,
    };
    let ipv6 = dns::ipv6_reachable();
    let race = usize::from(cli.race);
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&cli.log)
        .with_context(|| format!("cannot open log {}", cli.log.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let pages = rt.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        println!("READY"); // set up: what follows is the user's traffic
        std::io::stdout().flush()?;
        let h1 = Arc::new(plans.h1_hosts.clone());
        let pages: std::collections::BTreeMap<_, _> = plans
            .pages
            .into_iter()
            .map(|(k, v)| (k, Arc::new(v)))
            .collect();
        let t0 = Instant::now();
        let mut done = 0u64;
        for visit in schedule {
            let reqs = pages[&visit.page].clone();
            let page = async {
                tokio::time::sleep(Duration::from_secs_f64(visit.think_s)).await;
                let start = Instant::now();
                let session = load::Session::new(
                    chromium::tls(roots.clone())?,
                    resolver,
                    ipv6,
                    race,
                    h1.clone(),
                );
                let stats = load::load_page(session, reqs.clone()).await;
                Ok::<_, anyhow::Error>((start, stats))
            };
            let (start, stats) = tokio::select! {
                _ = term.recv() => break,
                got = page => got?,
            };
            let line = serde_json::json!({
                "page": visit.page,
                "start": round(start.duration_since(t0).as_secs_f64(), 1e3),
                "plt_ms": round(start.elapsed().as_secs_f64() * 1e3, 10.0),
                "requests": reqs.len(),
                "failed": stats.failed,
                "mismatched": stats.mismatched,
                "bytes": stats.bytes,
            });
            writeln!(log, "{line}")?;
            log.flush()?;
            done += 1;
        }
        Ok::<_, anyhow::Error>(done)
    })?;
    println!("pages {pages}");
    Ok(())
}

fn round(x: f64, scale: f64) -> f64 {
    (x * scale).round() / scale
}
