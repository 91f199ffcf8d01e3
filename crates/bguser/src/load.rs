//! One cold page load: every request of a plan, each as soon as its parent's response
//! has arrived, read eagerly and hashed.
//!
//! Rule: one HTTP/2 connection per origin and credentials group, as Chromium keeps
//! them (Chromium's SETTINGS, `chromium`; anonymous requests, `Request::anonymous`, on
//! connections of their own). Chromium does not know a server speaks HTTP/2 before
//! the first TLS handshake with it says so (a fresh profile), so each request made
//! while a group has no connection yet starts a connection attempt of its own, up to
//! `race` attempts per group (Chromium: one per waiting request, up to its socket pool's
//! limit, as requests are discovered); the first to finish its handshake carries every
//! request, the others stay open and idle until the page ends (no HTTP/2 preface on
//! them). The plan's HTTP/1.1-only hosts get up to `H1_PER_HOST` keep-alive connections
//! each, one request at a time per connection. Every host is resolved once per page
//! (`dns`). Nothing is shared with another page (new
//! connections, new TLS config). A request whose transport fails or times out counts as
//! failed with all its descendants (never requested: nothing referenced them); an HTTP
//! status ≥ 400 counts as failed but its children are still requested; a body whose
//! sha256 differs from the plan's counts as mismatched. Body bytes are counted as read.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION, HOST};
use http::{Method, Request as HttpRequest, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;
use tokio::sync::{watch, OnceCell, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsConnector;

use crate::chromium::{self, H1_PER_HOST};
use crate::dns;
use crate::plan::Request;

/// A request's whole time budget (httpx's timeout in the Python replayer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a page load counted (the log line's fields).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PageStats {
    /// Requests failed (transport errors with their descendants, statuses ≥ 400).
    pub failed: u64,
    /// Responses whose body's sha256 is not the plan's.
    pub mismatched: u64,
    /// Response body bytes read.
    pub bytes: u64,
}

type Origin = (String, u16);
/// An origin and whether its requests go without credentials (`Request::anonymous`).
type Group = (String, u16, bool);
type H2Send = http2::SendRequest<Empty<Bytes>>;
type H1Send = http1::SendRequest<Empty<Bytes>>;
type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// A group's HTTP/2 connection: attempts started and failed so far, and the outcome
/// every waiting request watches (None: no attempt has finished yet).
struct H2Group {
    attempts: usize,
    failed: usize,
    ready: watch::Sender<Option<Result<H2Send, String>>>,
}

struct H1Pool {
    permits: Arc<Semaphore>,
    idle: Mutex<Vec<H1Send>>,
}

/// One page load's connections and name lookups (module rule).
pub struct Session {
    tls: TlsConnector,
    resolver: SocketAddr,
    ipv6: bool,
    race: usize,
    h1_hosts: Arc<std::collections::HashSet<String>>,
    names: Mutex<HashMap<String, Arc<OnceCell<Ipv4Addr>>>>,
    h2: Mutex<HashMap<Group, H2Group>>,
    h1: Mutex<HashMap<Origin, Arc<H1Pool>>>,
    drivers: Mutex<Vec<JoinHandle<()>>>,
    idle: Mutex<Vec<TlsStream>>,
}

static NEXT_DNS_ID: AtomicU16 = AtomicU16::new(0);

impl Session {
    /// A cold session: `tls` fresh for this page; `ipv6`: whether IPv6 is reachable
    /// (`dns`); `race`: HTTP/2 connection attempts per group (module rule, ≥ 1).
    pub fn new(
        tls: Arc<rustls::ClientConfig>,
        resolver: SocketAddr,
        ipv6: bool,
        race: usize,
        h1_hosts: Arc<std::collections::HashSet<String>>,
    ) -> Arc<Session> {
        if NEXT_DNS_ID.load(Ordering::Relaxed) == 0 {
            NEXT_DNS_ID.store(
                (std::process::id() as u16).wrapping_mul(7919) | 1,
                Ordering::Relaxed,
            );
        }
        Arc::new(Session {
            tls: TlsConnector::from(tls),
            resolver,
            ipv6,
            race: race.max(1),
            h1_hosts,
            names: Mutex::default(),
            h2: Mutex::default(),
            h1: Mutex::default(),
            drivers: Mutex::default(),
            idle: Mutex::default(),
        })
    }

    async fn resolve(&self, host: &str) -> Result<Ipv4Addr> {
        let cell = self
            .names
            .lock()
            .unwrap()
            .entry(host.to_string())
            .or_default()
            .clone();
        let ids = [0; 3].map(|_| NEXT_DNS_ID.fetch_add(1, Ordering::Relaxed));
        cell.get_or_try_init(|| dns::resolve(self.resolver, host, self.ipv6, ids))
            .await
            .copied()
    }

    /// A new TLS connection to `origin`, and the protocol its ALPN chose.
    async fn connect(&self, (host, port): &Origin) -> Result<(TlsStream, bool)> {
        let ip = self.resolve(host).await?;
        let tcp = TcpStream::connect((ip, *port))
            .await
            .with_context(|| format!("connect to {host} ({ip}:{port})"))?;
        tcp.set_nodelay(true)?; // as Chromium (and Python's asyncio) do
        let name = rustls::pki_types::ServerName::try_from(host.clone())?;
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .with_context(|| format!("TLS with {host}:{port}"))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok((tls, h2))
    }

    fn keep(&self, driver: JoinHandle<()>) {
        self.drivers.lock().unwrap().push(driver);
    }

    /// One connection attempt of `group` (module rule): the group's connection if it is
    /// the first to finish, else an idle one.
    async fn attempt_h2(self: Arc<Self>, group: Group) {
        let origin = (group.0.clone(), group.1);
        let got = self.connect(&origin).await;
        let done = |g: &mut H2Group| g.ready.borrow().as_ref().is_some_and(|r| r.is_ok());
        let outcome = match got {
            Ok(_) if done(self.h2.lock().unwrap().get_mut(&group).expect("group")) => {
                if let Ok((tls, _)) = got {
                    self.idle.lock().unwrap().push(tls); // lost the race: idle till the page ends
                }
                return;
            }
            Ok((_, false)) => Err(format!(
                "{}:{} negotiated HTTP/1.1 but the plan lists it as HTTP/2",
                origin.0, origin.1
            )),
            Ok((tls, true)) => match chromium::h2_builder().handshake(TokioIo::new(tls)).await {
                Ok((send, conn)) => {
                    self.keep(tokio::spawn(async move {
                        let _ = conn.await; // ends with the page (aborted) or the server's close
                    }));
                    Ok(send)
                }
                Err(e) => Err(format!(
                    "HTTP/2 handshake with {}:{}: {e}",
                    origin.0, origin.1
                )),
            },
            Err(e) => Err(format!("{e:#}")),
        };
        let mut groups = self.h2.lock().unwrap();
        let g = groups.get_mut(&group).expect("group");
        match outcome {
            Ok(send) if !done(g) => {
                g.ready.send_replace(Some(Ok(send)));
            }
            Ok(_) => {}
            Err(e) => {
                g.failed += 1;
                if g.failed == g.attempts && !done(g) {
                    g.ready.send_replace(Some(Err(e)));
                }
            }
        }
    }

    async fn h2_sender(self: &Arc<Self>, r: &Request) -> Result<H2Send> {
        let (host, port) = r.origin();
        let group = (host, port, r.anonymous());
        let mut ready = {
            let mut groups = self.h2.lock().unwrap();
            let g = groups.entry(group.clone()).or_insert_with(|| H2Group {
                attempts: 0,
                failed: 0,
                ready: watch::channel(None).0,
            });
            let settled = g.ready.borrow().is_some();
            if !settled && g.attempts < self.race {
                g.attempts += 1;
                tokio::spawn(self.clone().attempt_h2(group.clone()));
            }
            g.ready.subscribe()
        };
        let outcome = ready.wait_for(|v| v.is_some()).await?.clone();
        outcome.expect("settled").map_err(|e| anyhow!(e))
    }

    async fn get_h2(
        self: &Arc<Self>,
        r: &Request,
    ) -> Result<hyper::Response<hyper::body::Incoming>> {
        let mut send = self.h2_sender(r).await?;
        send.ready().await?;
        Ok(send.send_request(h2_request(r)?).await?)
    }

    async fn get_h1(&self, r: &Request) -> Result<(u16, u64, [u8; 32])> {
        let origin = r.origin();
        let pool = self
            .h1
            .lock()
            .unwrap()
            .entry(origin.clone())
            .or_insert_with(|| {
                Arc::new(H1Pool {
                    permits: Arc::new(Semaphore::new(H1_PER_HOST)),
                    idle: Mutex::default(),
                })
            })
            .clone();
        let _permit = pool.permits.clone().acquire_owned().await?;
        let idle = pool.idle.lock().unwrap().pop();
        let mut send = match idle {
            Some(s) => s,
            None => {
                let (tls, _) = self.connect(&origin).await?;
                let (send, conn) = http1::handshake(TokioIo::new(tls)).await?;
                self.keep(tokio::spawn(async move {
                    let _ = conn.await;
                }));
                send
            }
        };
        send.ready().await?;
        let resp = send.send_request(h1_request(r)?).await?;
        let out = read_body(resp).await?;
        if send.is_ready() {
            pool.idle.lock().unwrap().push(send);
        }
        Ok(out)
    }

    /// GET one request: (status, body bytes, body sha256).
    async fn get(self: &Arc<Self>, r: &Request) -> Result<(u16, u64, [u8; 32])> {
        if self.h1_hosts.contains(&r.origin().0) {
            return self.get_h1(r).await;
        }
        read_body(self.get_h2(r).await?).await
    }

    /// End the page: every connection closed.
    pub fn close(&self) {
        for d in self.drivers.lock().unwrap().drain(..) {
            d.abort();
        }
        self.idle.lock().unwrap().clear();
    }
}

/// Read a response's body as its frames arrive (each released to flow control at once),
/// hashing it: (status, bytes, sha256).
async fn read_body(resp: hyper::Response<hyper::body::Incoming>) -> Result<(u16, u64, [u8; 32])> {
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let (mut n, mut hash) = (0u64, Sha256::new());
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            n += data.len() as u64;
            hash.update(&data);
        }
    }
    Ok((status, n, hash.finalize().into()))
}

