//! Per-request cost of the proxy on loopback: sequential GETs over one keep-alive
//! connection, direct to an in-process hyper origin vs through objproxy (`passthrough`,
//! plain http absolute-URI requests; upstream HBC bound to 127.0.0.2).
//!
//! `cargo run --release -p objproxy --example loopback_overhead [-- REQUESTS]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use objproxy::policy::PolicyKind;
use tokio::net::{TcpListener, TcpStream};

async fn origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let n: usize = req
                        .uri()
                        .path()
                        .trim_start_matches("/bytes/")
                        .parse()
                        .unwrap_or(0);
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(vec![7u8; n]))))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// Median and p90 per-request time of `n` sequential GETs of `size` bytes.
async fn run(via: SocketAddr, origin: SocketAddr, size: usize, n: usize) -> (Duration, Duration) {
    let s = TcpStream::connect(via).await.unwrap();
    s.set_nodelay(true).unwrap();
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut t = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let req = Request::get(format!("http://{origin}/bytes/{size}"))
            .header("host", origin.to_string())
            .body(Empty::<Bytes>::new())
            .unwrap();
        let start = Instant::now();
        tx.ready().await.unwrap();
        let b = tx
            .send_request(req)
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap();
        assert_eq!(b.to_bytes().len(), size);
        if i >= 20 {
            t.push(start.elapsed()); // the first 20 warm up connections and caches
        }
    }
    t.sort();
    (t[n / 2], t[n * 9 / 10])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let ca = common::make_ca();
    let o = origin().await;
    let cfg = common::loopback_config(&ca, PolicyKind::Passthrough, None);
    let proxy = objproxy::proxy::start(cfg).await.unwrap();
    println!("{n} sequential GETs per row, one keep-alive client connection");
    println!(
        "{:>9} {:>12} {:>12} {:>12} {:>12}",
        "size", "direct p50", "proxy p50", "added p50", "proxy p90"
    );
    for size in [1_000usize, 100_000, 1_000_000] {
        let (d50, _) = run(o, o, size, n).await;
        let (p50, p90) = run(proxy.local_addr, o, size, n).await;
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "{size:>9} {:>10.0}µs {:>10.0}µs {:>10.0}µs {:>10.0}µs",
            us(d50),
            us(p50),
            us(p50) - us(d50),
            us(p90)
        );
    }
}
