//! One browser request → upstream fetches on the channels the policy picks, including
//! IANS size discovery (probe `bytes=0-999`, then `bytes=1000-`) and stitching the two
//! ranges into one 200 response.

use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use dchannel_base::http::HOP_BY_HOP;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::discovery::{self, ProbeOutcome, PROBE_LEN};
use crate::policy::{Channel, Decision, PolicyKind, Reason};
use crate::proxy::{Commitment, Shared};
use crate::upstream::{self, Origin, Outgoing};

/// What the browser gets: an upstream body (possibly behind a prefix, possibly with its
/// first bytes skipped), counted per channel as it streams.
pub struct ProxyBody {
    prefix: Option<Bytes>,
    rest: Option<Incoming>,
    skip: u64,
    ch: Channel,
    shared: Option<Arc<Shared>>,
    /// The object's bytes still counted as committed to `ch` (obj-oracle:committed).
    commitment: Option<Commitment>,
}

impl ProxyBody {
    pub fn full(b: Bytes) -> Self {
        ProxyBody {
            prefix: Some(b),
            rest: None,
            skip: 0,
            ch: Channel::Hbc,
            shared: None,
            commitment: None,
        }
    }

    fn upstream(
        prefix: Option<Bytes>,
        rest: Incoming,
        skip: u64,
        ch: Channel,
        s: &Arc<Shared>,
        commitment: Option<Commitment>,
    ) -> Self {
        ProxyBody {
            prefix,
            rest: Some(rest),
            skip,
            ch,
            shared: Some(s.clone()),
            commitment,
        }
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(p) = self.prefix.take() {
            if !p.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(p))));
            }
        }
        loop {
            let Some(rest) = self.rest.as_mut() else {
                return Poll::Ready(None);
            };
            let frame = match Pin::new(rest).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) => f,
                Poll::Ready(None) => {
                    self.rest = None;
                    return Poll::Ready(None);
                }
                other => return other,
            };
            let mut data = match frame.into_data() {
                Ok(d) => d,
                Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
            };
            if let Some(s) = &self.shared {
                s.stats
                    .ch(self.ch)
                    .body_bytes
                    .fetch_add(data.len() as u64, Relaxed);
            }
            if let Some(c) = self.commitment.as_mut() {
                c.arrived(data.len() as u64);
            }
            if self.skip > 0 {
                let n = (self.skip as usize).min(data.len());
                self.skip -= n as u64;
                data = data.slice(n..);
                if data.is_empty() {
                    continue;
                }
            }
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.as_ref().map_or(true, |p| p.is_empty())
            && self.rest.as_ref().map_or(true, |r| r.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let mut h = SizeHint::default();
        let p = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        match &self.rest {
            None => h.set_exact(p),
            Some(r) if self.skip == 0 => {
                let rh = r.size_hint();
                h.set_lower(rh.lower() + p);
                if let Some(u) = rh.upper() {
                    h.set_upper(u + p);
                }
            }
            Some(_) => {}
        }
        h
    }
}

pub type ProxyResponse = Response<ProxyBody>;

pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Headers named in Connection are hop-by-hop too.
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in HOP_BY_HOP {
        h.remove(n);
    }
}

