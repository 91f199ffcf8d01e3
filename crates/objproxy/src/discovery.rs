//! IANS size discovery, sans-I/O: the proxy first asks for `Range: bytes=0-999` on the
//! lower-latency channel and learns the total from `Content-Range`; this module turns
//! that first response into the next step.

/// First request of every discoverable object: the first 1000 bytes.
pub const PROBE_RANGE: &str = "bytes=0-999";
/// The probe's length; objects of at most this size are done after the probe.
pub const PROBE_LEN: u64 = 1000;
/// The second request, for objects larger than the probe.
pub const REST_RANGE: &str = "bytes=1000-";

/// A parsed `Content-Range: bytes START-END/TOTAL` (RFC 9110 §14.4); `TOTAL` may be `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRange {
    pub start: u64,
    pub end: u64,
    pub total: Option<u64>,
}

/// Parse a `Content-Range` value. `bytes */N` (unsatisfied range) yields `None`.
pub fn parse_content_range(v: &str) -> Option<ContentRange> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let (s, e) = range.trim().split_once('-')?;
    let start: u64 = s.trim().parse().ok()?;
    let end: u64 = e.trim().parse().ok()?;
    if end < start {
        return None;
    }
    let total = match total.trim() {
        "*" => None,
        t => {
            let t: u64 = t.parse().ok()?;
            if end >= t {
                return None;
            }
            Some(t)
        }
    };
    Some(ContentRange { start, end, total })
}

/// What to do after the probe response arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The probe carried the whole object (`total` ≤ 1000 B): answer the browser with
    /// 200 and `total` bytes.
    Complete { total: u64 },
    /// Fetch `bytes=1000-` on the policy's channel for an object of `total` bytes and
    /// stitch it behind the probe's body.
    FetchRest { total: u64 },
    /// 206 without a known total (`bytes 0-999/*`): the size stays unknown, so the rest
    /// comes over the lower-latency channel, stitched, without a Content-Length.
    RestUnknownSize,
    /// The origin ignored the range (200) or the response is not a range answer
    /// (redirect, 404, 304, ...): forward it as it is — it already travels over the
    /// lower-latency channel (IANS' fallback).
    PassThrough,
    /// 416 (e.g. an empty object): refetch without a range on the lower-latency channel.
    Refetch,
}

/// Classify the probe response from its status and `Content-Range` header.
pub fn on_probe_response(status: u16, content_range: Option<&str>) -> ProbeOutcome {
    match status {
        206 => match content_range.and_then(parse_content_range) {
            Some(ContentRange {
                start: 0,
                total: Some(total),
                ..
            }) if total <= PROBE_LEN => ProbeOutcome::Complete { total },
            Some(ContentRange {
                start: 0,
                end,
                total: Some(total),
            }) if end + 1 == PROBE_LEN => ProbeOutcome::FetchRest { total },
            Some(ContentRange {
                start: 0,
                end,
                total: None,
            }) if end + 1 == PROBE_LEN => ProbeOutcome::RestUnknownSize,
            // A 206 for some other range than asked: we cannot stitch it; ask again whole.
            _ => ProbeOutcome::Refetch,
        },
        416 => ProbeOutcome::Refetch,
        _ => ProbeOutcome::PassThrough,
    }
}

/// How the rest response must be used: 206 `bytes 1000-...` is appended as is; a 200
/// (full body, range ignored this time) is appended after skipping the first 1000 bytes.
pub fn rest_skip(status: u16, content_range: Option<&str>) -> Option<u64> {
    match status {
        206 => match content_range.and_then(parse_content_range) {
            Some(cr) if cr.start == PROBE_LEN => Some(0),
            _ => None,
        },
        200 => Some(PROBE_LEN),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProbeOutcome::{Complete, FetchRest, PassThrough, Refetch, RestUnknownSize};

    /// The outcome of a 206 probe answer with this Content-Range.
    fn partial(content_range: &str) -> ProbeOutcome {
        on_probe_response(206, Some(content_range))
    }

    #[test]
    fn parses_content_range() {
        let bytes_0_999 = |total| ContentRange {
            start: 0,
            end: 999,
            total,
        };
        assert_eq!(
            parse_content_range("bytes 0-999/5000"),
            Some(bytes_0_999(Some(5000)))
        );
        assert_eq!(
            parse_content_range("bytes 0-999/*"),
            Some(bytes_0_999(None))
        );
        assert_eq!(parse_content_range("bytes */0"), None);
        assert_eq!(parse_content_range("bytes 5-3/10"), None);
        assert_eq!(parse_content_range("bytes 0-10/10"), None);
        assert_eq!(parse_content_range("items 0-1/2"), None);
    }

    #[test]
    fn small_object_is_complete_after_probe() {
        // 500 B object: the server answers 206 bytes 0-499/500.
        assert_eq!(partial("bytes 0-499/500"), Complete { total: 500 });
        // Exactly 1000 B.
        assert_eq!(partial("bytes 0-999/1000"), Complete { total: 1000 });
    }

    #[test]
    fn large_object_needs_the_rest() {
        assert_eq!(partial("bytes 0-999/1001"), FetchRest { total: 1001 });
        assert_eq!(partial("bytes 0-999/*"), RestUnknownSize);
    }

    #[test]
    fn no_range_support_passes_through() {
        assert_eq!(on_probe_response(200, None), PassThrough);
        assert_eq!(on_probe_response(404, None), PassThrough);
        assert_eq!(on_probe_response(416, Some("bytes */0")), Refetch);
        assert_eq!(partial("bytes 10-999/5000"), Refetch);
        assert_eq!(on_probe_response(206, None), Refetch);
    }

    #[test]
    fn rest_skip_handles_ignored_range() {
        assert_eq!(rest_skip(206, Some("bytes 1000-4999/5000")), Some(0));
        assert_eq!(rest_skip(200, None), Some(1000));
        assert_eq!(rest_skip(206, Some("bytes 0-4999/5000")), None);
        assert_eq!(rest_skip(500, None), None);
    }
}
