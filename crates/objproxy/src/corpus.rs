//! Object sizes from a page corpus manifest (docs/formats.md, `dchannel-corpus/1`) for the
//! `obj-oracle` policy. Matching follows webreplay: host + path + query exactly, then
//! host + path ignoring the query.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Deserialize)]
struct Manifest {
    format: String,
    objects: Vec<Object>,
}

#[derive(Deserialize)]
struct Object {
    url: String,
    size: u64,
}

/// Object sizes by host + path(+query).
#[derive(Debug, Default, Clone)]
pub struct SizeOracle {
    exact: HashMap<String, u64>,
    no_query: HashMap<String, u64>,
}

/// `https://Host:443/a?b` → (`host`, `/a?b`). Default ports are dropped so the proxy's
/// view of an origin (from CONNECT host:443) matches the manifest's URL.
fn split_url(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Some((normalize_host(scheme, auth), path))
}

/// Lower-cased authority without the scheme's default port.
pub fn normalize_host(scheme: &str, authority: &str) -> String {
    let a = authority.to_ascii_lowercase();
    let default = if scheme.eq_ignore_ascii_case("https") {
        ":443"
    } else {
        ":80"
    };
    a.strip_suffix(default).map(str::to_string).unwrap_or(a)
}

impl SizeOracle {
    /// Load `<dir>/manifest.json`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading corpus manifest {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("corpus manifest {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let m: Manifest = serde_json::from_str(text).context("expected dchannel-corpus/1 JSON")?;
        if m.format != "dchannel-corpus/1" {
            bail!(
                "field `format`: expected \"dchannel-corpus/1\", found {:?}",
                m.format
            );
        }
        let mut o = SizeOracle::default();
        for (i, obj) in m.objects.iter().enumerate() {
            let (host, path) = split_url(&obj.url).with_context(|| {
                format!(
                    "objects[{i}].url: expected an absolute URL, found {:?}",
                    obj.url
                )
            })?;
            let bare = path.split('?').next().unwrap_or("/").to_string();
            o.no_query
                .entry(format!("{host}{bare}"))
                .or_insert(obj.size);
            o.exact.insert(format!("{host}{path}"), obj.size);
        }
        Ok(o)
    }

    /// The size of `scheme://authority/path_and_query`, if the corpus has it.
    pub fn size(&self, scheme: &str, authority: &str, path_and_query: &str) -> Option<u64> {
        let host = normalize_host(scheme, authority);
        if let Some(&s) = self.exact.get(&format!("{host}{path_and_query}")) {
            return Some(s);
        }
        let bare = path_and_query.split('?').next().unwrap_or("/");
        self.no_query.get(&format!("{host}{bare}")).copied()
    }

    pub fn len(&self) -> usize {
        self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = r#"{"format":"dchannel-corpus/1","name":"t","source":"x","origins":[],
      "pages":[],"objects":[
        {"url":"https://www.site0.test/","page":"p","status":200,"headers":[],"body":"b","size":5120,"think_ms":0},
        {"url":"https://cdn.site0.test/a.js?v=1","page":"p","status":200,"headers":[],"body":"b","size":300,"think_ms":0},
        {"url":"http://img.test:8080/x.png","page":"p","status":200,"headers":[],"body":"b","size":77,"think_ms":0}]}"#;

    #[test]
    fn looks_up_like_webreplay() {
        let o = SizeOracle::parse(M).unwrap();
        assert_eq!(o.size("https", "www.site0.test:443", "/"), Some(5120));
        assert_eq!(o.size("https", "CDN.site0.test", "/a.js?v=1"), Some(300));
        // Different query → host + path match.
        assert_eq!(o.size("https", "cdn.site0.test", "/a.js?v=2"), Some(300));
        assert_eq!(o.size("http", "img.test:8080", "/x.png"), Some(77));
        assert_eq!(o.size("https", "www.site0.test", "/missing"), None);
    }

    #[test]
    fn rejects_bad_manifests() {
        let e = SizeOracle::parse(r#"{"format":"other","objects":[]}"#).unwrap_err();
        assert!(format!("{e:#}").contains("dchannel-corpus/1"), "{e:#}");
        let e = SizeOracle::parse(
            r#"{"format":"dchannel-corpus/1","objects":[{"url":"nope","size":1}]}"#,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("objects[0].url"), "{e:#}");
    }
}
