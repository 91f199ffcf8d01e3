//! Request handling: corpus objects, the built-in `/bytes/N` and `/health` endpoints,
//! server think time, and the access-log record of every response.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, HOST,
    IF_RANGE, LAST_MODIFIED, RANGE,
};
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};

use crate::access_log::{AccessLog, Record};
use crate::cdn::{CdnConfig, Tier};
use crate::corpus::{strip_port, Corpus};
use crate::pattern_body::PatternBody;
use crate::range::{self, Decision};

/// Longest `?think_ms=` accepted on built-in endpoints (a typo should not hang a client).
const MAX_QUERY_THINK: Duration = Duration::from_secs(60);

/// Everything a request handler needs that outlives one connection.
pub struct AppState {
    pub corpus: Option<Corpus>,
    pub log: AccessLog,
    /// CDN tier delays for corpus objects (`None`: no CDN, no extra delay).
    pub cdn: Option<CdnConfig>,
}

/// Facts about one accepted connection.
pub struct ConnInfo {
    pub client: SocketAddr,
    pub local: SocketAddr,
    pub scheme: &'static str,
    pub alpn: String,
    /// SNI server name, lower case.
    pub sni: Option<String>,
    /// First hosts-file name on the local address: used when the request names no host.
    pub default_host: Arc<str>,
}

pub type ResBody = LoggedBody;

/// Serves one request. Never fails: errors become HTTP statuses.
pub async fn handle<B>(
    req: Request<B>,
    state: Arc<AppState>,
    conn: Arc<ConnInfo>,
) -> Result<Response<ResBody>, Infallible> {
    let start = Instant::now();
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let host = request_host(&req, &conn);
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);

    let range_hdr = range_header(req.headers());
    let ranged = RangeRequest::of(req.method(), req.headers());
    let (think, matched, mut response, tier) = route(
        &state,
        &host,
        req.method(),
        &path,
        query.as_deref(),
        ranged.as_ref(),
    );
    if req.method() == Method::HEAD {
        // hyper's HTTP/2 server would send the body of a HEAD response (a protocol error);
        // keep the head, including Content-Length, and drop the body on both protocols.
        *response.body_mut() = Empty::new().boxed();
    }
    let due = match (&state.cdn, tier) {
        (Some(cdn), Some(t)) => cdn.due(start, think, t),
        _ => start + think,
    };
    let cdn_delay = state
        .cdn
        .as_ref()
        .zip(tier)
        .map_or(Duration::ZERO, |(c, t)| c.delay(t));
    if due > start {
        tokio::time::sleep_until(due.into()).await;
    }
    let status = response.status();
    if status == StatusCode::NOT_FOUND && matched == "none" {
        tracing::warn!(host = %host, path = %path, query = ?query, client = %conn.client, "no object for request: 404");
    }
    let pending = state.log.enabled().then(|| Pending {
        log: state.log.clone(),
        record: Record {
            ts,
            client: conn.client.to_string(),
            local: conn.local.to_string(),
            host,
            scheme: conn.scheme,
            alpn: conn.alpn.clone(),
            http_version: format!("{:?}", req.version()),
            method: req.method().to_string(),
            path: match &query {
                Some(q) => format!("{path}?{q}"),
                None => path,
            },
            status: status.as_u16(),
            matched,
            range: range_hdr,
            bytes: 0,
            think_ms: ms(think),
            tier: tier.map(Tier::as_str),
            cdn_ms: ms(cdn_delay),
            ttfb_ms: ms(start.elapsed()),
            total_ms: 0.0,
            complete: false,
        },
        start,
        head: req.method() == Method::HEAD,
    });
    Ok(response.map(|inner| LoggedBody {
        inner,
        pending,
        sent: 0,
    }))
}

/// The host a request is for: `:authority` / `Host` if it is a name, else SNI, else the
/// first name on the address the connection arrived at.
fn request_host<B>(req: &Request<B>, conn: &ConnInfo) -> String {
    let named = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            req.headers()
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .map(|a| strip_port(&a).to_ascii_lowercase())
        .filter(|h| !h.is_empty() && h.parse::<IpAddr>().is_err());
    named
        .or_else(|| conn.sni.clone())
        .unwrap_or_else(|| conn.default_host.to_string())
}

