//! RFC 9110 §14 single byte-range requests, sans-I/O: a `Range` header value and the
//! representation's length in, what to send out.
//!
//! Only one range is honoured. Multi-range requests would need `multipart/byteranges`;
//! the RFC lets a server ignore `Range` entirely (§14.2), so those — and anything
//! malformed — get the full `200` response.

/// What to send for a `GET` with a `Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Ignore `Range`: the whole representation with `200`.
    Full,
    /// `206` with bytes `first..=last` (inclusive, both `< total`).
    Partial { first: u64, last: u64 },
    /// `416` with `Content-Range: bytes */TOTAL`.
    Unsatisfiable,
}

impl Decision {
    /// `Content-Range` value for a 206 / 416 response.
    pub fn content_range(self, total: u64) -> Option<String> {
        match self {
            Decision::Full => None,
            Decision::Partial { first, last } => Some(format!("bytes {first}-{last}/{total}")),
            Decision::Unsatisfiable => Some(format!("bytes */{total}")),
        }
    }
}

/// Decides how to answer `Range: <header>` for a representation of `total` bytes.
///
/// Grammar (RFC 9110 §14.1.2): `bytes=` then one `first-last`, `first-` or `-suffix`, with
/// optional whitespace around the spec; the unit is case-insensitive.
/// - `A-B` with `B < A`, a non-number, an empty spec, a comma (several ranges) or another
///   unit → [`Decision::Full`] (invalid ranges are ignored, §14.2).
/// - `A-B`/`A-` with `A ≥ total`, or `-0` → [`Decision::Unsatisfiable`] (§14.1.1: no
///   satisfiable range). An empty representation satisfies no range.
/// - `B ≥ total` is clamped to `total − 1`; a suffix longer than `total` selects it all.
pub fn decide(header: &str, total: u64) -> Decision {
    let Some((unit, spec)) = header.split_once('=') else {
        return Decision::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
        return Decision::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Decision::Full;
    };
    let num = |s: &str| -> Option<u64> {
        // u64::parse accepts a leading '+'; the grammar is 1*DIGIT.
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (a.is_empty(), b.is_empty()) {
        // `-N`: the last N bytes.
        (true, false) => match num(b) {
            None => Decision::Full,
            Some(0) => Decision::Unsatisfiable,
            Some(_) if total == 0 => Decision::Unsatisfiable,
            Some(n) => Decision::Partial {
                first: total.saturating_sub(n),
                last: total - 1,
            },
        },
        // `A-`: from A to the end.
        (false, true) => match num(a) {
            None => Decision::Full,
            Some(first) if first >= total => Decision::Unsatisfiable,
            Some(first) => Decision::Partial {
                first,
                last: total - 1,
            },
        },
        // `A-B`.
        (false, false) => match (num(a), num(b)) {
            (Some(first), Some(last)) if last >= first => {
                if first >= total {
                    Decision::Unsatisfiable
                } else {
                    Decision::Partial {
                        first,
                        last: last.min(total - 1),
                    }
                }
            }
            _ => Decision::Full,
        },
        (true, true) => Decision::Full,
    }
}

#[cfg(test)]
mod tests {
    use super::Decision::*;
    use super::*;

    #[test]
    fn first_last_and_open_ranges() {
        // The objproxy probe then the rest, on a 5000 B object (docs/objproxy.md "Size discovery").
        assert_eq!(
            decide("bytes=0-999", 5000),
            Partial {
                first: 0,
                last: 999
            }
        );
        assert_eq!(
            decide("bytes=1000-", 5000),
            Partial {
                first: 1000,
                last: 4999
            }
        );
        // Last position past the end is clamped (RFC 9110 §14.1.2).
        assert_eq!(
            decide("bytes=0-999", 300),
            Partial {
                first: 0,
                last: 299
            }
        );
        assert_eq!(
            decide(" Bytes = 4999-4999 ", 5000),
            Partial {
                first: 4999,
                last: 4999
            }
        );
        assert_eq!(
            decide("bytes=0-999", 5000).content_range(5000).unwrap(),
            "bytes 0-999/5000"
        );
    }

    #[test]
    fn suffix_ranges() {
        assert_eq!(
            decide("bytes=-500", 5000),
            Partial {
                first: 4500,
                last: 4999
            }
        );
        // A suffix longer than the representation selects all of it.
        assert_eq!(
            decide("bytes=-9000", 5000),
            Partial {
                first: 0,
                last: 4999
            }
        );
        assert_eq!(decide("bytes=-0", 5000), Unsatisfiable);
        assert_eq!(decide("bytes=-10", 0), Unsatisfiable);
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(decide("bytes=5000-", 5000), Unsatisfiable);
        assert_eq!(decide("bytes=5000-6000", 5000), Unsatisfiable);
        assert_eq!(decide("bytes=0-999", 0), Unsatisfiable);
        assert_eq!(Unsatisfiable.content_range(5000).unwrap(), "bytes */5000");
    }

    #[test]
    fn malformed_and_multi_range_are_ignored() {
        for h in [
            "bytes=0-1,5-6",
            "bytes=5-1",
            "bytes=-",
            "bytes=",
            "bytes=a-b",
            "bytes=+1-2",
            "bytes=0x10-",
            "items=0-1",
            "0-999",
            "bytes=99999999999999999999-",
        ] {
            assert_eq!(decide(h, 5000), Full, "{h}");
        }
    }
}
