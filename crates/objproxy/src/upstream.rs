//! Upstream connections: per channel, per origin pools with browser-like reuse —
//! one multiplexed HTTP/2 connection where the origin offers h2 by ALPN, otherwise up to
//! `h1_per_origin` HTTP/1.1 keep-alive connections. Each connection is bound to its
//! channel (SO_BINDTODEVICE and/or source address).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio_rustls::TlsConnector;

use crate::config::Binding;
use crate::metered::MeteredStream;
use crate::policy::Channel;
use crate::proxy::Shared;

/// A scheme + host + port the proxy talks to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub https: bool,
    pub host: String,
    pub port: u16,
}

impl Origin {
    pub fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
    }

    /// `host[:port]`, the port omitted when it is the scheme's default.
    pub fn authority(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// A request that can be sent (and re-sent after a stale keep-alive connection) on
/// either protocol.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

type Body = Full<Bytes>;

impl Outgoing {
    fn build(&self, origin: &Origin, h2: bool) -> Result<Request<Body>> {
        let uri: Uri = if h2 {
            format!(
                "{}://{}{}",
                origin.scheme(),
                origin.authority(),
                self.path_and_query
            )
            .parse()?
        } else {
            self.path_and_query.parse()?
        };
        let mut req = Request::builder().method(self.method.clone()).uri(uri);
        let h = req.headers_mut().expect("fresh builder");
        *h = self.headers.clone();
        if h2 {
            h.remove(http::header::HOST);
        } else {
            h.insert(
                http::header::HOST,
                HeaderValue::from_str(&origin.authority())?,
            );
        }
        Ok(req.body(Full::new(self.body.clone()))?)
    }
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

enum Conn {
    H1(http1::SendRequest<Body>),
    H2(http2::SendRequest<Body>),
}

#[derive(Default)]
struct PoolState {
    h2: Option<http2::SendRequest<Body>>,
    idle: Vec<http1::SendRequest<Body>>,
    /// Learned from the first connection's ALPN.
    speaks_h2: Option<bool>,
}

struct OriginPool {
    state: Mutex<PoolState>,
    /// HTTP/1.1 requests in flight (= connections busy); bounds the connection count.
    slots: Arc<Semaphore>,
    /// Serializes the first connection, so concurrent requests learn h2 and share it.
    first: tokio::sync::Mutex<()>,
}

impl OriginPool {
    fn live_h2(&self) -> Option<http2::SendRequest<Body>> {
        let mut st = self.state.lock().expect("pool lock");
        match &st.h2 {
            Some(s) if !s.is_closed() => Some(s.clone()),
            Some(_) => {
                st.h2 = None;
                None
            }
            None => None,
        }
    }

    fn pop_idle(&self) -> Option<http1::SendRequest<Body>> {
        let mut st = self.state.lock().expect("pool lock");
        while let Some(s) = st.idle.pop() {
            if s.is_ready() && !s.is_closed() {
                return Some(s);
            }
        }
        None
    }

    fn can_reuse(&self) -> bool {
        let st = self.state.lock().expect("pool lock");
        st.h2.as_ref().is_some_and(|s| !s.is_closed())
            || st.idle.iter().any(|s| s.is_ready() && !s.is_closed())
    }
}

/// All pools of the proxy.
#[derive(Default)]
pub struct Pools {
    map: Mutex<HashMap<(Channel, Origin), Arc<OriginPool>>>,
    /// Resolved origins, shared by both channels.
    dns: Mutex<HashMap<(String, u16), (SocketAddr, std::time::Instant)>>,
}

impl Pools {
    fn pool(&self, ch: Channel, origin: &Origin, h1_slots: usize) -> Arc<OriginPool> {
        let mut m = self.map.lock().expect("pools lock");
        m.entry((ch, origin.clone()))
            .or_insert_with(|| {
                Arc::new(OriginPool {
                    state: Mutex::new(PoolState::default()),
                    slots: Arc::new(Semaphore::new(h1_slots.max(1))),
                    first: tokio::sync::Mutex::new(()),
                })
            })
            .clone()
    }

    /// Whether `ch` has a connection to `origin` that can take a request right now.
    pub fn can_reuse(&self, ch: Channel, origin: &Origin) -> bool {
        let m = self.map.lock().expect("pools lock");
        m.get(&(ch, origin.clone())).is_some_and(|p| p.can_reuse())
    }
}

/// Send `req` to `origin` over channel `ch`, reusing or opening a connection.
pub async fn send(
    shared: &Arc<Shared>,
    ch: Channel,
    origin: &Origin,
    req: &Outgoing,
) -> Result<Response<Incoming>> {
    shared.stats.ch(ch).requests.fetch_add(1, Relaxed);
    // One retry: a keep-alive connection may have been closed by the origin while idle.
    match send_once(shared, ch, origin, req).await {
        Ok(r) => Ok(r),
        Err(e)
            if e.downcast_ref::<hyper::Error>()
                .is_some_and(|h| h.is_canceled() || h.is_closed()) =>
        {
            tracing::debug!(%ch, ?origin, "stale connection, retrying: {e:#}");
            send_once(shared, ch, origin, req).await
        }
        Err(e) => Err(e),
    }
}

async fn send_once(
    shared: &Arc<Shared>,
    ch: Channel,
    origin: &Origin,
    req: &Outgoing,
) -> Result<Response<Incoming>> {
    let pool = shared.pools.pool(ch, origin, shared.config.h1_per_origin);
    if let Some(mut h2) = pool.live_h2() {
        return Ok(h2.send_request(req.build(origin, true)?).await?);
    }
    let known = pool.state.lock().expect("pool lock").speaks_h2;
    if known.is_none() {
        // Only the connection setup is serialized; the guard goes before any request is
        // sent, so the others do not wait for the first response.
        let first = pool.first.lock().await;
        if let Some(mut h2) = pool.live_h2() {
            drop(first);
            return Ok(h2.send_request(req.build(origin, true)?).await?);
        }
        if pool.state.lock().expect("pool lock").speaks_h2.is_none() {
            let permit = pool.slots.clone().acquire_owned().await?;
            match connect(shared, ch, origin).await? {
                Conn::H2(mut h2) => {
                    {
                        let mut st = pool.state.lock().expect("pool lock");
                        st.speaks_h2 = Some(true);
                        st.h2 = Some(h2.clone());
                    }
                    drop((permit, first));
                    return Ok(h2.send_request(req.build(origin, true)?).await?);
                }
                Conn::H1(s) => {
                    pool.state.lock().expect("pool lock").speaks_h2 = Some(false);
                    drop(first);
                    return send_h1(pool.clone(), s, permit, origin, req).await;
                }
            }
        }
        drop(first);
    }
    if pool.state.lock().expect("pool lock").speaks_h2 == Some(true) {
        // The h2 connection died: open a new one (concurrent callers may open one each;
        // the last one stays in the pool).
        return match connect(shared, ch, origin).await? {
            Conn::H2(mut h2) => {
                pool.state.lock().expect("pool lock").h2 = Some(h2.clone());
                Ok(h2.send_request(req.build(origin, true)?).await?)
            }
            Conn::H1(s) => {
                pool.state.lock().expect("pool lock").speaks_h2 = Some(false);
                let permit = pool.slots.clone().acquire_owned().await?;
                send_h1(pool.clone(), s, permit, origin, req).await
            }
        };
    }
    let permit = pool.slots.clone().acquire_owned().await?;
    let sender = match pool.pop_idle() {
        Some(s) => s,
        None => match connect(shared, ch, origin).await? {
            Conn::H1(s) => s,
            Conn::H2(mut h2) => {
                // The origin changed its mind (e.g. restarted with h2): follow it.
                {
                    let mut st = pool.state.lock().expect("pool lock");
                    st.speaks_h2 = Some(true);
                    st.h2 = Some(h2.clone());
                }
                return Ok(h2.send_request(req.build(origin, true)?).await?);
            }
        },
    };
    send_h1(pool.clone(), sender, permit, origin, req).await
}

async fn send_h1(
    pool: Arc<OriginPool>,
    mut sender: http1::SendRequest<Body>,
    permit: tokio::sync::OwnedSemaphorePermit,
    origin: &Origin,
    req: &Outgoing,
) -> Result<Response<Incoming>> {
    let resp = sender.send_request(req.build(origin, false)?).await?;
    // The connection is busy until the response body has been read; then it goes back
    // to the idle list and frees its slot.
    tokio::spawn(async move {
        if sender.ready().await.is_ok() {
            pool.state.lock().expect("pool lock").idle.push(sender);
        }
        drop(permit);
    });
    Ok(resp)
}

/// How long a resolved address is reused (a browser's host cache; testbed TTL is 60 s).
const DNS_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

async fn resolve(shared: &Shared, origin: &Origin) -> Result<SocketAddr> {
    let key = (origin.host.clone(), origin.port);
    if let Some(&(addr, at)) = shared.pools.dns.lock().expect("dns lock").get(&key) {
        if at.elapsed() < DNS_CACHE_TTL {
            return Ok(addr);
        }
    }
    let addr = lookup(origin).await?;
    shared
        .pools
        .dns
        .lock()
        .expect("dns lock")
        .insert(key, (addr, std::time::Instant::now()));
    Ok(addr)
}

async fn lookup(origin: &Origin) -> Result<SocketAddr> {
    let addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .with_context(|| format!("resolving {}", origin.host))?;
    let addrs: Vec<SocketAddr> = addrs.collect();
    // The testbed is IPv4-only; prefer IPv4 when a name has both.
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| anyhow!("{} has no address", origin.host))
}

fn bound_socket(addr: SocketAddr, b: &Binding) -> Result<tokio::net::TcpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(dev) = &b.dev {
        s.bind_device(Some(dev.as_bytes()))
            .with_context(|| format!("SO_BINDTODEVICE {dev}"))?;
    }
    if let Some(src) = b.src {
        s.bind(&SocketAddr::new(src, 0).into())
            .with_context(|| format!("binding source address {src}"))?;
    }
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let std: std::net::TcpStream = s.into();
    Ok(tokio::net::TcpSocket::from_std_stream(std))
}