/// Think time, how the request matched, the response, and the CDN tier of a corpus object
/// (`None` for built-ins, 404s and when no CDN is configured).
type Routed = (
    Duration,
    &'static str,
    Response<BoxBody<Bytes, Infallible>>,
    Option<Tier>,
);

/// The CDN tier a corpus object is served from (`None` without `--cdn`).
fn object_tier(state: &AppState, obj: &crate::corpus::Object) -> Option<Tier> {
    state.cdn.as_ref().map(|c| c.tier(obj.tier, &obj.url).0)
}

/// Corpus exact match wins (replay is faithful), then built-ins, then the corpus match that
/// ignores the query, else 404.
fn route(
    state: &AppState,
    host: &str,
    method: &Method,
    path: &str,
    query: Option<&str>,
    ranged: Option<&RangeRequest>,
) -> Routed {
    let corpus_hit = state
        .corpus
        .as_ref()
        .and_then(|c| c.lookup(host, path, query));
    if let Some((obj, crate::corpus::Match::Exact)) = corpus_hit {
        return (
            obj.think,
            "exact",
            object_response(obj, ranged),
            object_tier(state, obj),
        );
    }
    if method == Method::GET || method == Method::HEAD {
        if let Some(r) = builtin(path, query, ranged) {
            return r;
        }
    }
    if let Some((obj, how)) = corpus_hit {
        return (
            obj.think,
            how.as_str(),
            object_response(obj, ranged),
            object_tier(state, obj),
        );
    }
    (
        Duration::ZERO,
        "none",
        text(StatusCode::NOT_FOUND, "not found\n"),
        None,
    )
}

/// The `Range` / `If-Range` of a `GET` (RFC 9110 §14.2: range handling is defined for GET
/// only, so every other method — HEAD included — gets the full response).
struct RangeRequest {
    range: String,
    if_range: Option<String>,
}

impl RangeRequest {
    fn of(method: &Method, headers: &HeaderMap) -> Option<Self> {
        if method != Method::GET {
            return None;
        }
        let mut ranges = headers.get_all(RANGE).iter();
        let range = ranges.next()?.to_str().ok()?.to_string();
        if ranges.next().is_some() {
            return None; // several Range fields: malformed, ignore
        }
        let if_range = headers
            .get(IF_RANGE)
            .map(|v| v.to_str().unwrap_or("").to_string());
        Some(Self { range, if_range })
    }

    /// The decision for a representation of `total` bytes whose validators are in
    /// `headers`. A present `If-Range` must equal the strong `ETag` or the `Last-Modified`
    /// date exactly, else the range is ignored (§13.1.5: the client's copy is stale).
    fn decide(&self, total: u64, headers: &HeaderMap) -> Decision {
        if let Some(cond) = &self.if_range {
            let etag = headers
                .get(ETAG)
                .and_then(|v| v.to_str().ok())
                .filter(|e| !e.starts_with("W/"));
            let date = headers.get(LAST_MODIFIED).and_then(|v| v.to_str().ok());
            if Some(cond.as_str()) != etag && Some(cond.as_str()) != date {
                return Decision::Full;
            }
        }
        range::decide(&self.range, total)
    }
}

/// The `Range` header as received, for the access log (several fields joined by `, `).
fn range_header(headers: &HeaderMap) -> Option<String> {
    let vals: Vec<String> = headers
        .get_all(RANGE)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    (!vals.is_empty()).then(|| vals.join(", "))
}

/// Turns a 200 response head into its 206 / 416 form (headers only; the caller picks the
/// body). `Full` leaves it a 200 that advertises `Accept-Ranges: bytes`.
fn apply_range_head(head: &mut HeaderMap, status: &mut StatusCode, decision: Decision, total: u64) {
    head.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let len = match decision {
        Decision::Full => total,
        Decision::Partial { first, last } => {
            *status = StatusCode::PARTIAL_CONTENT;
            last - first + 1
        }
        Decision::Unsatisfiable => {
            *status = StatusCode::RANGE_NOT_SATISFIABLE;
            0
        }
    };
    if let Some(cr) = decision.content_range(total) {
        // Always a valid header value: ASCII digits, spaces, '-', '/', '*'.
        head.insert(CONTENT_RANGE, HeaderValue::from_str(&cr).expect("ascii"));
    }
    head.insert(CONTENT_LENGTH, HeaderValue::from(len));
}

