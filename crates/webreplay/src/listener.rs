//! Listening sockets: plain TCP or MPTCP (IPPROTO_MPTCP, so MPTCP clients get MPTCP and
//! plain TCP clients fall back transparently), and UDP for QUIC, with IP_FREEBIND so binding
//! never depends on routing.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, Socket, Type};

/// `IPPROTO_MPTCP` from linux/in.h (not exported by every libc version).
pub const IPPROTO_MPTCP: i32 = 262;

pub fn bind(addr: SocketAddr, mptcp: bool, backlog: i32) -> Result<tokio::net::TcpListener> {
    let domain = Domain::for_address(addr);
    let proto = if mptcp {
        Protocol::from(IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let sock = Socket::new(domain, Type::STREAM, Some(proto)).map_err(|e| {
        if mptcp {
            anyhow::anyhow!(
                "cannot create an MPTCP socket for {addr}: {e} (is MPTCP enabled? check `sysctl net.mptcp.enabled`)"
            )
        } else {
            anyhow::anyhow!("cannot create a TCP socket for {addr}: {e}")
        }
    })?;
    sock.set_reuse_address(true)
        .with_context(|| format!("SO_REUSEADDR on {addr}"))?;
    // Best effort: older kernels reject IP_FREEBIND on MPTCP sockets, and the addresses are
    // normally configured on an interface anyway.
    freebind(&sock, addr);
    sock.set_nonblocking(true)
        .with_context(|| format!("O_NONBLOCK on {addr}"))?;
    sock.bind(&addr.into())
        .with_context(|| format!("cannot bind {addr}"))?;
    sock.listen(backlog)
        .with_context(|| format!("cannot listen on {addr}"))?;
    tokio::net::TcpListener::from_std(sock.into()).with_context(|| format!("registering {addr}"))
}

/// A UDP socket bound to `addr` (IP_FREEBIND like the TCP listeners) for a QUIC endpoint.
pub fn bind_udp(addr: SocketAddr) -> Result<std::net::UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| anyhow::anyhow!("cannot create a UDP socket for {addr}: {e}"))?;
    freebind(&sock, addr);
    sock.bind(&addr.into())
        .with_context(|| format!("cannot bind UDP {addr}"))?;
    Ok(sock.into())
}

/// IP_FREEBIND (and IPV6_V6ONLY for IPv6) on a socket about to bind `addr`, best effort.
fn freebind(sock: &Socket, addr: SocketAddr) {
    warn_if_not_local(addr);
    let set = if addr.is_ipv4() {
        sock.set_freebind(true)
    } else {
        sock.set_only_v6(true)
            .and_then(|_| sock.set_freebind_ipv6(true))
    };
    if let Err(e) = set {
        tracing::debug!(%addr, "IP_FREEBIND not set: {e}");
    }
}

/// IP_FREEBIND makes binding succeed even for an address no interface has; say so, because
/// such a listener is READY yet unreachable.
fn warn_if_not_local(addr: SocketAddr) {
    let probe = SocketAddr::new(addr.ip(), 0);
    if let Err(e) = std::net::UdpSocket::bind(probe) {
        if e.kind() == std::io::ErrorKind::AddrNotAvailable {
            tracing::warn!(%addr, "address is not configured on any interface here; listening anyway (IP_FREEBIND)");
        }
    }
}