async fn connect(shared: &Arc<Shared>, ch: Channel, origin: &Origin) -> Result<Conn> {
    let r = connect_inner(shared, ch, origin).await;
    if r.is_err() {
        shared.stats.ch(ch).connect_errors.fetch_add(1, Relaxed);
    }
    r
}

async fn connect_inner(shared: &Arc<Shared>, ch: Channel, origin: &Origin) -> Result<Conn> {
    let addr = resolve(shared, origin).await?;
    let binding = &shared.config.bindings[ch.index()];
    let tcp = bound_socket(addr, binding)?
        .connect(addr)
        .await
        .with_context(|| format!("connecting to {addr} over the {ch}"))?;
    let tcp = MeteredStream::new(tcp, ch, shared.clone());
    let (io, h2): (Box<dyn Io>, bool) = if origin.https {
        let name = ServerName::try_from(origin.host.clone())
            .map_err(|e| anyhow!("{}: not a TLS server name: {e}", origin.host))?;
        let tls = TlsConnector::from(shared.client_tls.clone())
            .connect(name, tcp)
            .await
            .with_context(|| format!("TLS with {} over the {ch}", origin.host))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        (Box::new(tls), h2)
    } else {
        (Box::new(tcp), false)
    };
    let io = TokioIo::new(io);
    tracing::debug!(%ch, host = %origin.host, %addr, h2, "new upstream connection");
    if h2 {
        shared.stats.ch(ch).h2_connections.fetch_add(1, Relaxed);
        let (sender, conn) = http2::handshake(TokioExecutor::new(), io).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("upstream h2 connection ended: {e}");
            }
        });
        Ok(Conn::H2(sender))
    } else {
        let (sender, conn) = http1::handshake(io).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("upstream h1 connection ended: {e}");
            }
        });
        Ok(Conn::H1(sender))
    }
}

/// Read a whole upstream body (bounded: used for the ≤1000 B probe bodies).
pub async fn collect_limited(body: Incoming, limit: usize) -> Result<Bytes> {
    let b = body.collect().await?.to_bytes();
    if b.len() > limit {
        bail!("body of {} bytes, expected at most {limit}", b.len());
    }
    Ok(b)
}
