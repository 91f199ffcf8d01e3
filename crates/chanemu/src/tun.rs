//! TUN devices (IFF_TUN | IFF_NO_PI) through the raw ioctl, and moving them into
//! a network namespace with `ip`. A TUN created in the root namespace keeps
//! working after `ip link set X netns NS`, so chanemu never changes namespace.

use anyhow::{bail, Context, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Command;

pub struct Tun {
    fd: OwnedFd,
    /// Temporary name in the root namespace (before it is moved and renamed).
    pub tmp_name: String,
}

impl Tun {
    /// Create a non-blocking TUN device named `name` (≤ 15 bytes) in our namespace.
    pub fn create(name: &str) -> Result<Tun> {
        if name.len() > 15 {
            bail!("interface name {name:?} is longer than 15 bytes");
        }
        // SAFETY: plain open(2) of a NUL-terminated path.
        let raw = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error())
                .context("open /dev/net/tun (is the tun module available and are we root?)");
        }
        // SAFETY: raw is a fresh, owned descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
            *d = *s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes an ifreq we own.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("TUNSETIFF {name}"));
        }
        Ok(Tun {
            fd,
            tmp_name: name.to_string(),
        })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Fail early and clearly when a namespace does not exist.
pub fn check_netns(ns: &str) -> Result<()> {
    if ns.is_empty() || ns.contains('/') || !Path::new("/run/netns").join(ns).exists() {
        bail!("network namespace {ns:?} does not exist (expected /run/netns/{ns}; create it with `ip netns add {ns}`)");
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("run `ip` (iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Move the device into `ns`, rename it to `name`, set its MTU and bring it up.
pub fn place(tun: &Tun, ns: &str, name: &str, mtu: u32) -> Result<()> {
    ip(&["link", "set", &tun.tmp_name, "netns", ns])?;
    let mtu = mtu.to_string();
    ip(&["-n", ns, "link", "set", &tun.tmp_name, "name", name]).with_context(|| {
        format!(
            "rename to {name:?} in namespace {ns:?} (does an interface of that name exist there?)"
        )
    })?;
    ip(&["-n", ns, "link", "set", name, "mtu", &mtu, "up"])
}
