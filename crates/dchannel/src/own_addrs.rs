//! The gateway's own addresses, for its egress rule (`dchannel_core::egress`):
//! every address of every interface of its network namespace and every IPv4
//! broadcast address, read once at start with getifaddrs(3). An address added
//! later is not refused until the agent restarts (docs/deploy.md says so; the
//! firewall's input chain covers the host whatever its addresses).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host's addresses now, sorted, without duplicates.
pub fn discover() -> io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list that freeifaddrs frees below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*p };
        out.extend(ip_of(ifa.ifa_addr));
        if ifa.ifa_flags & libc::IFF_BROADCAST as libc::c_uint != 0 {
            out.extend(ip_of(ifa.ifa_ifu));
        }
        p = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no node is used after.
    unsafe { libc::freeifaddrs(head) };
    out.sort();
    out.dedup();
    Ok(out)
}

/// The IP address in a sockaddr of getifaddrs, if it is IPv4 or IPv6.
fn ip_of(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: a non-null sockaddr from getifaddrs; its family says which
    // struct it is, and getifaddrs allocates the whole of that struct.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*sa.cast::<libc::sockaddr_in>();
                Some(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)).into())
            }
            libc::AF_INET6 => {
                let s = &*sa.cast::<libc::sockaddr_in6>();
                Some(Ipv6Addr::from(s.sin6_addr.s6_addr).into())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_loopback_address_of_this_namespace() {
        // Every namespace whose `lo` is up has 127.0.0.1 (the test's own, here).
        let own = discover().unwrap();
        assert!(own.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{own:?}");
        assert!(own.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    }
}
