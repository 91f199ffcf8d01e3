//! The browser-facing side: an explicit proxy. `CONNECT host:port` → TLS terminated with a
//! per-host leaf certificate, then HTTP/1.1 or HTTP/2 (ALPN) inside; absolute-URI requests
//! for plain `http://` URLs. Each request goes to [`crate::fetch::handle`].

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use anyhow::{Context as _, Result};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::certs::{self, LeafIssuer};
use crate::config::Config;
use crate::estimate::ChannelEstimate;
use crate::fetch::{self, error_response, ProxyResponse};
use crate::policy::{Channel, Views};
use crate::stats::{Snapshot, Stats};
use crate::upstream::{Origin, Pools};

/// State shared by every task of the proxy.
pub struct Shared {
    pub config: Config,
    pub stats: Stats,
    pub estimates: [Mutex<ChannelEstimate>; 2],
    pub pools: Pools,
    pub issuer: LeafIssuer,
    pub client_tls: Arc<rustls::ClientConfig>,
    pub started: Instant,
    /// Bytes of objects decided for each channel that have not streamed through yet
    /// (index = [`Channel::index`]; [`Commitment`] keeps it).
    pub committed: [AtomicU64; 2],
    /// Held from reading `committed` to adding a decision's bytes to it, so that two
    /// requests decided at the same moment cannot both see the other's bytes missing
    /// (CI once saw six of eight concurrent objects on the LLC where five is right).
    pub commit_lock: Mutex<()>,
}

/// `size` bytes committed to `ch` until they stream through (each data chunk of the
/// response is taken off) or the response is dropped (what is left is taken off).
pub struct Commitment {
    shared: Arc<Shared>,
    ch: Channel,
    left: u64,
}

impl Commitment {
    pub fn new(shared: &Arc<Shared>, ch: Channel, size: u64) -> Commitment {
        shared.committed[ch.index()].fetch_add(size, Relaxed);
        Commitment {
            shared: shared.clone(),
            ch,
            left: size,
        }
    }

    /// `n` more bytes of the object arrived.
    pub fn arrived(&mut self, n: u64) {
        let n = n.min(self.left);
        self.left -= n;
        self.shared.committed[self.ch.index()].fetch_sub(n, Relaxed);
    }
}

impl Drop for Commitment {
    fn drop(&mut self) {
        self.shared.committed[self.ch.index()].fetch_sub(self.left, Relaxed);
    }
}

impl Shared {
    pub fn now_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    /// The estimate of `ch`, locked.
    fn estimate(&self, ch: Channel) -> MutexGuard<'_, ChannelEstimate> {
        self.estimates[ch.index()].lock().expect("estimate lock")
    }

    pub fn on_srtt(&self, ch: Channel, srtt_ms: f64) {
        let now = self.now_ms();
        self.estimate(ch).srtt.push(now, srtt_ms);
    }

    pub fn on_rx_counter(&self, ch: Channel, bytes: u64) {
        let now = self.now_ms();
        self.estimate(ch).rate.on_counter(now, bytes);
    }

    /// The policies' view of both channels for a request to `origin`.
    pub fn views(&self, origin: &Origin) -> Views {
        let view = |ch: Channel| {
            let conns = self.stats.ch(ch).connections_open.load(Relaxed) as u32;
            let reuse = self.pools.can_reuse(ch, origin);
            self.estimate(ch).view(conns, reuse)
        };
        Views {
            hbc: view(Channel::Hbc),
            llc: view(Channel::Llc),
            committed: [0, 1].map(|i| self.committed[i].load(Relaxed) as f64),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        self.stats.snapshot(self.config.policy.to_string(), |ch| {
            let e = self.estimate(ch);
            let v = e.view(0, false);
            (e.srtt.min(), e.srtt.median(), v.max_rate)
        })
    }
}

/// A running proxy.
pub struct Proxy {
    pub local_addr: SocketAddr,
    pub shared: Arc<Shared>,
}

/// Bind and start serving; returns once the listener is up.
pub async fn start(config: Config) -> Result<Proxy> {
    let issuer = LeafIssuer::from_pem(&config.ca_cert_pem, &config.ca_key_pem)?;
    let client_tls = certs::client_config(&config.upstream_ca_pem)?;
    let estimates = [
        Mutex::new(ChannelEstimate::new(
            config.priors[0],
            config.static_estimates,
        )),
        Mutex::new(ChannelEstimate::new(
            config.priors[1],
            config.static_estimates,
        )),
    ];
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        config,
        stats: Stats::default(),
        estimates,
        pools: Pools::default(),
        issuer,
        client_tls,
        started: Instant::now(),
        committed: Default::default(),
        commit_lock: Mutex::new(()),
    });
    spawn_rate_sampler(&shared);
    let s = shared.clone();
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let s = s.clone();
                    tokio::spawn(async move { serve_client(s, stream).await });
                }
                Err(e) => {
                    // EMFILE and friends: keep serving the connections we have.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    });
    Ok(Proxy { local_addr, shared })
}

