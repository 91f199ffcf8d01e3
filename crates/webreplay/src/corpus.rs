//! Page corpus loader and request matcher (docs/formats.md "Page corpus").
//!
//! Bodies are read into memory once at startup (content-addressed, so shared bodies are
//! loaded once) and served as zero-copy `Bytes` clones.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use dchannel_base::http::is_hop_by_hop;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::StatusCode;
use serde::Deserialize;

use crate::cdn::Tier;

pub const FORMAT: &str = "dchannel-corpus/1";

#[derive(Debug, Deserialize)]
struct Manifest {
    format: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    origins: Vec<ManifestOrigin>,
    #[serde(default)]
    objects: Vec<ManifestObject>,
}

#[derive(Debug, Deserialize)]
struct ManifestOrigin {
    host: String,
    #[serde(default)]
    alpn: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct ManifestObject {
    url: String,
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    body: Option<String>,
    size: Option<u64>,
    #[serde(default)]
    think_ms: f64,
    /// CDN tier from the recorded headers; absent: the hit ratio decides at run time.
    #[serde(default)]
    tier: Option<String>,
}

/// One recorded response, ready to serve.
#[derive(Debug)]
pub struct Object {
    pub url: String,
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub think: Duration,
    /// The manifest's CDN tier (`None`: decided by the hit ratio when serving).
    pub tier: Option<Tier>,
}

/// How a request found its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// host + path + query equal.
    Exact,
    /// host + path equal, query ignored.
    PathOnly,
}

impl Match {
    pub fn as_str(self) -> &'static str {
        match self {
            Match::Exact => "exact",
            Match::PathOnly => "path",
        }
    }
}

#[derive(Debug, Default)]
pub struct Corpus {
    pub name: String,
    pub objects: Vec<Object>,
    /// Per-origin ALPN lists from the manifest (lower-case host → protocols).
    pub alpn: HashMap<String, Vec<String>>,
    /// host → (normalised path?query → object index)
    exact: HashMap<String, HashMap<String, usize>>,
    /// host → (normalised path → first object with that path)
    by_path: HashMap<String, HashMap<String, usize>>,
    /// Hosts that have at least one object.
    pub hosts: Vec<String>,
    pub body_bytes: u64,
}

/// Headers the server recomputes (besides the connection-specific ones,
/// `dchannel_base::http::HOP_BY_HOP`), plus `alt-svc`, which would send browsers
/// looking for an HTTP/3 server that the replay does not run.
const RECOMPUTED_HEADERS: &[&str] = &["content-length", "content-encoding", "alt-svc"];

impl Corpus {
    /// Loads `<dir>/manifest.json` and every body file it names.
    pub fn load(dir: &Path) -> Result<Self> {
        let manifest_path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&manifest_path)
            .with_context(|| format!("cannot read corpus manifest {}", manifest_path.display()))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: invalid manifest JSON: {e}",
                manifest_path.display(),
                e.line(),
                e.column()
            )
        })?;
        build(manifest, dir, &manifest_path)
    }

    /// Finds the object for `host` + `path` + `query`: exact first, then ignoring the query.
    pub fn lookup(&self, host: &str, path: &str, query: Option<&str>) -> Option<(&Object, Match)> {
        let path_n = normalize(path);
        if let Some(table) = self.exact.get(host) {
            let key = match query {
                Some(q) => format!("{path_n}?{}", normalize(q)),
                None => path_n.clone(),
            };
            if let Some(&i) = table.get(&key) {
                return Some((&self.objects[i], Match::Exact));
            }
        }
        let i = *self.by_path.get(host)?.get(&path_n)?;
        Some((&self.objects[i], Match::PathOnly))
    }
}

