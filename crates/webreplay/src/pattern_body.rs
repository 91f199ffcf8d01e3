//! The `GET /bytes/N` body: N bytes where byte i is `i mod 251`, streamed in fixed-size
//! chunks cut (zero-copy) from one shared pattern buffer, so N may be 10^9 without holding
//! N bytes in memory.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// The period of the pattern; prime, so it never aligns with power-of-two chunk sizes.
pub const PERIOD: u64 = 251;
/// Bytes per data frame: big enough to amortise per-frame costs, small enough for h2.
const CHUNK: usize = 64 * 1024;

/// `CHUNK + PERIOD` bytes of the pattern starting at 0: a chunk starting at any phase
/// `p < PERIOD` is the slice `[p, p + CHUNK)`.
fn pattern() -> &'static Bytes {
    static PATTERN: OnceLock<Bytes> = OnceLock::new();
    PATTERN.get_or_init(|| {
        let buf: Vec<u8> = (0..(CHUNK as u64 + PERIOD))
            .map(|i| (i % PERIOD) as u8)
            .collect();
        Bytes::from(buf)
    })
}

/// Streams pattern bytes `pos..end` (absolute offsets: byte k is `k mod 251`).
pub struct PatternBody {
    pos: u64,
    end: u64,
}

impl PatternBody {
    /// The whole `/bytes/N` body.
    pub fn new(len: u64) -> Self {
        Self::range(0, len)
    }

    /// Offsets `start..end` of the pattern (a byte range of `/bytes/N`).
    pub fn range(start: u64, end: u64) -> Self {
        Self {
            pos: start,
            end: end.max(start),
        }
    }
}

impl Body for PatternBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.pos >= this.end {
            return Poll::Ready(None);
        }
        let n = (this.end - this.pos).min(CHUNK as u64) as usize;
        let phase = (this.pos % PERIOD) as usize;
        this.pos += n as u64;
        Poll::Ready(Some(Ok(Frame::data(pattern().slice(phase..phase + n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.pos >= self.end
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.end - self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn streams_exact_pattern_across_chunk_boundaries() {
        // 3 chunks + a partial one: checks phase continuity at every boundary.
        let len = 3 * CHUNK as u64 + 777;
        let got = PatternBody::new(len).collect().await.unwrap().to_bytes();
        assert_eq!(got.len() as u64, len);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, b)| *b == (i as u64 % PERIOD) as u8));
    }

    #[tokio::test]
    async fn range_keeps_absolute_offsets() {
        // Starts mid-period and crosses a chunk boundary: byte at offset k is k mod 251.
        let (start, end) = (1000u64, 1000 + CHUNK as u64 + 5000);
        let got = PatternBody::range(start, end)
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(got.len() as u64, end - start);
        assert_eq!(got[0], (1000 % 251) as u8); // 245
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, b)| *b == ((start + i as u64) % PERIOD) as u8));
    }

    #[tokio::test]
    async fn empty_body_ends_immediately() {
        let body = PatternBody::new(0);
        assert!(body.is_end_stream());
        assert_eq!(body.collect().await.unwrap().to_bytes().len(), 0);
    }
}