fn with_headers(
    mut b: http::request::Builder,
    headers: &[(HeaderName, HeaderValue)],
) -> http::request::Builder {
    for (n, v) in headers {
        b = b.header(n, v);
    }
    b
}

/// The HTTP/2 request: absolute URI (h2 derives :scheme, :authority, :path from it),
/// the plan's headers in order.
pub fn h2_request(r: &Request) -> Result<HttpRequest<Empty<Bytes>>> {
    let b = HttpRequest::builder()
        .method(Method::GET)
        .uri(r.url.clone());
    Ok(with_headers(b, &r.headers).body(Empty::new())?)
}

/// The HTTP/1.1 request: origin-form target, then Chromium's `Host` and
/// `Connection: keep-alive` before the plan's headers.
pub fn h1_request(r: &Request) -> Result<HttpRequest<Empty<Bytes>>> {
    let target: Uri = r
        .url
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/")
        .parse()?;
    let host = r
        .url
        .authority()
        .ok_or_else(|| anyhow!("{}: no host", r.url))?
        .as_str();
    let b = HttpRequest::builder()
        .method(Method::GET)
        .uri(target)
        .header(HOST, host)
        .header(CONNECTION, "keep-alive");
    Ok(with_headers(b, &r.headers).body(Empty::new())?)
}