fn build(manifest: Manifest, dir: &Path, manifest_path: &Path) -> Result<Corpus> {
    let mp = manifest_path.display();
    if manifest.format != FORMAT {
        bail!(
            "{mp}: field `format` is {:?}, expected {FORMAT:?}",
            manifest.format
        );
    }
    let mut corpus = Corpus {
        name: manifest.name,
        ..Corpus::default()
    };
    for (i, o) in manifest.origins.iter().enumerate() {
        let host = o.host.to_ascii_lowercase();
        if let Some(alpn) = &o.alpn {
            crate::certs::validate_alpn(alpn, &format!("{mp}: origins[{i}].alpn ({host})"))?;
            corpus.alpn.insert(host, alpn.clone());
        }
    }
    let mut bodies: HashMap<PathBuf, Bytes> = HashMap::new();
    for (i, o) in manifest.objects.into_iter().enumerate() {
        let at = format!("{mp}: objects[{i}] ({})", o.url);
        let (host, path, query) =
            split_url(&o.url).map_err(|why| anyhow::anyhow!("{at}: field `url`: {why}"))?;
        let status = StatusCode::from_u16(o.status)
            .ok()
            .filter(|s| !s.is_informational())
            .ok_or_else(|| {
                anyhow::anyhow!("{at}: field `status` is {}, expected 200-599", o.status)
            })?;
        if !o.think_ms.is_finite() || o.think_ms < 0.0 {
            bail!(
                "{at}: field `think_ms` is {}, expected a number >= 0",
                o.think_ms
            );
        }
        let tier = match &o.tier {
            None => None,
            Some(t) => Some(
                t.parse::<Tier>()
                    .map_err(|e| anyhow::anyhow!("{at}: field `tier`: {e}"))?,
            ),
        };
        let body = match &o.body {
            None => Bytes::new(),
            Some(rel) => {
                let path = dir.join(rel);
                if let Some(b) = bodies.get(&path) {
                    b.clone()
                } else {
                    let data = std::fs::read(&path).map_err(|e| {
                        anyhow::anyhow!(
                            "{at}: field `body`: cannot read body file {}: {e}",
                            path.display()
                        )
                    })?;
                    let b = Bytes::from(data);
                    corpus.body_bytes += b.len() as u64;
                    bodies.insert(path, b.clone());
                    b
                }
            }
        };
        if let Some(size) = o.size {
            if size != body.len() as u64 {
                tracing::warn!(object = i, url = %o.url, size, actual = body.len(), "manifest size differs from the body file; serving the file");
            }
        }
        let mut headers = HeaderMap::new();
        for (hi, (name, value)) in o.headers.iter().enumerate() {
            let lname = name.to_ascii_lowercase();
            if is_hop_by_hop(&lname) || RECOMPUTED_HEADERS.contains(&lname.as_str()) {
                continue;
            }
            let hn = HeaderName::from_bytes(lname.as_bytes()).map_err(|_| {
                anyhow::anyhow!("{at}: headers[{hi}]: invalid header name {name:?}")
            })?;
            let hv = HeaderValue::from_str(value).map_err(|_| {
                anyhow::anyhow!("{at}: headers[{hi}] ({name}): invalid header value {value:?}")
            })?;
            headers.append(hn, hv);
        }
        let idx = corpus.objects.len();
        let path_n = normalize(&path);
        let key = match &query {
            Some(q) => format!("{path_n}?{}", normalize(q)),
            None => path_n.clone(),
        };
        if !corpus.exact.contains_key(&host) {
            corpus.hosts.push(host.clone());
        }
        let exact = corpus.exact.entry(host.clone()).or_default();
        if exact.contains_key(&key) {
            // The same URL recorded twice (e.g. shared by two pages): the first one wins.
            tracing::debug!(url = %o.url, "duplicate object URL; keeping the first");
            continue;
        }
        exact.insert(key, idx);
        corpus
            .by_path
            .entry(host)
            .or_default()
            .entry(path_n)
            .or_insert(idx);
        corpus.objects.push(Object {
            url: o.url,
            status,
            headers,
            body,
            think: Duration::from_secs_f64(o.think_ms / 1000.0),
            tier,
        });
    }
    Ok(corpus)
}

/// Splits an absolute `http(s)://host[:port]/path[?query][#frag]` URL into lower-case host,
/// path (at least `/`) and optional query.
fn split_url(url: &str) -> std::result::Result<(String, String, Option<String>), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("expected an absolute http:// or https:// URL")?;
    let rest = rest.split('#').next().unwrap_or("");
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    let host = strip_port(authority).to_ascii_lowercase();
    if host.is_empty() {
        return Err("URL has no host".into());
    }
    let tail = &rest[auth_end..];
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q.to_string())),
        None => (tail, None),
    };
    let path = if path.is_empty() { "/" } else { path };
    Ok((host, path.to_string(), query))
}

/// Removes `:port` from an authority (keeping IPv6 brackets' content intact).
pub fn strip_port(authority: &str) -> &str {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => authority,
    }
}

