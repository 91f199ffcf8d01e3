//! An upstream TCP stream that counts its bytes per channel and feeds TCP_INFO SRTT
//! samples to the channel's estimate; its drop closes the connection's slot in the stats.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::policy::Channel;
use crate::proxy::Shared;
use crate::tcpinfo;

/// How often a busy connection reports its SRTT.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

pub struct MeteredStream {
    inner: TcpStream,
    ch: Channel,
    shared: Arc<Shared>,
    last_sample: Instant,
}

impl MeteredStream {
    /// Wrap a freshly connected stream; counts it as an open connection of `ch`.
    pub fn new(inner: TcpStream, ch: Channel, shared: Arc<Shared>) -> Self {
        let c = shared.stats.ch(ch);
        c.connections_opened.fetch_add(1, Relaxed);
        c.connections_open.fetch_add(1, Relaxed);
        let mut s = MeteredStream {
            inner,
            ch,
            shared,
            last_sample: Instant::now(),
        };
        // The handshake already gave the kernel its first RTT sample.
        s.sample();
        s
    }

    fn sample(&mut self) {
        self.last_sample = Instant::now();
        if let Some(rtt) = tcpinfo::srtt_ms(self.inner.as_raw_fd()) {
            self.shared.on_srtt(self.ch, rtt);
        }
    }
}

impl Drop for MeteredStream {
    fn drop(&mut self) {
        self.shared
            .stats
            .ch(self.ch)
            .connections_open
            .fetch_sub(1, Relaxed);
    }
}

impl AsyncRead for MeteredStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.shared
                .stats
                .ch(self.ch)
                .wire_rx_bytes
                .fetch_add(n as u64, Relaxed);
            if self.last_sample.elapsed() >= SAMPLE_EVERY {
                self.sample();
            }
        }
        r
    }
}

impl AsyncWrite for MeteredStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.shared
                .stats
                .ch(self.ch)
                .wire_tx_bytes
                .fetch_add(n as u64, Relaxed);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
