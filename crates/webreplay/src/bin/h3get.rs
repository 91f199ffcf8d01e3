//! `h3get`: one HTTP/3 GET with curl-like phase timings as one JSON line (see
//! `webreplay::h3fetch`; the lab's Table 2 over QUIC).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;

/// GET an https:// URL over HTTP/3 (QUIC) and print curl's `-w %{json}` timing fields
/// (time_namelookup, time_connect = time_appconnect = QUIC handshake done,
/// time_starttransfer, time_total), http_code, size_download and the body's sha256 as one
/// JSON line on stdout. Exit 0 when the fetch completed (any HTTP status), 1 otherwise.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Cli {
    /// The URL (https://HOST[:PORT]/PATH; the port is UDP, default 443).
    url: String,

    /// CA certificates (PEM) to trust; default $SSL_CERT_FILE (the testbed sets it on ue).
    #[arg(long, value_name = "PEM")]
    cacert: Option<PathBuf>,

    /// Give up after this many seconds (the whole fetch).
    #[arg(long, default_value_t = 60.0)]
    max_time: f64,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let ca = match cli.cacert {
        Some(p) => p,
        None => std::env::var_os("SSL_CERT_FILE")
            .map(PathBuf::from)
            .context(
            "no --cacert and no $SSL_CERT_FILE: which CA should the server's certificate chain to?",
        )?,
    };
    if !(cli.max_time > 0.0 && cli.max_time.is_finite()) {
        anyhow::bail!(
            "--max-time {}: expected a positive number of seconds",
            cli.max_time
        );
    }
    let tls = webreplay::h3fetch::client_tls(&ca)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(webreplay::h3fetch::fetch(
        &cli.url,
        tls,
        Duration::from_secs_f64(cli.max_time),
    ))?;
    println!("{}", serde_json::to_string(&out)?);
    std::process::exit(out.exitcode);
}