/// Percent-decodes `%XX` so that `a%20b` in a request matches `a b` or `a%20b` recorded in a
/// manifest (browsers encode what importers may have left raw, and vice versa).
fn normalize(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_urls() {
        assert_eq!(
            split_url("https://WWW.Site.test:8443/a/b.css?x=1&y#frag").unwrap(),
            (
                "www.site.test".into(),
                "/a/b.css".into(),
                Some("x=1&y".into())
            )
        );
        assert_eq!(
            split_url("http://h.test").unwrap(),
            ("h.test".into(), "/".into(), None)
        );
        assert_eq!(
            split_url("https://h.test?q").unwrap(),
            ("h.test".into(), "/".into(), Some("q".into()))
        );
        assert!(split_url("ftp://h.test/").is_err());
        assert!(split_url("https:///x").is_err());
    }

    #[test]
    fn strips_ports() {
        assert_eq!(strip_port("a.test:443"), "a.test");
        assert_eq!(strip_port("a.test"), "a.test");
        assert_eq!(strip_port("[::1]:80"), "::1");
    }

    #[test]
    fn normalizes_percent_escapes() {
        assert_eq!(normalize("/a%20b%2"), "/a b%2");
        assert_eq!(normalize("/x%zz%41"), "/x%zzA");
        assert_eq!(normalize("/plain"), "/plain");
    }

    fn corpus_dir(manifest: &str, bodies: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bodies")).unwrap();
        for (name, data) in bodies {
            std::fs::write(dir.path().join("bodies").join(name), data).unwrap();
        }
        std::fs::write(dir.path().join("manifest.json"), manifest).unwrap();
        dir
    }

    #[test]
    fn lookup_exact_then_path_then_none() {
        let m = r#"{"format":"dchannel-corpus/1","name":"t",
          "origins":[{"host":"a.test","alpn":["http/1.1"]}],
          "objects":[
            {"url":"https://a.test/x?v=1","status":200,"headers":[["Content-Type","text/css"],["Content-Length","99"],["Connection","close"]],"body":"bodies/one","think_ms":5},
            {"url":"https://a.test/x?v=2","status":200,"headers":[],"body":"bodies/two","think_ms":0},
            {"url":"http://a.test/y%20z","status":404,"headers":[],"body":"bodies/one","tier":"origin"}
          ]}"#;
        let dir = corpus_dir(m, &[("one", b"111"), ("two", b"2222")]);
        let c = Corpus::load(dir.path()).unwrap();
        assert_eq!(c.alpn["a.test"], vec!["http/1.1"]);
        assert_eq!(c.body_bytes, 7);
        let (o, how) = c.lookup("a.test", "/x", Some("v=2")).unwrap();
        assert_eq!((&o.body[..], how), (&b"2222"[..], Match::Exact));
        let (o, how) = c.lookup("a.test", "/x", Some("v=9")).unwrap();
        assert_eq!((&o.body[..], how), (&b"111"[..], Match::PathOnly));
        assert_eq!(o.think, Duration::from_millis(5));
        assert_eq!(o.headers.len(), 1, "content-length and connection dropped");
        assert_eq!(o.headers["content-type"], "text/css");
        assert_eq!(o.tier, None, "no tier field: the ratio decides");
        let (o, _) = c.lookup("a.test", "/y z", None).unwrap();
        assert_eq!(o.status, StatusCode::NOT_FOUND);
        assert_eq!(o.tier, Some(Tier::Origin));
        assert!(c.lookup("a.test", "/nope", None).is_none());
        assert!(c.lookup("b.test", "/x", None).is_none());
    }

    #[test]
    fn missing_body_file_names_object_and_file() {
        let m = r#"{"format":"dchannel-corpus/1","objects":[
            {"url":"https://a.test/","status":200,"body":"bodies/absent"}]}"#;
        let dir = corpus_dir(m, &[]);
        let msg = format!("{:#}", Corpus::load(dir.path()).unwrap_err());
        assert!(
            msg.contains("objects[0]") && msg.contains("bodies/absent"),
            "{msg}"
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (r#"{"format":"other/2"}"#, "format"),
            (
                r#"{"format":"dchannel-corpus/1","objects":[{"url":"/rel","status":200}]}"#,
                "url",
            ),
            (
                r#"{"format":"dchannel-corpus/1","objects":[{"url":"https://a/","status":42}]}"#,
                "status",
            ),
            (
                r#"{"format":"dchannel-corpus/1","objects":[{"url":"https://a/","status":200,"think_ms":-1}]}"#,
                "think_ms",
            ),
            (
                r#"{"format":"dchannel-corpus/1","origins":[{"host":"a","alpn":["h3"]}]}"#,
                "alpn",
            ),
            (
                r#"{"format":"dchannel-corpus/1","objects":[{"url":"https://a/","status":200,"headers":[["bad name","x"]]}]}"#,
                "headers[0]",
            ),
            (
                r#"{"format":"dchannel-corpus/1","objects":[{"url":"https://a/","status":200,"tier":"mid"}]}"#,
                "field `tier`: expected edge, parent or origin",
            ),
            (r#"{"format": nope}"#, "invalid manifest JSON"),
        ];
        for (m, want) in cases {
            let dir = corpus_dir(m, &[]);
            let msg = format!("{:#}", Corpus::load(dir.path()).unwrap_err());
            assert!(
                msg.contains(want) && msg.contains("manifest.json"),
                "{want}: {msg}"
            );
        }
    }
}
