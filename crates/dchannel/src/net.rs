//! The per-channel UDP sockets.

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{SocketAddr, UdpSocket};

/// A UDP socket bound to `local`, and to device `dev` (SO_BINDTODEVICE) if given.
pub fn channel_socket(local: SocketAddr, dev: Option<&str>, what: &str) -> Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .with_context(|| format!("{what}: creating UDP socket"))?;
    if let Some(dev) = dev {
        s.bind_device(Some(dev.as_bytes()))
            .with_context(|| format!("{what}: SO_BINDTODEVICE {dev}"))?;
    }
    // Large buffers: bursts from the TUN must not be dropped at the socket.
    let _ = s.set_recv_buffer_size(4 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    s.bind(&local.into())
        .with_context(|| format!("{what}: binding {local}"))?;
    Ok(s.into())
}