pub fn error_response(status: StatusCode, msg: String) -> ProxyResponse {
    let mut r = Response::new(ProxyBody::full(Bytes::from(msg + "\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn forward(
    resp: Response<Incoming>,
    prefix: Option<Bytes>,
    skip: u64,
    ch: Channel,
    s: &Arc<Shared>,
) -> ProxyResponse {
    forward_committed(resp, prefix, skip, ch, s, None)
}

fn forward_committed(
    resp: Response<Incoming>,
    prefix: Option<Bytes>,
    skip: u64,
    ch: Channel,
    s: &Arc<Shared>,
    commitment: Option<Commitment>,
) -> ProxyResponse {
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(
        parts,
        ProxyBody::upstream(prefix, body, skip, ch, s, commitment),
    )
}

/// Handle one browser request for `origin`.
pub async fn handle(
    shared: Arc<Shared>,
    origin: Origin,
    method: Method,
    path_and_query: String,
    mut headers: HeaderMap,
    body: Bytes,
) -> ProxyResponse {
    shared.stats.client_requests.fetch_add(1, Relaxed);
    strip_hop_by_hop(&mut headers);
    let req = Outgoing {
        method,
        path_and_query,
        headers,
        body,
    };
    match route(&shared, &origin, req).await {
        Ok(r) => r,
        Err(e) => {
            shared.stats.upstream_errors.fetch_add(1, Relaxed);
            tracing::warn!(host = %origin.host, "upstream failed: {e:#}");
            error_response(StatusCode::BAD_GATEWAY, format!("objproxy: {e:#}"))
        }
    }
}

fn record(shared: &Shared, d: Decision, size: Option<u64>) {
    shared.stats.ch(d.channel).decision(d.reason, size);
}

async fn route(shared: &Arc<Shared>, origin: &Origin, req: Outgoing) -> Result<ProxyResponse> {
    let policy = &shared.config.policy;
    let discoverable = req.method == Method::GET && !req.headers.contains_key(header::RANGE);
    match policy {
        PolicyKind::Passthrough => {
            let d = crate::policy::passthrough::decide();
            record(shared, d, None);
            full(shared, d.channel, origin, &req).await
        }
        PolicyKind::ObjOracle { .. } => {
            let size =
                shared.config.oracle.as_ref().and_then(|o| {
                    o.size(origin.scheme(), &origin.authority(), &req.path_and_query)
                });
            // Decided and committed under one lock, before the request leaves, so that
            // the next decision (Chromium asks for many objects at once) already sees
            // these bytes queued: views read outside the lock could miss a neighbour's.
            let (d, commitment) = {
                let _decide = shared.commit_lock.lock().expect("commit lock");
                let d = match size {
                    Some(s) => policy.decide(s, &shared.views(origin), origin.https),
                    None => Decision::new(Channel::Hbc, Reason::Default),
                };
                (d, size.map(|s| Commitment::new(shared, d.channel, s)))
            };
            record(shared, d, size);
            let resp = upstream::send(shared, d.channel, origin, &req).await?;
            Ok(forward_committed(
                resp, None, 0, d.channel, shared, commitment,
            ))
        }
        PolicyKind::ObjPriority => {
            let prio = crate::policy::obj_priority::of_headers(&req.headers);
            let d = crate::policy::obj_priority::decide(prio);
            tracing::debug!(host = %origin.host, path = %req.path_and_query, urgency = prio.urgency, channel = %d.channel, "obj-priority");
            let resp = upstream::send(shared, d.channel, origin, &req).await?;
            // The whole object travels on the decided channel: its size is the response's
            // Content-Length (when the origin sends one).
            let size = resp
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            record(shared, d, size);
            Ok(forward(resp, None, 0, d.channel, shared))
        }
        PolicyKind::Ians | PolicyKind::ObjSize { .. } if discoverable => {
            let probe_ch = policy.probe_channel(&shared.views(origin));
            discover(shared, origin, req, probe_ch).await
        }
        PolicyKind::Ians | PolicyKind::ObjSize { .. } => {
            let d = Decision::new(
                policy.probe_channel(&shared.views(origin)),
                Reason::SizeUnknown,
            );
            record(shared, d, None);
            full(shared, d.channel, origin, &req).await
        }
    }
}

async fn full(
    shared: &Arc<Shared>,
    ch: Channel,
    origin: &Origin,
    req: &Outgoing,
) -> Result<ProxyResponse> {
    let resp = upstream::send(shared, ch, origin, req).await?;
    Ok(forward(resp, None, 0, ch, shared))
}

fn with_range(req: &Outgoing, range: &'static str) -> Outgoing {
    let mut r = req.clone();
    r.headers
        .insert(header::RANGE, HeaderValue::from_static(range));
    // A conditional range would turn a changed object into a full 200; keep it simple.
    r.headers.remove(header::IF_RANGE);
    r
}

/// Sends `req` asking for `range` on `ch`; returns the response and its Content-Range.
async fn send_range(
    shared: &Arc<Shared>,
    ch: Channel,
    origin: &Origin,
    req: &Outgoing,
    range: &'static str,
) -> Result<(Response<Incoming>, Option<String>)> {
    let resp = upstream::send(shared, ch, origin, &with_range(req, range)).await?;
    let content_range = resp
        .headers()
        .get(header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Ok((resp, content_range))
}

/// IANS size discovery on `probe_ch`, then the rest on the policy's channel.
async fn discover(
    shared: &Arc<Shared>,
    origin: &Origin,
    req: Outgoing,
    probe_ch: Channel,
) -> Result<ProxyResponse> {
    shared.stats.probes.fetch_add(1, Relaxed);
    let (probe, content_range) =
        send_range(shared, probe_ch, origin, &req, discovery::PROBE_RANGE).await?;
    let outcome = discovery::on_probe_response(probe.status().as_u16(), content_range.as_deref());
    tracing::debug!(host = %origin.host, path = %req.path_and_query, ?outcome, "probe");
    let (rest_ch, total) = match outcome {
        ProbeOutcome::PassThrough => {
            record(shared, Decision::new(probe_ch, Reason::SizeUnknown), None);
            return Ok(forward(probe, None, 0, probe_ch, shared));
        }
        ProbeOutcome::Refetch => {
            drop(probe);
            record(shared, Decision::new(probe_ch, Reason::SizeUnknown), None);
            return full(shared, probe_ch, origin, &req).await;
        }
        ProbeOutcome::Complete { total } => {
            record(
                shared,
                Decision::new(probe_ch, Reason::SmallObject),
                Some(total),
            );
            (None, total)
        }
        ProbeOutcome::FetchRest { total } => {
            // Fresh views: the probe may have opened the first connection to this origin.
            let d = shared
                .config
                .policy
                .decide(total, &shared.views(origin), origin.https);
            record(shared, d, Some(total));
            (Some(d.channel), total)
        }
        ProbeOutcome::RestUnknownSize => {
            record(shared, Decision::new(probe_ch, Reason::SizeUnknown), None);
            (Some(probe_ch), 0)
        }
    };
    let (mut parts, body) = probe.into_parts();
    let prefix = body
        .collect()
        .await
        .context("reading the probe body")?
        .to_bytes();
    shared
        .stats
        .ch(probe_ch)
        .body_bytes
        .fetch_add(prefix.len() as u64, Relaxed);
    strip_hop_by_hop(&mut parts.headers);
    parts.status = StatusCode::OK;
    parts.headers.remove(header::CONTENT_RANGE);
    parts.headers.remove(header::CONTENT_LENGTH);
    let known_total = !matches!(outcome, ProbeOutcome::RestUnknownSize);
    if known_total {
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(total));
    }
    let Some(rest_ch) = rest_ch else {
        return Ok(Response::from_parts(parts, ProxyBody::full(prefix)));
    };
    if prefix.len() as u64 != PROBE_LEN {
        anyhow::bail!("probe answered {} bytes for bytes=0-999", prefix.len());
    }
    shared.stats.stitched.fetch_add(1, Relaxed);
    let (rest, cr) = send_range(shared, rest_ch, origin, &req, discovery::REST_RANGE).await?;
    let cr = cr.as_deref();
    let skip = discovery::rest_skip(rest.status().as_u16(), cr).with_context(|| {
        format!(
            "range bytes=1000- answered {} {:?}; cannot stitch",
            rest.status(),
            cr
        )
    })?;
    let body = rest.into_body();
    Ok(Response::from_parts(
        parts,
        ProxyBody::upstream(Some(prefix), body, skip, rest_ch, shared, None),
    ))
}