fn descendants(children: &[Vec<usize>], i: usize) -> u64 {
    children[i]
        .iter()
        .map(|&c| 1 + descendants(children, c))
        .sum()
}

/// Load every request of `reqs` through `session` (module rule).
pub async fn load_page(session: Arc<Session>, reqs: Arc<Vec<Request>>) -> PageStats {
    let mut children = vec![Vec::new(); reqs.len()];
    let mut roots = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        match r.parent {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    let mut stats = PageStats::default();
    let mut running = JoinSet::new();
    let start = |set: &mut JoinSet<_>, i: usize| {
        let (s, reqs) = (session.clone(), reqs.clone());
        set.spawn(async move {
            let got = tokio::time::timeout(REQUEST_TIMEOUT, s.get(&reqs[i])).await;
            (i, got.unwrap_or_else(|_| Err(anyhow!("timed out"))))
        });
    };
    for &i in &roots {
        start(&mut running, i);
    }
    while let Some(done) = running.join_next().await {
        let (i, got) = done.expect("a request task never panics");
        match got {
            Ok((status, n, hash)) => {
                stats.bytes += n;
                if status >= 400 {
                    stats.failed += 1;
                } else if hash != reqs[i].sha256 {
                    stats.mismatched += 1;
                }
                for &c in &children[i] {
                    start(&mut running, c);
                }
            }
            Err(e) => {
                eprintln!("{}: {e:#}", reqs[i].url);
                stats.failed += 1 + descendants(&children, i);
            }
        }
    }
    session.close();
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plans;

    fn plan() -> Vec<Request> {
        let sha = "00".repeat(32);
        let text = format!(
            r#"{{"pages": {{"p": [{{"url": "https://a.test:8443/x/y.css?v=1", "parent": -1, "size": 1, "sha256": "{sha}"}}]}},
                "h1_hosts": [], "headers": {{"p": [[["sec-ch-ua-mobile", "?0"], ["accept", "text/css,*/*;q=0.1"]]]}}}}"#
        );
        Plans::parse(&text, "t").unwrap().pages["p"].clone()
    }

    #[test]
    fn an_h2_request_is_absolute_with_the_plans_headers_in_order() {
        let req = h2_request(&plan()[0]).unwrap();
        assert_eq!(req.uri().to_string(), "https://a.test:8443/x/y.css?v=1");
        let names: Vec<&str> = req.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["sec-ch-ua-mobile", "accept"]);
        assert!(
            req.headers().get(HOST).is_none(),
            "h2 carries :authority, not Host"
        );
    }

    #[test]
    fn an_h1_request_is_origin_form_with_host_and_keep_alive_first() {
        let req = h1_request(&plan()[0]).unwrap();
        assert_eq!(req.uri().to_string(), "/x/y.css?v=1");
        let names: Vec<&str> = req.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["host", "connection", "sec-ch-ua-mobile", "accept"]);
        assert_eq!(req.headers()[HOST], "a.test:8443");
    }

    #[test]
    fn a_failed_request_counts_its_descendants() {
        // 0 → {1, 2}, 1 → {3}: failing 0 loses 3 more, failing 1 loses 1 more
        let children = vec![vec![1, 2], vec![3], vec![], vec![]];
        assert_eq!(descendants(&children, 0), 3);
        assert_eq!(descendants(&children, 1), 1);
        assert_eq!(descendants(&children, 2), 0);
    }
}