/// Read /sys/class/net/IF/statistics/rx_bytes of each bound device periodically.
fn spawn_rate_sampler(shared: &Arc<Shared>) {
    for ch in Channel::ALL {
        let Some(dev) = shared.config.bindings[ch.index()].dev.clone() else {
            continue;
        };
        let s = shared.clone();
        let path = format!("/sys/class/net/{dev}/statistics/rx_bytes");
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(s.config.rate_sample);
            let mut warned = false;
            loop {
                tick.tick().await;
                match std::fs::read_to_string(&path).map(|t| t.trim().parse::<u64>()) {
                    Ok(Ok(b)) => s.on_rx_counter(ch, b),
                    other => {
                        if !warned {
                            tracing::warn!("{path}: cannot read rx_bytes ({other:?}); {ch} rate stays at its prior");
                            warned = true;
                        }
                    }
                }
            }
        });
    }
}

async fn serve_client(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let svc = service_fn(move |req| {
        let s = shared.clone();
        async move { Ok::<_, std::convert::Infallible>(proxy_request(s, req).await) }
    });
    if let Err(e) = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades()
        .await
    {
        tracing::debug!("client connection: {e}");
    }
}

fn split_host_port(authority: &str, default: u16) -> Option<(String, u16)> {
    let a: http::uri::Authority = authority.parse().ok()?;
    let host = a
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Some((host, a.port_u16().unwrap_or(default)))
}

async fn proxy_request(shared: Arc<Shared>, req: Request<Incoming>) -> ProxyResponse {
    if req.method() == Method::CONNECT {
        let Some((host, port)) = req
            .uri()
            .authority()
            .and_then(|a| split_host_port(a.as_str(), 443))
        else {
            return error_response(StatusCode::BAD_REQUEST, "CONNECT needs host:port".into());
        };
        shared.stats.client_connects.fetch_add(1, Relaxed);
        let tls = match shared.issuer.server_config(&host) {
            Ok(c) => c,
            Err(e) => return error_response(StatusCode::BAD_GATEWAY, format!("objproxy: {e:#}")),
        };
        let origin = Origin {
            https: true,
            host,
            port,
        };
        tokio::spawn(async move {
            match hyper::upgrade::on(req).await {
                Ok(up) => serve_tunnel(shared, origin, TokioIo::new(up), tls).await,
                Err(e) => tracing::debug!("CONNECT upgrade: {e}"),
            }
        });
        return hyper::Response::new(fetch::ProxyBody::full(Bytes::new()));
    }
    // Plain http:// through the proxy: the request line carries an absolute URI.
    let uri = req.uri().clone();
    let (Some(scheme), Some(auth)) = (uri.scheme_str(), uri.authority()) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "objproxy is a forward proxy: send absolute-URI requests or CONNECT".into(),
        );
    };
    if scheme != "http" {
        return error_response(
            StatusCode::BAD_REQUEST,
            format!("unsupported scheme {scheme}"),
        );
    }
    let Some((host, port)) = split_host_port(auth.as_str(), 80) else {
        return error_response(StatusCode::BAD_REQUEST, format!("bad authority {auth}"));
    };
    let origin = Origin {
        https: false,
        host,
        port,
    };
    inner_request(shared, origin, req).await
}

async fn inner_request(
    shared: Arc<Shared>,
    origin: Origin,
    req: Request<Incoming>,
) -> ProxyResponse {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    // Request bodies are small in page loads; holding them lets a request be re-sent
    // when a keep-alive connection turns out stale.
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error_response(StatusCode::BAD_REQUEST, format!("request body: {e}")),
    };
    fetch::handle(shared, origin, parts.method, path, parts.headers, body).await
}

async fn serve_tunnel(
    shared: Arc<Shared>,
    origin: Origin,
    io: TokioIo<hyper::upgrade::Upgraded>,
    tls: Arc<rustls::ServerConfig>,
) {
    let stream = match TlsAcceptor::from(tls).accept(io).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(host = %origin.host, "browser TLS handshake: {e}");
            return;
        }
    };
    let svc = service_fn(move |req: Request<Incoming>| {
        let (s, o) = (shared.clone(), origin.clone());
        async move { Ok::<_, std::convert::Infallible>(inner_request(s, o, req).await) }
    });
    if let Err(e) = auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), svc)
        .await
    {
        tracing::debug!("tunnel connection: {e}");
    }
}
