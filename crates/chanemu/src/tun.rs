//! TUN devices (IFF_TUN | IFF_NO_PI) through the raw ioctl, and moving them into
//! a network namespace with `ip`. A TUN created in the root namespace keeps
//! working after `ip link set X netns NS`, so chanemu never changes namespace.

use anyhow::{bail, Context, Result};
use dchannel_base::tun::ip;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

pub struct Tun {
    fd: OwnedFd,
    /// Temporary name in the root namespace (before it is moved and renamed).
    pub tmp_name: String,
}

impl Tun {
    /// Create a non-blocking TUN device named `name` (≤ 15 bytes) in our namespace.
    pub fn create(name: &str) -> Result<Tun> {
        Ok(Tun {
            fd: dchannel_base::tun::open(name, true)?,
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
