//! TUN device creation and configuration (address, MTU, link up).

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::process::Command;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Creates TUN `name` (no packet-info prefix) and returns its fd.
pub fn create(name: &str) -> Result<File> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        bail!("--tun {name:?}: interface names are 1 to 15 characters");
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .context("opening /dev/net/tun (is the tun module loaded, are we root?)")?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes an ifreq, which IfReq lays out.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req as *mut IfReq) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("TUNSETIFF {name}"));
    }
    Ok(file)
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
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
