//! The metrics endpoint: the Prometheus text format over HTTP/1.1, on any path.
//!
//! Rule: one slow or silent client never holds up another. Every connection
//! is served by a thread of its own, at most [`Limits::connections`] at once
//! (one more is answered `503` at once and closed); a client has
//! [`Limits::request`] in all to send its request head (a silent or
//! trickling one is closed unanswered) and every write of the answer
//! [`Limits::write`]. Label values are escaped as the text format requires
//! ([`escape_label`]): device names are the operator's text.

use crate::stats::Stats;
use anyhow::{Context, Result};
use std::borrow::Cow;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How much the endpoint gives its clients.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// Time to send the request head, from the connection's acceptance.
    pub request: Duration,
    /// Time for each write of the answer.
    pub write: Duration,
}

/// A few scrapers (Prometheus, `dchannel show`, curl) at a time; a request head
/// takes a client one round trip.
pub const LIMITS: Limits = Limits {
    connections: 16,
    request: Duration::from_secs(2),
    write: Duration::from_secs(2),
};

/// Serves the metrics of `stats` on `addr` from a thread of its own.
pub fn serve(addr: SocketAddr, stats: Arc<Stats>) -> Result<()> {
    let listener = TcpListener::bind(addr).with_context(|| format!("--metrics-addr {addr}"))?;
    serve_on(listener, LIMITS, move || stats.to_prometheus())
}

/// Serves what `render` returns on every connection to `listener`.
pub fn serve_on(
    listener: TcpListener,
    limits: Limits,
    render: impl Fn() -> String + Send + Sync + 'static,
) -> Result<()> {
    let render = Arc::new(render);
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_write_timeout(Some(limits.write));
                if active.fetch_add(1, Ordering::AcqRel) >= limits.connections {
                    active.fetch_sub(1, Ordering::AcqRel);
                    let _ = c.write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    close_after_answer(c);
                    continue;
                }
                let (render, served) = (Arc::clone(&render), Arc::clone(&active));
                let spawned = std::thread::Builder::new()
                    .name("metrics-conn".into())
                    .spawn(move || {
                        answer(c, limits, &*render);
                        served.fetch_sub(1, Ordering::AcqRel);
                    });
                if let Err(e) = spawned {
                    // The connection went down with the closure; free its place.
                    active.fetch_sub(1, Ordering::AcqRel);
                    tracing::warn!("metrics: no thread for a connection: {e}");
                }
            }
        })?;
    Ok(())
}

/// Closes a connection answered without reading its request: the answer
/// ends with a FIN, and the request bytes already there are read, so the
/// close is not a reset that could cost the client the answer (a socket
/// closed with unread data sends RST; the client's read then fails with
/// ECONNRESET). Waits at most 10 ms per read for a request still on its
/// way (the acceptor thread does this, so 40 ms at most).
fn close_after_answer(mut c: TcpStream) {
    let _ = c.shutdown(std::net::Shutdown::Write);
    let _ = c.set_read_timeout(Some(Duration::from_millis(10)));
    let mut sink = [0u8; 1024];
    // A request head fits in 1 KiB (`answer`); 4 reads at most, so a client
    // that keeps sending cannot hold the acceptor.
    for _ in 0..4 {
        if !matches!(c.read(&mut sink), Ok(k) if k > 0) {
            break;
        }
    }
}

