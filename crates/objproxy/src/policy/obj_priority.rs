//! `obj-priority` — HotMobile'21's priority heuristic: only the requests the browser gives
//! the highest priority go over the LLC, everything else over the HBC.
//!
//! The priority is the one Chromium puts on the wire. Chromium derives both its HTTP/2
//! stream priority (HEADERS weight: HIGHEST → 256 exclusive, MEDIUM → 220, LOW → 183,
//! LOWEST → 147, IDLE → 110) and the RFC 9218 `priority` request header it sends on
//! HTTP/2 and HTTP/3 (urgency = HIGHEST − priority: HIGHEST → `u=0`, MEDIUM → `u=1`,
//! LOW → `u=2`, LOWEST → `u=3` = the default, omitted, IDLE → `u=4`; `i` when incremental)
//! from the same request priority, so the two carry the same information. The proxy's
//! HTTP/2 server (hyper over the `h2` crate) does not expose the HEADERS/PRIORITY frame
//! fields (RFC 9113 deprecated that scheme), so the header decides: `u=0` is the highest
//! priority; a request without the header has the default urgency 3 (RFC 9218 §4.1).

use http::header::HeaderMap;

use super::{Channel, Decision, Reason};

/// RFC 9218 urgency of a request without a `priority` header (or with an invalid `u`).
pub const DEFAULT_URGENCY: u8 = 3;
/// The urgency that goes over the LLC.
pub const HIGHEST_URGENCY: u8 = 0;

/// The RFC 9218 priority parameters of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// 0 (most urgent) ..= 7.
    pub urgency: u8,
    /// The response can be used as it arrives (images, documents).
    pub incremental: bool,
}

impl Default for Priority {
    fn default() -> Self {
        Priority {
            urgency: DEFAULT_URGENCY,
            incremental: false,
        }
    }
}

/// The priority of a request from its `priority` header fields (several fields are one
/// comma-separated list, RFC 9110 §5.3).
///
/// The value is an RFC 8941 dictionary; only the two keys RFC 9218 defines are read, with
/// its rules: `u` must be an integer 0..=7 and `i` a boolean (`?1`, `?0`, or the bare key
/// for true), otherwise the member is ignored; parameters (`;x=y`) and unknown keys are
/// ignored; a later member of the same key overrides an earlier one. Hand-written rather
/// than a general structured-field parser: two keys with integer/boolean values, and an
/// unparseable member must degrade to the default rather than reject the request.
pub fn of_headers(headers: &HeaderMap) -> Priority {
    let mut p = Priority::default();
    for value in headers.get_all("priority") {
        let Ok(v) = value.to_str() else { continue };
        for member in v.split(',') {
            let member = member.split(';').next().unwrap_or("").trim();
            let (key, val) = match member.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (member, None),
            };
            match (key, val) {
                ("u", Some(n)) => {
                    if let Ok(u) = n.parse::<u8>() {
                        if u <= 7 && n.bytes().all(|b| b.is_ascii_digit()) {
                            p.urgency = u;
                        }
                    }
                }
                ("i", None | Some("?1")) => p.incremental = true,
                ("i", Some("?0")) => p.incremental = false,
                _ => {}
            }
        }
    }
    p
}

