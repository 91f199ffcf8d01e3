//! The client's routes through each channel's interface, kept across link flaps.
//!
//! A channel socket is bound to its interface (`SO_BINDTODEVICE`), but the
//! kernel still looks up a route for each datagram: the operator's routes
//! through that interface (the guide's per-interface `table 101/102` default
//! routes, with their next hop). When the interface goes down, the kernel
//! deletes every route through it, and on link up it restores only the routes
//! it made itself (the connected prefix): without the next hop the socket's
//! datagrams are sent "on link" to the gateway's address, ARP never resolves
//! and the channel stays dead. So the client records the routes through each
//! channel's interface at start (all tables, except those the kernel made) and
//! puts back any that is missing whenever a link event (rtnetlink) shows the
//! interface up, retrying every second until they are all back.

use anyhow::{bail, Context, Result};
use dchannel_base::tun::ip;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// One channel's interface and the routes through it to keep.
#[derive(Debug)]
struct Kept {
    /// "HBC" or "LLC" (log lines).
    channel: &'static str,
    dev: String,
    /// Each route as the arguments of `ip route replace`.
    routes: Vec<Vec<String>>,
}

/// Records the routes through each `(channel, interface)` and starts the thread
/// that restores them after the interface comes back up. Without it the agent
/// still runs (a flapping link then stays down): a failure is a warning.
pub fn start(devs: &[(&'static str, &str)]) {
    if let Err(e) = try_start(devs) {
        tracing::warn!(
            "routes through the channels' interfaces are not kept across link flaps: {e:#}"
        );
    }
}

fn try_start(devs: &[(&'static str, &str)]) -> Result<()> {
    let mut kept = Vec::new();
    for &(channel, dev) in devs {
        let routes = routes_through(dev).with_context(|| format!("{channel} routes via {dev}"))?;
        tracing::debug!("{channel}: keeping {} route(s) via {dev}", routes.len());
        kept.push(Kept {
            channel,
            dev: dev.to_string(),
            routes,
        });
    }
    let sock = LinkEvents::open().context("rtnetlink link events")?;
    std::thread::Builder::new()
        .name("routes".into())
        .spawn(move || {
            // Signals are the main thread's (sigwait): none may land here.
            block_all_signals();
            let mut pending = true;
            loop {
                let event = sock.wait(Duration::from_secs(1));
                if event || pending {
                    pending = kept.iter().any(|k| !restore(k));
                }
            }
        })?;
    Ok(())
}

/// Puts back the missing routes of `k` if its interface is up; true when
/// nothing is missing any more.
fn restore(k: &Kept) -> bool {
    if !is_up(&k.dev) {
        return false;
    }
    let now = match routes_through(&k.dev) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!("{}: {e:#}", k.channel);
            return false;
        }
    };
    let mut all = true;
    for r in k.routes.iter().filter(|r| !now.contains(r)) {
        let args: Vec<&str> = r.iter().map(String::as_str).collect();
        match ip(&args) {
            Ok(()) => tracing::info!(
                "{} ({}) up: route restored: ip {}",
                k.channel,
                k.dev,
                r.join(" ")
            ),
            Err(e) => {
                tracing::debug!("{}: {e:#}", k.channel);
                all = false;
            }
        }
    }
    all
}

/// The interface is administratively up (`IFF_UP` in sysfs).
fn is_up(dev: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/flags"))
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & libc::IFF_UP as u32 != 0)
}

/// The routes through `dev` in every table, as `ip route replace` arguments,
/// except those the kernel made (connected prefixes, local and broadcast).
fn routes_through(dev: &str) -> Result<Vec<Vec<String>>> {
    let out = Command::new("ip")
        .args(["-j", "route", "show", "table", "all", "dev", dev])
        .output()
        .context("running ip -j route show (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip route show dev {dev}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let rows: Value = serde_json::from_slice(&out.stdout).context("ip -j route show: JSON")?;
    Ok(rows
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| replace_args(r, dev)).collect())
        .unwrap_or_default())
}

/// `ip route replace` arguments re-creating route `r` (one row of `ip -j
/// route show dev DEV`); `None` for a route the kernel makes by itself.
fn replace_args(r: &Value, dev: &str) -> Option<Vec<String>> {
    let field = |k: &str| match r.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    if field("protocol").as_deref() == Some("kernel")
        || field("type").is_some_and(|t| t != "unicast")
    {
        return None;
    }
    let mut args = vec!["route".to_string(), "replace".into(), field("dst")?];
    if let Some(gw) = field("gateway") {
        args.extend(["via".into(), gw]);
    }
    args.extend(["dev".into(), dev.to_string()]);
    for (key, arg) in [
        ("table", "table"),
        ("protocol", "proto"),
        ("scope", "scope"),
        ("metric", "metric"),
        ("prefsrc", "src"),
    ] {
        if let Some(v) = field(key) {
            args.extend([arg.to_string(), v]);
        }
    }
    let onlink = r["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == "onlink"));
    if onlink {
        args.push("onlink".into());
    }
    Some(args)
}

fn block_all_signals() {
    // SAFETY: a zeroed sigset filled by sigfillset, applied to this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// An rtnetlink socket subscribed to link changes (`RTMGRP_LINK`).
struct LinkEvents(std::os::fd::OwnedFd);

impl LinkEvents {
    fn open() -> std::io::Result<LinkEvents> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket/bind calls with a zeroed, filled-in sockaddr_nl of
        // the right size; the fd is owned from here on.
        unsafe {
            let fd = libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            sa.nl_groups = libc::RTMGRP_LINK as u32;
            let len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            if libc::bind(fd, (&sa as *const libc::sockaddr_nl).cast(), len) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(LinkEvents(owned))
        }
    }

    /// Waits up to `timeout` for link events; true if any arrived (their
    /// content does not matter: every interface is checked).
    fn wait(&self, timeout: Duration) -> bool {
        use std::os::fd::AsRawFd;
        let fd = self.0.as_raw_fd();
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; then non-blocking reads into a local buffer.
        unsafe {
            if libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) <= 0 {
                return false;
            }
            let mut buf = [0u8; 8192];
            while libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) > 0 {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_default_route_is_recreated_with_its_table_and_next_hop() {
        let r = json!({"dst": "default", "gateway": "192.168.50.1", "dev": "eth1",
                       "table": "102", "flags": []});
        let want = "route replace default via 192.168.50.1 dev eth1 table 102";
        assert_eq!(replace_args(&r, "eth1").unwrap().join(" "), want);
        let r = json!({"dst": "default", "dev": "wwan0", "table": "101", "scope": "link",
                       "metric": 5, "flags": ["onlink"]});
        let want = "route replace default dev wwan0 table 101 scope link metric 5 onlink";
        assert_eq!(replace_args(&r, "wwan0").unwrap().join(" "), want);
    }

    #[test]
    fn the_kernels_own_routes_are_left_to_the_kernel() {
        let connected = json!({"dst": "192.168.50.0/24", "dev": "eth1", "protocol": "kernel",
                               "scope": "link", "prefsrc": "192.168.50.2", "flags": []});
        assert_eq!(replace_args(&connected, "eth1"), None);
        let local = json!({"type": "local", "dst": "192.168.50.2", "dev": "eth1",
                           "table": "local", "protocol": "kernel"});
        assert_eq!(replace_args(&local, "eth1"), None);
    }
}