/// Reads the request head (until its blank line, 1 KiB, or the client's
/// end of sending) within `limits.request`, then writes the metrics.
fn answer(mut c: TcpStream, limits: Limits, render: &dyn Fn() -> String) {
    let deadline = Instant::now() + limits.request;
    let mut req = [0u8; 1024];
    let mut n = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || c.set_read_timeout(Some(left)).is_err() {
            return; // too slow: closed unanswered
        }
        match c.read(&mut req[n..]) {
            Ok(0) if n == 0 => return,
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if n == req.len() || req[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
    let body = render();
    let _ = write!(
        c,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        body.len(),
        body
    );
}

/// A label value as the text format writes it between double quotes:
/// backslash, double quote and newline escaped as `\\`, `\"` and `\n`
/// (Prometheus "Exposition formats", text format, label values).
pub fn escape_label(v: &str) -> Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(v);
    }
    let mut s = String::with_capacity(v.len() + 4);
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    Cow::Owned(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dchannel_core::endpoint::{self, Config, PeerConfig, Role, TokenAuth};
    use dchannel_core::policy::parse_spec;

    /// An endpoint on a free port of 127.0.0.1 serving `render`; its address.
    fn endpoint(limits: Limits, render: impl Fn() -> String + Send + Sync + 'static) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        serve_on(l, limits, render).unwrap();
        addr
    }

    /// One GET: the whole answer (status line, head, body).
    fn get(addr: SocketAddr) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn a_silent_client_does_not_hold_up_a_scrape() {
        let addr = endpoint(LIMITS, || "dchannel_up 1\n".into());
        // A client that connects and says nothing, and one that sends half a head.
        let _silent = TcpStream::connect(addr).unwrap();
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /metr").unwrap();
        let t = Instant::now();
        let answer = get(addr);
        let took = t.elapsed();
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n")
                && answer.ends_with("\r\n\r\ndchannel_up 1\n"),
            "{answer}"
        );
        assert!(took < Duration::from_secs(1), "answered after {took:?}");
    }

    #[test]
    fn too_many_connections_get_503_and_silent_ones_are_closed_unanswered() {
        let limits = Limits {
            connections: 2,
            request: Duration::from_millis(300),
            write: Duration::from_secs(1),
        };
        let addr = endpoint(limits, || "x 1\n".into());
        let mut silent: Vec<TcpStream> =
            (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(50)); // both accepted and counted
        assert!(get(addr).starts_with("HTTP/1.1 503 "), "over the cap");
        // After their 300 ms, the silent ones are closed without an answer ...
        for c in &mut silent {
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut got = Vec::new();
            let t = Instant::now();
            let _ = c.read_to_end(&mut got);
            assert!(got.is_empty() && t.elapsed() < Duration::from_millis(1500));
        }
        // ... and their places are free again.
        std::thread::sleep(Duration::from_millis(50));
        assert!(get(addr).starts_with("HTTP/1.1 200 OK"));
    }

    #[test]
    fn label_values_are_escaped_as_the_text_format_says() {
        assert_eq!(escape_label("phone-1"), "phone-1");
        assert!(matches!(escape_label("phone-1"), Cow::Borrowed(_)));
        assert_eq!(
            escape_label("a\\b\"c\nd"),
            "a\\\\b\\\"c\\nd" // a\\b\"c\nd on the wire
        );
    }

    #[test]
    fn a_device_name_with_quotes_and_backslashes_is_escaped_on_the_wire() {
        let name = r#"lab "A" \ 2"#;
        let peers = vec![PeerConfig {
            name: name.into(),
            token: 1,
            tunnel_addr: Some("198.19.0.2".parse().unwrap()),
            endpoints: [None, None],
        }];
        let auth = TokenAuth::new(&peers).unwrap();
        let (tx, _) = endpoint::new::<Vec<u8>, _>(Config::new(Role::Gateway), peers, auth, || {
            parse_spec("all-hbc", 0.75).unwrap()
        })
        .unwrap();
        let stats = Stats::new("gateway", "all-hbc".into(), true, Arc::clone(tx.shared()));
        let addr = endpoint(LIMITS, move || stats.to_prometheus());
        let answer = get(addr);
        let want = r#"dchannel_channel_up{role="gateway",peer="lab \"A\" \\ 2",channel="hbc"} 0"#;
        assert!(answer.lines().any(|l| l == want), "{want} not in\n{answer}");
    }
}