/// LLC for the highest urgency, HBC for everything else.
pub fn decide(p: Priority) -> Decision {
    if p.urgency == HIGHEST_URGENCY {
        Decision::new(Channel::Llc, Reason::HighestPriority)
    } else {
        Decision::new(Channel::Hbc, Reason::LowerPriority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    /// Request headers as Chromium's network stack writes them for Blink's priority of
    /// each resource type (net/spdy/spdy_http_utils.cc + quic::SerializePriorityFieldValue:
    /// default urgency 3 and non-incremental are omitted, so an image at Low gets `i`).
    fn chromium(kind: &str) -> HeaderMap {
        let pairs: &[(&str, &str)] = match kind {
            // Navigation: VeryHigh (HIGHEST), incremental.
            "document" => &[
                ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"),
                ("sec-fetch-dest", "document"),
                ("sec-fetch-mode", "navigate"),
                ("upgrade-insecure-requests", "1"),
                ("priority", "u=0, i"),
            ],
            // Render-blocking stylesheet: VeryHigh.
            "css" => &[
                ("accept", "text/css,*/*;q=0.1"),
                ("sec-fetch-dest", "style"),
                ("sec-fetch-mode", "no-cors"),
                ("priority", "u=0"),
            ],
            // Font: VeryHigh.
            "font" => &[
                ("accept", "*/*"),
                ("sec-fetch-dest", "font"),
                ("sec-fetch-mode", "cors"),
                ("priority", "u=0"),
            ],
            // Parser-blocking script in <head>: High (MEDIUM).
            "sync-script" => &[
                ("accept", "*/*"),
                ("sec-fetch-dest", "script"),
                ("sec-fetch-mode", "no-cors"),
                ("priority", "u=1"),
            ],
            // fetch()/XHR: High, incremental.
            "fetch" => &[
                ("accept", "*/*"),
                ("sec-fetch-dest", "empty"),
                ("sec-fetch-mode", "cors"),
                ("priority", "u=1, i"),
            ],
            // Image outside the viewport: Low (LOWEST, urgency 3 omitted), incremental.
            "image" => &[
                ("accept", "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"),
                ("sec-fetch-dest", "image"),
                ("sec-fetch-mode", "no-cors"),
                ("priority", "i"),
            ],
            // async script: Low, not incremental → no header at all.
            "async-script" => &[("accept", "*/*"), ("sec-fetch-dest", "script")],
            _ => unreachable!("{kind}"),
        };
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn chromium_request_priorities_map_to_channels() {
        for (kind, urgency, incremental, ch) in [
            ("document", 0, true, Channel::Llc),
            ("css", 0, false, Channel::Llc),
            ("font", 0, false, Channel::Llc),
            ("sync-script", 1, false, Channel::Hbc),
            ("fetch", 1, true, Channel::Hbc),
            ("image", 3, true, Channel::Hbc),
            ("async-script", 3, false, Channel::Hbc),
        ] {
            let p = of_headers(&chromium(kind));
            assert_eq!(
                p,
                Priority {
                    urgency,
                    incremental
                },
                "{kind}"
            );
            assert_eq!(decide(p).channel, ch, "{kind}");
        }
        assert_eq!(
            decide(of_headers(&chromium("css"))).reason,
            Reason::HighestPriority
        );
        assert_eq!(
            decide(of_headers(&chromium("image"))).reason,
            Reason::LowerPriority
        );
    }

    #[test]
    fn rfc9218_parsing_rules() {
        let p = |vals: &[&str]| {
            let mut h = HeaderMap::new();
            for v in vals {
                h.append("priority", HeaderValue::from_str(v).unwrap());
            }
            of_headers(&h)
        };
        assert_eq!(p(&[]), Priority::default());
        assert_eq!(p(&["u=0"]).urgency, 0);
        // Out of range, non-integer, negative: ignored, the default stays.
        assert_eq!(p(&["u=8"]).urgency, 3);
        assert_eq!(p(&["u=1.0"]).urgency, 3);
        assert_eq!(p(&["u=-1"]).urgency, 3);
        assert_eq!(p(&["u=+0"]).urgency, 3);
        // Parameters and unknown keys ignored; spaces allowed around members.
        assert_eq!(p(&["u=0;x=1,  foo=bar"]).urgency, 0);
        // Later member wins, also across fields.
        assert_eq!(p(&["u=0, u=5"]).urgency, 5);
        assert_eq!(p(&["u=4", "u=0"]).urgency, 0);
        // Booleans.
        assert!(p(&["i"]).incremental);
        assert!(p(&["i=?1"]).incremental);
        assert!(!p(&["i, i=?0"]).incremental);
        assert!(!p(&["i=1"]).incremental, "not a boolean: ignored");
    }
}
