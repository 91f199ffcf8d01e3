//! HTTP/3 listener: one QUIC endpoint (UDP) per origin address, a thin adapter between
//! `h3` streams and `service::handle`. Every HTTP decision — corpus match, think time, CDN
//! tier delay, ranges, HEAD, the access-log record — is the service's, exactly as over
//! TCP; this file only turns an h3 request into a `Request`, and the service's
//! `Response` back into HEADERS + DATA frames.
//!
//! Certificates are the origins' TCP ones, chosen by SNI (`certs::SniCerts`); TLS 1.3
//! without tickets or 0-RTT (`certs::quic_server_config`), so each connection costs the
//! full QUIC handshake like a first visit.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use tokio::sync::{mpsc, watch};

use crate::quic_stats::QuicStats;
use crate::service::{handle, AppState, ConnInfo};

/// Time allowed for a QUIC handshake before the connection attempt is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one QUIC endpoint serves.
#[derive(Clone)]
pub struct QuicCtx {
    pub state: Arc<AppState>,
    /// First hosts-file name on this address (requests naming no host are for it).
    pub default_host: Arc<str>,
    /// Closed (changed) when the server should stop.
    pub shutdown: watch::Receiver<bool>,
    /// Every connection task holds a clone; the server waits for all to be dropped.
    pub alive: mpsc::Sender<()>,
    /// Loss recovery and congestion counters of every connection (`--quic-stats-json`).
    pub stats: Arc<QuicStats>,
}

/// Transport parameters: as many concurrent requests as the HTTP/2 listener allows
/// (256 streams) and the same 8 MiB of response data in flight per connection, so that
/// neither protocol is held back by flow control the other does not have.
fn transport() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(256u32.into())
        .send_window(8 << 20)
        .stream_receive_window((4u32 << 20).into());
    t
}

/// A QUIC endpoint on `addr` with TLS configuration `tls` (from
/// `certs::quic_server_config`); must be called inside the tokio runtime.
pub fn bind(addr: SocketAddr, tls: rustls::ServerConfig) -> Result<quinn::Endpoint> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| anyhow::anyhow!("QUIC TLS configuration for {addr}: {e}"))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport()));
    let socket = crate::listener::bind_udp(addr)?;
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(cfg),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .with_context(|| format!("QUIC endpoint on {addr}"))
}

/// Accepts QUIC connections until shutdown; each runs in its own task.
pub async fn accept_loop(endpoint: quinn::Endpoint, ctx: QuicCtx) {
    let local = endpoint.local_addr().ok();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    let ctx = ctx.clone();
                    let local = local.unwrap_or_else(|| incoming.remote_address());
                    tokio::spawn(async move {
                        let client = incoming.remote_address();
                        if let Err(e) = serve(incoming, local, ctx).await {
                            tracing::debug!(%client, "QUIC connection ended with error: {e:#}");
                        }
                    });
                }
                None => break,
            },
            _ = shutdown.changed() => break,
        }
    }
    // No new connections; those open finish their requests (their tasks hold `alive`).
    endpoint.set_server_config(None);
    tracing::debug!(?local, "QUIC endpoint closed");
}

async fn serve(incoming: quinn::Incoming, local: SocketAddr, ctx: QuicCtx) -> Result<()> {
    let _alive = ctx.alive.clone();
    let conn = tokio::time::timeout(HANDSHAKE_TIMEOUT, incoming)
        .await
        .context("QUIC handshake timed out")??;
    let sni = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.server_name)
        .map(|s| s.to_ascii_lowercase());
    // summarised (final counters) when this task ends, however it ends
    let _registered = ctx.stats.opened(&conn, sni.as_deref().unwrap_or(""));
    let info = Arc::new(ConnInfo {
        client: conn.remote_address(),
        local: SocketAddr::new(conn.local_ip().unwrap_or(local.ip()), local.port()),
        scheme: "https",
        alpn: "h3".to_string(),
        sni,
        default_host: ctx.default_host.clone(),
    });
    let mut h3c: h3::server::Connection<h3_quinn::Connection, Bytes> = h3::server::builder()
        .build(h3_quinn::Connection::new(conn))
        .await?;
    let mut shutdown = ctx.shutdown.clone();
    let mut closing = false;
    loop {
        tokio::select! {
            accepted = h3c.accept() => match accepted {
                Ok(Some(resolver)) => {
                    let (state, info, alive) = (ctx.state.clone(), info.clone(), ctx.alive.clone());
                    tokio::spawn(async move {
                        let _alive = alive;
                        if let Err(e) = respond(resolver, state, info).await {
                            tracing::debug!("HTTP/3 request ended with error: {e:#}");
                        }
                    });
                }
                Ok(None) => return Ok(()),
                Err(e) if e.is_h3_no_error() => return Ok(()),
                Err(e) => return Err(e.into()),
            },
            _ = shutdown.changed(), if !closing => {
                // GOAWAY: no new requests; those in flight finish (the caller bounds the wait).
                closing = true;
                h3c.shutdown(0).await?;
            }
        }
    }
}

/// Reads one request, lets the service answer it, and writes the answer as HTTP/3 frames.
async fn respond(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    state: Arc<AppState>,
    info: Arc<ConnInfo>,
) -> Result<()> {
    let (req, mut stream): (Request<()>, _) = resolver.resolve_request().await?;
    let Ok(resp) = handle(req, state, info).await;
    let (head, mut body) = resp.into_parts();
    stream.send_response(Response::from_parts(head, ())).await?;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame;
        if let Ok(data) = frame.into_data() {
            if !data.is_empty() {
                stream.send_data(data).await?;
            }
        }
    }
    stream.finish().await?;
    Ok(())
}