fn object_response(
    obj: &crate::corpus::Object,
    ranged: Option<&RangeRequest>,
) -> Response<BoxBody<Bytes, Infallible>> {
    let no_body = obj.status == StatusCode::NO_CONTENT || obj.status == StatusCode::NOT_MODIFIED;
    let mut resp = Response::new(Empty::new().boxed());
    *resp.status_mut() = obj.status;
    *resp.headers_mut() = obj.headers.clone();
    if no_body {
        return resp;
    }
    if obj.status != StatusCode::OK {
        // Ranges only apply to the selected representation of a 200 (RFC 9110 §14.2).
        resp.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(obj.body.len() as u64));
        *resp.body_mut() = Full::new(obj.body.clone()).boxed();
        return resp;
    }
    let total = obj.body.len() as u64;
    let decision = ranged.map_or(Decision::Full, |r| r.decide(total, &obj.headers));
    let (parts, _) = resp.into_parts();
    let mut parts = parts;
    apply_range_head(&mut parts.headers, &mut parts.status, decision, total);
    let body = match decision {
        Decision::Full => Full::new(obj.body.clone()).boxed(),
        Decision::Partial { first, last } => {
            Full::new(obj.body.slice(first as usize..=last as usize)).boxed()
        }
        Decision::Unsatisfiable => Empty::new().boxed(),
    };
    Response::from_parts(parts, body)
}

fn builtin(path: &str, query: Option<&str>, ranged: Option<&RangeRequest>) -> Option<Routed> {
    let think = match query_think(query) {
        Ok(t) => t,
        Err(msg) => {
            return Some((
                Duration::ZERO,
                "builtin",
                text(StatusCode::BAD_REQUEST, &msg),
                None,
            ))
        }
    };
    if path == "/health" {
        return Some((think, "builtin", text(StatusCode::OK, "ok"), None));
    }
    let n = path.strip_prefix("/bytes/")?;
    let Ok(len) = n.parse::<u64>() else {
        let msg = format!("expected /bytes/N with N a non-negative integer, got {n:?}\n");
        return Some((
            Duration::ZERO,
            "builtin",
            text(StatusCode::BAD_REQUEST, &msg),
            None,
        ));
    };
    let decision = ranged.map_or(Decision::Full, |r| r.decide(len, &HeaderMap::new()));
    let body = match decision {
        Decision::Full => PatternBody::new(len).boxed(),
        // Byte at absolute offset k is still k mod 251.
        Decision::Partial { first, last } => PatternBody::range(first, last + 1).boxed(),
        Decision::Unsatisfiable => Empty::new().boxed(),
    };
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    let (mut parts, body) = resp.into_parts();
    apply_range_head(&mut parts.headers, &mut parts.status, decision, len);
    Some((think, "builtin", Response::from_parts(parts, body), None))
}

/// Parses `think_ms=X` from a query string (milliseconds, float, 0..=60000).
fn query_think(query: Option<&str>) -> Result<Duration, String> {
    let Some(q) = query else {
        return Ok(Duration::ZERO);
    };
    for pair in q.split('&') {
        if let Some(v) = pair.strip_prefix("think_ms=") {
            let ms: f64 = v
                .parse()
                .map_err(|_| format!("think_ms: expected milliseconds as a number, got {v:?}\n"))?;
            if !ms.is_finite() || ms < 0.0 || ms > MAX_QUERY_THINK.as_secs_f64() * 1e3 {
                return Err(format!("think_ms: expected 0..=60000, got {v}\n"));
            }
            return Ok(Duration::from_secs_f64(ms / 1e3));
        }
    }
    Ok(Duration::ZERO)
}

