//! The page-load plans and the user's schedule, as the lab writes them.
//!
//! Rule: the plans file is `dchlab.workloads.bgusers.background.plans_text`'s JSON,
//! `{"pages": {PAGE: [{"url", "parent", "size", "sha256"}, ...]}, "h1_hosts": [HOST, ...],
//! "headers": {PAGE: [[[NAME, VALUE], ...] per request]}}`: every request of a page in
//! dependency order (`deps.py`: a parent always precedes its children; parent -1 is the
//! entry document's "none"), the body's size and sha256, the origins without HTTP/2 and
//! each request's Chromium headers (`headers.py`, in the order Chromium sends them).
//! The schedule file is `{"schedule": [[THINK_S, PAGE], ...]}`: the think time before
//! each page and the page (drawn in Python by `replay.draws`, so both clients see the
//! same draws). Anything else is an error naming the file, page, request and field.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use http::header::{HeaderName, HeaderValue};
use http::Uri;
use serde::Deserialize;

/// One request of a page load.
#[derive(Debug, Clone)]
pub struct Request {
    /// The absolute https:// URL.
    pub url: Uri,
    /// Index of the request whose response references this one (None: the entry document).
    pub parent: Option<usize>,
    /// The body's sha256 (the corpus's content address).
    pub sha256: [u8; 32],
    /// Chromium's request headers for it, in order (no pseudo-headers, no Host).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Request {
    /// The origin (host, port) the request goes to.
    pub fn origin(&self) -> (String, u16) {
        let host = self.url.host().unwrap_or_default().to_string();
        (host, self.url.port_u16().unwrap_or(443))
    }

    /// Whether Chromium sends it without credentials: a CORS request (`sec-fetch-mode:
    /// cors`: fonts, `fetch()`) to another origin (the Fetch standard's default
    /// credentials mode `same-origin`). Chromium keeps such requests on connections of
    /// their own (its socket pools are keyed by privacy mode).
    pub fn anonymous(&self) -> bool {
        let get = |name: &str| {
            self.headers
                .iter()
                .find(|(n, _)| n.as_str() == name)
                .and_then(|(_, v)| v.to_str().ok())
        };
        get("sec-fetch-mode") == Some("cors") && get("sec-fetch-site") != Some("same-origin")
    }
}

/// Every page's requests and the HTTP/1.1-only hosts.
#[derive(Debug, Clone)]
pub struct Plans {
    /// Page name → its requests in dependency order.
    pub pages: BTreeMap<String, Vec<Request>>,
    /// Hosts that offer no HTTP/2 (ALPN http/1.1 only).
    pub h1_hosts: HashSet<String>,
}

#[derive(Deserialize)]
struct RawRequest {
    url: String,
    parent: i64,
    sha256: String,
}

#[derive(Deserialize)]
struct RawPlans {
    pages: BTreeMap<String, Vec<RawRequest>>,
    h1_hosts: Vec<String>,
    headers: BTreeMap<String, Vec<Vec<(String, String)>>>,
}

#[derive(Deserialize)]
struct RawSchedule {
    schedule: Vec<(f64, String)>,
}

/// One scheduled page: think `think_s` seconds, then load `page`.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    /// Seconds to think before the page.
    pub think_s: f64,
    /// The page's name (a key of `Plans::pages`).
    pub page: String,
}

impl Plans {
    /// Parse a plans document (module rule); `what` names it in errors.
    pub fn parse(text: &str, what: &str) -> Result<Plans> {
        let raw: RawPlans = serde_json::from_str(text).with_context(|| {
            format!("{what}: expected the lab's plans JSON (pages, h1_hosts, headers)")
        })?;
        let mut pages = BTreeMap::new();
        for (page, reqs) in raw.pages {
            let hdrs = raw
                .headers
                .get(&page)
                .ok_or_else(|| anyhow!("{what}: headers: no entry for page {page:?}"))?;
            if hdrs.len() != reqs.len() {
                bail!(
                    "{what}: headers[{page:?}]: {} header lists for {} requests",
                    hdrs.len(),
                    reqs.len()
                );
            }
            if reqs.is_empty() {
                bail!("{what}: pages[{page:?}]: no request (expected the entry document first)");
            }
            let mut out = Vec::with_capacity(reqs.len());
            for (i, (r, h)) in reqs.into_iter().zip(hdrs).enumerate() {
                let at = format!("{what}: pages[{page:?}][{i}]");
                out.push(request(r, h, i, &at)?);
            }
            pages.insert(page, out);
        }
        Ok(Plans {
            pages,
            h1_hosts: raw.h1_hosts.into_iter().collect(),
        })
    }

    /// Read and parse the plans file at `path`.
    pub fn read(path: &Path) -> Result<Plans> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read plans file {}", path.display()))?;
        Plans::parse(&text, &path.display().to_string())
    }
}

fn request(r: RawRequest, h: &[(String, String)], i: usize, at: &str) -> Result<Request> {
    let url: Uri = r
        .url
        .parse()
        .with_context(|| format!("{at}.url: {:?} is not a URL", r.url))?;
    if url.scheme_str() != Some("https") || url.host().is_none() {
        bail!("{at}.url: {:?}: expected an https://HOST/... URL", r.url);
    }
    let parent = match r.parent {
        -1 if i == 0 => None,
        p if p >= 0 && (p as usize) < i => Some(p as usize),
        p => bail!(
            "{at}.parent: {p}: expected -1 for the entry document (request 0) or an earlier request's index"
        ),
    };
    let sha256 = hex32(&r.sha256).with_context(|| format!("{at}.sha256: {:?}", r.sha256))?;
    let mut headers = Vec::with_capacity(h.len());
    for (name, value) in h {
        let n = HeaderName::from_bytes(name.as_bytes())
            .with_context(|| format!("{at}: header name {name:?}"))?;
        let v = HeaderValue::from_str(value)
            .with_context(|| format!("{at}: header {name}: value {value:?}"))?;
        headers.push((n, v));
    }
    Ok(Request {
        url,
        parent,
        sha256,
        headers,
    })
}

