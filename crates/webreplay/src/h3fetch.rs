//! One HTTP/3 GET with curl-like phase timings (the `h3get` binary; Table 2 over QUIC).
//!
//! Debian's curl has no HTTP/3, so the lab measures the phases of an h3 fetch with this
//! client on quinn + h3 (the stacks the replay server uses). The phases are curl's
//! `-w` variables, each in seconds since the start, so `dchlab.workloads.api.curl_outcome`
//! reads them unchanged:
//!
//! - `time_namelookup`: the name resolved through the system resolver (`getaddrinfo`,
//!   i.e. the network namespace's resolv.conf and the testbed's DNS server).
//! - `time_connect` = `time_appconnect`: the QUIC handshake complete (RFC 9000 §7: the
//!   transport and TLS 1.3 handshakes are one exchange, 1 RTT, so there is no separate TLS
//!   phase; curl reports an HTTP/3 fetch the same way).
//! - `time_starttransfer`: the response's HEADERS frame received.
//! - `time_total`: the response's last DATA byte (stream FIN) received.
//!
//! Cold like a first visit: a fresh endpoint per fetch, no session ticket, no 0-RTT.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Buf;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What one fetch measured, in curl's `-w %{json}` names (seconds since the start).
#[derive(Debug, Clone, Serialize)]
pub struct H3Timings {
    pub url: String,
    pub remote_ip: String,
    pub http_code: u16,
    /// "3" for every response this client gets (curl's `http_version`).
    pub http_version: String,
    pub size_download: u64,
    /// SHA-256 of the body (hex), so a caller can check the bytes without keeping them.
    pub sha256: String,
    pub time_namelookup: f64,
    pub time_connect: f64,
    pub time_appconnect: f64,
    pub time_starttransfer: f64,
    pub time_total: f64,
    /// 0: fetched; otherwise `errormsg` says why (curl's convention).
    pub exitcode: i32,
    pub errormsg: String,
}

/// Host, port and path of an `https://` URL (no userinfo; IPv6 literals in brackets).
pub fn parse_url(url: &str) -> Result<(String, u16, String)> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| anyhow!("URL {url:?}: expected https://HOST[:PORT]/PATH"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| anyhow!("URL {url:?}: unclosed '[' in the host"))?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        bail!("URL {url:?}: empty host");
    }
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| anyhow!("URL {url:?}: port {p:?} is not a number 0-65535"))?,
        None => 443,
    };
    Ok((host, port, path))
}

/// A rustls client configuration for HTTP/3 trusting only the certificates in `ca_pem`.
pub fn client_tls(ca_pem: &Path) -> Result<rustls::ClientConfig> {
    let roots = dchannel_base::tls::roots_from_pem_file(ca_pem)?;
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h3".to_vec()];
    // Cold: no ticket or 0-RTT from an earlier fetch (each fetch is a fresh process anyway).
    cfg.resumption = rustls::client::Resumption::disabled();
    cfg.enable_early_data = false;
    Ok(cfg)
}

/// The same flow-control windows as the replay server's QUIC endpoint (`quic::transport`),
/// so neither side's window limits the transfer; `max_time` bounds an idle connection.
fn transport(max_time: Duration) -> Result<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.send_window(8 << 20)
        .stream_receive_window((4u32 << 20).into())
        .max_idle_timeout(Some(max_time.try_into()?));
    Ok(t)
}