fn text(status: StatusCode, body: &str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut resp = Response::new(Full::new(Bytes::copy_from_slice(body.as_bytes())).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    resp
}

/// Milliseconds rounded to microseconds (keeps log lines short).
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

struct Pending {
    log: AccessLog,
    record: Record,
    start: Instant,
    head: bool,
}

/// Response body that counts the bytes handed to the connection and writes the access-log
/// record when the body ends or is dropped (client went away).
pub struct LoggedBody {
    inner: BoxBody<Bytes, Infallible>,
    pending: Option<Pending>,
    sent: u64,
}

impl LoggedBody {
    fn finish(&mut self, complete: bool) {
        if let Some(mut p) = self.pending.take() {
            p.record.bytes = self.sent;
            p.record.total_ms = ms(p.start.elapsed());
            p.record.complete = complete || p.head;
            p.log.log(p.record);
        }
    }
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.sent += d.len() as u64;
                }
                if this.inner.is_end_stream() {
                    this.finish(true);
                }
            }
            Poll::Ready(None) => this.finish(true),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        let done = self.inner.is_end_stream();
        self.finish(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_think_parses_and_bounds() {
        assert_eq!(query_think(None).unwrap(), Duration::ZERO);
        assert_eq!(
            query_think(Some("a=1&think_ms=250")).unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            query_think(Some("think_ms=0.5")).unwrap(),
            Duration::from_micros(500)
        );
        assert!(query_think(Some("think_ms=abc")).is_err());
        assert!(query_think(Some("think_ms=-1")).is_err());
        assert!(query_think(Some("think_ms=600000")).is_err());
    }

    #[test]
    fn builtins_route() {
        let state = AppState {
            corpus: None,
            log: AccessLog::disabled(),
            cdn: Some(CdnConfig::default()),
        };
        let (_, m, r, tier) = route(&state, "a.test", &Method::GET, "/health", None, None);
        assert_eq!((m, r.status()), ("builtin", StatusCode::OK));
        assert_eq!(tier, None, "built-ins have no CDN tier");
        let (t, _, r, _) = route(
            &state,
            "a.test",
            &Method::GET,
            "/bytes/10",
            Some("think_ms=7"),
            None,
        );
        assert_eq!((t, r.status()), (Duration::from_millis(7), StatusCode::OK));
        assert_eq!(r.headers()[CONTENT_LENGTH], "10");
        let (_, _, r, _) = route(&state, "a.test", &Method::GET, "/bytes/x", None, None);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let (_, m, r, tier) = route(&state, "a.test", &Method::GET, "/other", None, None);
        assert_eq!((m, r.status(), tier), ("none", StatusCode::NOT_FOUND, None));
        let (_, _, r, _) = route(&state, "a.test", &Method::POST, "/health", None, None);
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }

    /// Manifest tier first, else the hit-ratio draw; no tier at all without a CDN config.
    #[test]
    fn corpus_objects_get_their_tier() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("manifest.json"),
            r#"{"format":"dchannel-corpus/1","objects":[
              {"url":"https://a.test/p","status":200,"tier":"parent","think_ms":4},
              {"url":"https://a.test/x","status":200}]}"#,
        )
        .unwrap();
        let load = || Some(Corpus::load(dir.path()).unwrap());
        let mut cdn = CdnConfig::default();
        // ratio_draw("https://a.test/x", 1) = 0.2898 (cdn.rs test): below 0.3 → edge.
        cdn.parse_ratio("edge=0.3,parent=0.2").unwrap();
        let state = AppState {
            corpus: load(),
            log: AccessLog::disabled(),
            cdn: Some(cdn.clone()),
        };
        let get = |st: &AppState, p: &str| route(st, "a.test", &Method::GET, p, None, None);
        let (think, _, _, tier) = get(&state, "/p");
        assert_eq!(
            (think, tier),
            (Duration::from_millis(4), Some(Tier::Parent))
        );
        assert_eq!(get(&state, "/x").3, Some(Tier::Edge));
        cdn.parse_ratio("edge=0.28,parent=0.2").unwrap();
        let state = AppState {
            cdn: Some(cdn),
            ..state
        };
        assert_eq!(
            get(&state, "/x").3,
            Some(Tier::Parent),
            "0.2898 in [0.28, 0.48)"
        );
        let state = AppState { cdn: None, ..state };
        assert_eq!(get(&state, "/p").3, None, "no --cdn: no tier, no delay");
    }
}
