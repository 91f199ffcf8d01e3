//! The per-channel UDP sockets.

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{SocketAddr, UdpSocket};

/// A UDP socket bound to `local`, and to device `dev` (SO_BINDTODEVICE) if
/// given; with `reuse_port`, one of a group of sockets on that address
/// (SO_REUSEPORT, reuseport.rs).
pub fn channel_socket(
    local: SocketAddr,
    dev: Option<&str>,
    what: &str,
    reuse_port: bool,
) -> Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .with_context(|| format!("{what}: creating UDP socket"))?;
    if reuse_port {
        s.set_reuse_port(true)
            .with_context(|| format!("{what}: SO_REUSEPORT"))?;
    }
    if let Some(dev) = dev {
        s.bind_device(Some(dev.as_bytes()))
            .with_context(|| format!("{what}: SO_BINDTODEVICE {dev}"))?;
    }
    // Large buffers: bursts must not be dropped at the socket. As root the
    // FORCE variants bypass net.core.rmem_max/wmem_max (often 208 KiB).
    force_buffer(&s, libc::SO_RCVBUFFORCE, 4 << 20);
    force_buffer(&s, libc::SO_SNDBUFFORCE, 4 << 20);
    if s.recv_buffer_size().unwrap_or(0) < (1 << 20) {
        let _ = s.set_recv_buffer_size(4 << 20);
        let _ = s.set_send_buffer_size(4 << 20);
    }
    s.bind(&local.into())
        .with_context(|| format!("{what}: binding {local}"))?;
    Ok(s.into())
}

fn force_buffer(s: &Socket, opt: libc::c_int, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the right size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
