//! The agent's TUN device: created blocking (the send thread sleeps in read),
//! then address, MTU and link up (set-up shared with chanemu: dchannel-base).

use anyhow::{Context, Result};
use dchannel_base::tun::{ip, open_queues};
use std::fs::File;

/// Creates TUN `name` (no packet-info prefix) with `queues` queues (one per
/// worker; more than one: a multi-queue device) and returns one descriptor
/// per queue, with checksum and TCP segmentation offload when `offload` and
/// the kernel agrees; the flag says whether every read and write carries a
/// `virtio_net_hdr`.
pub fn create(name: &str, offload: bool, queues: usize) -> Result<(Vec<File>, bool)> {
    let files = |fds: Vec<std::os::fd::OwnedFd>| fds.into_iter().map(File::from).collect();
    if offload {
        match open_queues(name, true, queues) {
            Ok(fds) => return Ok((files(fds), true)),
            Err(e) => tracing::warn!("--tun-offload: {e:#}; running without offloads"),
        }
    }
    Ok((
        files(open_queues(name, false, queues).context("--tun")?),
        false,
    ))
}

/// Assigns `addr` (CIDR), sets the MTU and brings the link up.
pub fn configure(name: &str, addr: &str, mtu: usize) -> Result<()> {
    if !addr.contains(':') {
        // IPv4 tunnel address: no IPv6 link-local address, so the kernel does
        // not send router solicitations / MLD reports into the tunnel (the
        // gateway would drop them as foreign). An IPv6 --tun-addr keeps it.
        ip(&["link", "set", "dev", name, "addrgenmode", "none"])?;
    }
    ip(&["addr", "add", addr, "dev", name])?;
    // A longer queue between the kernel and our reader absorbs bursts (TCP
    // slow start) that the default 500 packets would drop.
    ip(&[
        "link",
        "set",
        "dev",
        name,
        "mtu",
        &mtu.to_string(),
        "txqueuelen",
        "2000",
        "up",
    ])?;
    Ok(())
}

/// Routes each prefix of `routes` into TUN `name` (`ip route replace`, so that a
/// route the operator left, e.g. an old default, is taken over, not an error).
pub fn route(name: &str, routes: &[String]) -> Result<()> {
    for r in routes {
        ip(&["route", "replace", r, "dev", name]).with_context(|| format!("--tun-route {r}"))?;
    }
    Ok(())
}
