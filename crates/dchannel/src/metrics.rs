//! Minimal HTTP endpoint serving the Prometheus text format on any path.

use crate::stats::Stats;
use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

pub fn serve(addr: SocketAddr, stats: Arc<Stats>) -> Result<()> {
    let listener = TcpListener::bind(addr).with_context(|| format!("--metrics-addr {addr}"))?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
                let mut req = [0u8; 1024];
                let _ = c.read(&mut req);
                let body = stats.to_prometheus();
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    body.len(),
                    body
                );
            }
        })?;
    Ok(())
}