fn hex32(s: &str) -> Result<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("expected 64 hex digits (a sha256)");
    }
    let mut out = [0u8; 32];
    for (k, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * k..2 * k + 2], 16)?;
    }
    Ok(out)
}

/// Parse a schedule document (module rule) whose pages must all be in `plans`.
pub fn parse_schedule(text: &str, what: &str, plans: &Plans) -> Result<Vec<Visit>> {
    let raw: RawSchedule = serde_json::from_str(text)
        .with_context(|| format!("{what}: expected {{\"schedule\": [[THINK_S, PAGE], ...]}}"))?;
    raw.schedule
        .into_iter()
        .enumerate()
        .map(|(i, (think_s, page))| {
            if !(think_s.is_finite() && think_s >= 0.0) {
                bail!("{what}: schedule[{i}]: think time {think_s}: expected seconds ≥ 0");
            }
            if !plans.pages.contains_key(&page) {
                bail!("{what}: schedule[{i}]: page {page:?} is not in the plans");
            }
            Ok(Visit { think_s, page })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn doc(parent1: i64, url1: &str) -> String {
        format!(
            r#"{{"pages": {{"p": [
                {{"url": "https://a.test/", "parent": -1, "size": 10, "sha256": "{SHA}"}},
                {{"url": "{url1}", "parent": {parent1}, "size": 0, "sha256": "{SHA}"}}]}},
              "h1_hosts": ["old.test"],
              "headers": {{"p": [[["user-agent", "X"], ["accept", "*/*"]], [["referer", "https://a.test/"]]]}}}}"#
        )
    }

    #[test]
    fn a_plan_parses_with_parents_hashes_and_headers_in_order() {
        let p = Plans::parse(&doc(0, "https://b.test:8443/x.js"), "t").unwrap();
        let reqs = &p.pages["p"];
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].parent, None);
        assert_eq!(reqs[1].parent, Some(0));
        assert_eq!(reqs[1].origin(), ("b.test".to_string(), 8443));
        assert_eq!(reqs[0].origin(), ("a.test".to_string(), 443));
        // sha256 of the empty string (FIPS 180-4 test vector), first and last bytes
        assert_eq!((reqs[0].sha256[0], reqs[0].sha256[31]), (0xe3, 0x55));
        let names: Vec<&str> = reqs[0].headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["user-agent", "accept"]);
        assert!(p.h1_hosts.contains("old.test"));
        assert!(!reqs[0].anonymous());
    }

    #[test]
    fn cross_origin_cors_requests_are_anonymous() {
        let mut r = Plans::parse(&doc(0, "https://b.test/f.woff2"), "t")
            .unwrap()
            .pages["p"][1]
            .clone();
        let h = |n: &'static str, v: &'static str| {
            (HeaderName::from_static(n), HeaderValue::from_static(v))
        };
        r.headers = vec![
            h("sec-fetch-mode", "cors"),
            h("sec-fetch-site", "cross-site"),
        ];
        assert!(r.anonymous());
        r.headers = vec![
            h("sec-fetch-mode", "cors"),
            h("sec-fetch-site", "same-origin"),
        ];
        assert!(!r.anonymous(), "same-origin CORS carries credentials");
        r.headers = vec![
            h("sec-fetch-mode", "no-cors"),
            h("sec-fetch-site", "cross-site"),
        ];
        assert!(!r.anonymous());
    }

    #[test]
    fn a_parent_after_its_child_or_a_bad_url_is_an_error_naming_the_field() {
        let e = Plans::parse(&doc(1, "https://b.test/x"), "plans.json").unwrap_err();
        assert!(
            format!("{e:#}").contains("plans.json: pages[\"p\"][1].parent: 1"),
            "{e:#}"
        );
        let e = Plans::parse(&doc(0, "http://b.test/x"), "plans.json").unwrap_err();
        assert!(format!("{e:#}").contains("pages[\"p\"][1].url"), "{e:#}");
        let bad_sha = doc(0, "https://b.test/x").replacen(SHA, "abc", 1);
        let e = Plans::parse(&bad_sha, "f").unwrap_err();
        assert!(format!("{e:#}").contains("64 hex digits"), "{e:#}");
    }

    #[test]
    fn a_schedule_parses_and_rejects_unknown_pages_and_negative_thinks() {
        let p = Plans::parse(&doc(0, "https://b.test/x"), "t").unwrap();
        let s = parse_schedule(r#"{"schedule": [[0.5, "p"], [0, "p"]]}"#, "s", &p).unwrap();
        assert_eq!(
            s[0],
            Visit {
                think_s: 0.5,
                page: "p".into()
            }
        );
        assert_eq!(s.len(), 2);
        let e = parse_schedule(r#"{"schedule": [[1, "q"]]}"#, "s", &p).unwrap_err();
        assert!(e.to_string().contains("schedule[0]: page \"q\""), "{e}");
        let e = parse_schedule(r#"{"schedule": [[-1, "p"]]}"#, "s", &p).unwrap_err();
        assert!(e.to_string().contains("think time -1"), "{e}");
    }
}