/// GET `url` over HTTP/3 trusting `tls`'s roots, with curl-like phase timings. An error
/// after the start is returned inside the timings (`exitcode` 1, phases so far), never
/// as `Err`, so the caller always has a row; `Err` is bad arguments only.
pub async fn fetch(url: &str, tls: rustls::ClientConfig, max_time: Duration) -> Result<H3Timings> {
    let (host, port, path) = parse_url(url)?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| anyhow!("QUIC client TLS configuration: {e}"))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport(max_time)?));
    let mut out = H3Timings {
        url: url.to_string(),
        remote_ip: String::new(),
        http_code: 0,
        http_version: "3".into(),
        size_download: 0,
        sha256: String::new(),
        time_namelookup: 0.0,
        time_connect: 0.0,
        time_appconnect: 0.0,
        time_starttransfer: 0.0,
        time_total: 0.0,
        exitcode: 0,
        errormsg: String::new(),
    };
    let t0 = Instant::now();
    let run = phases(&host, port, &path, cfg, t0, &mut out);
    let result = tokio::time::timeout(max_time, run).await;
    let err = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:#}")),
        Err(_) => Some(format!(
            "timed out after {:.1} s {}",
            max_time.as_secs_f64(),
            stage(&out)
        )),
    };
    if let Some(e) = err {
        out.exitcode = 1;
        out.errormsg = e;
        out.time_total = t0.elapsed().as_secs_f64();
    }
    Ok(out)
}

/// The phase a fetch that stopped was in, from the phases it completed.
fn stage(out: &H3Timings) -> &'static str {
    if out.time_namelookup == 0.0 {
        "resolving the name"
    } else if out.time_connect == 0.0 {
        "in the QUIC handshake"
    } else if out.time_starttransfer == 0.0 {
        "waiting for the response"
    } else {
        "receiving the body"
    }
}

/// The fetch itself, filling `out`'s phases as they complete.
async fn phases(
    host: &str,
    port: u16,
    path: &str,
    cfg: quinn::ClientConfig,
    t0: Instant,
    out: &mut H3Timings,
) -> Result<()> {
    let target = (host.to_string(), port);
    let addr: SocketAddr = tokio::task::spawn_blocking(move || target.to_socket_addrs())
        .await?
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .ok_or_else(|| anyhow!("{host}: no address"))?;
    out.time_namelookup = t0.elapsed().as_secs_f64();
    out.remote_ip = addr.ip().to_string();
    let bind: SocketAddr = if addr.is_ipv6() {
        "[::]:0".parse()?
    } else {
        "0.0.0.0:0".parse()?
    };
    let mut ep = quinn::Endpoint::client(bind).context("QUIC client endpoint")?;
    ep.set_default_client_config(cfg);
    let conn = ep
        .connect(addr, host)?
        .await
        .with_context(|| format!("QUIC handshake with {addr}"))?;
    out.time_connect = t0.elapsed().as_secs_f64();
    out.time_appconnect = out.time_connect;
    let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(conn)).await?;
    let drive = tokio::spawn(async move { driver.wait_idle().await });
    let req = http::Request::get(format!("https://{host}{path}")).body(())?;
    let mut stream = sender.send_request(req).await?;
    // A server may answer before reading this FIN (RFC 9114 §4.1): finishing may then fail,
    // harmlessly.
    let _ = stream.finish().await;
    let resp = stream.recv_response().await?;
    out.time_starttransfer = t0.elapsed().as_secs_f64();
    out.http_code = resp.status().as_u16();
    let mut sha = Sha256::new();
    let mut n = 0u64;
    while let Some(mut chunk) = stream.recv_data().await? {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            sha.update(c);
            n += c.len() as u64;
            let len = c.len();
            chunk.advance(len);
        }
    }
    out.time_total = t0.elapsed().as_secs_f64();
    out.size_download = n;
    out.sha256 = sha.finalize().iter().map(|b| format!("{b:02x}")).collect();
    drop(sender);
    drive.abort();
    ep.close(0u32.into(), b"done");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls_split_into_host_port_path() {
        let p = |u: &str| parse_url(u).unwrap();
        assert_eq!(
            p("https://server.test/bytes/100"),
            ("server.test".into(), 443, "/bytes/100".into())
        );
        assert_eq!(
            p("https://a.test:8443"),
            ("a.test".into(), 8443, "/".into())
        );
        assert_eq!(
            p("https://[::1]:4433/x?y=1"),
            ("::1".into(), 4433, "/x?y=1".into())
        );
        for bad in ["http://a.test/", "https:///x", "https://a.test:99999/"] {
            assert!(parse_url(bad).is_err(), "{bad} accepted");
        }
    }
}
