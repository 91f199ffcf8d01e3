//! Accept loops: one per listening socket. HTTPS connections pick their origin's TLS
//! configuration from the ClientHello's SNI (so each origin gets its own certificate and
//! ALPN list) and are then served as HTTP/2 or HTTP/1.1 according to the negotiated ALPN.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::service::{handle, AppState, ConnInfo};

/// Time allowed for a TLS handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS identities of all origins.
pub struct TlsSites {
    /// Host name → that origin's config.
    pub by_name: HashMap<String, Arc<ServerConfig>>,
}

/// What a listener serves.
#[derive(Clone)]
pub struct ListenerCtx {
    pub state: Arc<AppState>,
    /// Present for HTTPS listeners.
    pub tls: Option<Arc<TlsSites>>,
    /// First hosts-file name on this address: its cert is used when SNI is absent or unknown.
    pub default_host: Arc<str>,
    pub builders: Arc<Builders>,
    /// Closed (changed) when the server should stop.
    pub shutdown: watch::Receiver<bool>,
    /// Every connection task holds a clone; the server waits for all to be dropped.
    pub alive: mpsc::Sender<()>,
}

/// One hyper builder per protocol choice, configured once.
pub struct Builders {
    pub any: auto::Builder<TokioExecutor>,
    pub h1: auto::Builder<TokioExecutor>,
    pub h2: auto::Builder<TokioExecutor>,
}

impl Builders {
    pub fn new() -> Self {
        fn base() -> auto::Builder<TokioExecutor> {
            let mut b = auto::Builder::new(TokioExecutor::new());
            b.http1()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30));
            b.http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(256)
                // Room for a whole bulk response in flight on high-BDP paths; the client's
                // own receive window still governs downloads.
                .initial_stream_window_size(4 << 20)
                .initial_connection_window_size(8 << 20)
                .max_send_buf_size(1 << 20);
            b
        }
        Self {
            any: base(),
            h1: base().http1_only(),
            h2: base().http2_only(),
        }
    }
}

impl Default for Builders {
    fn default() -> Self {
        Self::new()
    }
}

/// Accepts until shutdown; each connection runs in its own task.
pub async fn accept_loop(listener: TcpListener, ctx: ListenerCtx) {
    let local = listener.local_addr().ok();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        tokio::select! {
            res = listener.accept() => match res {
                Ok((stream, client)) => {
                    let _ = stream.set_nodelay(true);
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        let local = stream.local_addr().unwrap_or(client);
                        if let Err(e) = serve(stream, client, local, ctx).await {
                            tracing::debug!(%client, "connection ended with error: {e}");
                        }
                    });
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(?local, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
    tracing::debug!(?local, "listener closed");
}

async fn serve(
    stream: TcpStream,
    client: SocketAddr,
    local: SocketAddr,
    ctx: ListenerCtx,
) -> anyhow::Result<()> {
    let _alive = ctx.alive.clone();
    match &ctx.tls {
        None => {
            let info = Arc::new(ConnInfo {
                client,
                local,
                scheme: "http",
                alpn: String::new(),
                sni: None,
                default_host: ctx.default_host.clone(),
            });
            run_http(TokioIo::new(stream), &ctx.builders.any, info, &ctx).await
        }
        Some(sites) => {
            let acceptor =
                tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
            let start = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor).await??;
            let sni = start
                .client_hello()
                .server_name()
                .map(|s| s.to_ascii_lowercase());
            let config = sni
                .as_deref()
                .and_then(|n| sites.by_name.get(n))
                .or_else(|| sites.by_name.get(&*ctx.default_host))
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no TLS config for {}", ctx.default_host))?;
            let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, start.into_stream(config)).await??;
            let alpn = tls
                .get_ref()
                .1
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default();
            let builder = match alpn.as_str() {
                "h2" => &ctx.builders.h2,
                "http/1.1" => &ctx.builders.h1,
                _ => &ctx.builders.any,
            };
            let info = Arc::new(ConnInfo {
                client,
                local,
                scheme: "https",
                alpn,
                sni,
                default_host: ctx.default_host.clone(),
            });
            run_http(TokioIo::new(tls), builder, info, &ctx).await
        }
    }
}

async fn run_http<I>(
    io: I,
    builder: &auto::Builder<TokioExecutor>,
    info: Arc<ConnInfo>,
    ctx: &ListenerCtx,
) -> anyhow::Result<()>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let state = ctx.state.clone();
    let svc = hyper::service::service_fn(move |req| handle(req, state.clone(), info.clone()));
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut shutdown = ctx.shutdown.clone();
    tokio::select! {
        res = conn.as_mut() => return res.map_err(|e| anyhow::anyhow!(e)),
        _ = shutdown.changed() => {}
    }
    // Stop taking new requests; let in-flight ones finish (the caller bounds the wait).
    conn.as_mut().graceful_shutdown();
    conn.await.map_err(|e| anyhow::anyhow!(e))
}
