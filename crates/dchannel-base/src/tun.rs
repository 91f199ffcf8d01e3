//! TUN devices (`IFF_TUN | IFF_NO_PI`: raw IP packets, no prefix, or with
//! offloads a `virtio_net_hdr` prefix) through the
//! raw ioctl, and the `ip` (iproute2) calls that configure them. The agent and
//! the emulator open their devices here.

use anyhow::{bail, Context, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

/// Creates TUN device `name` (1 to 15 bytes) in the caller's namespace and
/// returns its descriptor, non-blocking if asked (close-on-exec always).
pub fn open(name: &str, nonblocking: bool) -> Result<OwnedFd> {
    open_with(name, nonblocking, 0)
}

/// `IFF_VNET_HDR`: every read and write starts with a 10-byte `virtio_net_hdr`.
const IFF_VNET_HDR: libc::c_int = 0x4000;
/// `TUNSETOFFLOAD` = `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// Offloads the reader takes on: partial checksums and TCP super-packets (v4, v6,
/// with ECN).
const TUN_F_CSUM_TSO: libc::c_ulong = 0x01 | 0x02 | 0x04 | 0x08;

/// Like [`open`], with checksum and TCP segmentation offload: the kernel may hand
/// over partial checksums and TCP super-packets of up to 64 KiB, each read and
/// write starts with a `virtio_net_hdr` (`dchannel_core::gso` makes packets of
/// them). Fails where the kernel refuses the offloads.
pub fn open_offload(name: &str, nonblocking: bool) -> Result<OwnedFd> {
    set_offload(open_with(name, nonblocking, IFF_VNET_HDR)?, name)
}

/// Turns the offloads on for `fd` (a queue of TUN `name` opened with `IFF_VNET_HDR`).
fn set_offload(fd: OwnedFd, name: &str) -> Result<OwnedFd> {
    // SAFETY: TUNSETOFFLOAD takes its flags by value.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, TUN_F_CSUM_TSO) } < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("TUNSETOFFLOAD (checksum, TSO) on {name}"));
    }
    Ok(fd)
}

/// `IFF_MULTI_QUEUE`: one descriptor per queue; the kernel spreads the packets
/// it hands over among the queues by flow (a flow stays on one queue).
const IFF_MULTI_QUEUE: libc::c_int = 0x0100;

/// `queues` descriptors of one TUN device `name` (created by the first):
/// with 1, [`open`] or [`open_offload`]; with more, a multi-queue device, each
/// descriptor a queue of its own, for one reader thread each.
pub fn open_queues(name: &str, offload: bool, queues: usize) -> Result<Vec<OwnedFd>> {
    let multi = if queues > 1 { IFF_MULTI_QUEUE } else { 0 };
    (0..queues.max(1))
        .map(|_| {
            if offload {
                set_offload(open_with(name, false, IFF_VNET_HDR | multi)?, name)
            } else {
                open_with(name, false, multi)
            }
        })
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("{name}: {queues} queue(s)"))
}

fn open_with(name: &str, nonblocking: bool, extra_flags: libc::c_int) -> Result<OwnedFd> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        bail!("interface name {name:?}: expected 1 to 15 bytes");
    }
    let flags = libc::O_RDWR | libc::O_CLOEXEC | if nonblocking { libc::O_NONBLOCK } else { 0 };
    // SAFETY: plain open(2) of a NUL-terminated path.
    let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), flags) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error())
            .context("opening /dev/net/tun (is the tun module loaded, are we root?)");
    }
    // SAFETY: raw is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI | extra_flags) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes an ifreq we own.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) } < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("TUNSETIFF {name}"));
    }
    Ok(fd)
}

/// Runs `ip ARGS...`; a failure carries ip's own message.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .with_context(|| format!("running ip {} (iproute2)", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
