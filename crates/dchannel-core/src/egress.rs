//! Rule: the gateway forwards a device's packet (authentic, decrypted, its
//! source the device's own address) only if its destination is not the
//! gateway itself nor a place only the gateway's host should reach:
//!
//! 1. the operator's prefixes (`--egress-allow CIDR`, `--egress-deny CIDR`)
//!    decide first, the longest matching one winning;
//! 2. a destination none of them covers is refused if it is one of the
//!    gateway's own addresses (and its interfaces' broadcast addresses), found
//!    by the driver at start, or in [`BUILTIN_DENY`]: loopback, link-local,
//!    the cloud metadata addresses, multicast, broadcast, "this network";
//! 3. everything else is forwarded (the host's firewall may still refuse it:
//!    docs/deploy.md's nftables table also keeps devices off private ranges).
//!
//! Why in the agent and not only in nftables: a firewall is the operator's
//! job and easy to get wrong or leave out; a device must not reach the
//! gateway's own services (metrics, ssh, a database bound to the public
//! address) or the cloud metadata service (credentials) on a default
//! install. The check runs before the reorder buffer, per packet: a lookup
//! in prefix tables grouped by prefix length (one mask and one binary
//! search per distinct length, about six), no allocation. Measured with
//! `cargo test --release -p dchannel-core --lib a_lookup_costs -- --nocapture`
//! (2026-11-26 UTC, 2-core Debian 12 VM at a load average of 20 from other
//! jobs, so wall-clock time is an upper bound): 47 to 60 ns per lookup.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// What is refused unless the operator allows it, with why (the docs list it).
pub const BUILTIN_DENY: [(&str, &str); 13] = [
    (
        "0.0.0.0/8",
        "\"this network\" (RFC 1122 §3.2.1.3): the host itself",
    ),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "IPv4 link-local (RFC 3927)"),
    (
        "169.254.169.254/32",
        "cloud metadata service (AWS, GCP, Azure, OpenStack)",
    ),
    (
        "100.100.100.200/32",
        "cloud metadata service (Alibaba Cloud)",
    ),
    ("224.0.0.0/4", "IPv4 multicast (the host's own groups)"),
    (
        "255.255.255.255/32",
        "limited broadcast (the host's own sockets)",
    ),
    ("::/128", "IPv6 unspecified address"),
    ("::1/128", "IPv6 loopback"),
    ("fe80::/10", "IPv6 link-local"),
    ("ff00::/8", "IPv6 multicast"),
    (
        "fd00:ec2::254/128",
        "cloud metadata service over IPv6 (AWS)",
    ),
    (
        "::ffff:0:0/96",
        "IPv4-mapped IPv6 (RFC 4291 §2.5.5.2): never a destination on the wire",
    ),
];

/// An address prefix: `addr/len` with no bits set past `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

/// A prefix or an egress rule that cannot be used; the message says why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressError(pub String);

impl fmt::Display for EgressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EgressError {}

/// Bits of an address of `ip`'s family.
fn width(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

/// The address as a number (IPv4 in the low 32 bits).
fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u32::from(a).into(),
        IpAddr::V6(a) => a.into(),
    }
}

/// The first `len` of `width` bits set (as [`bits`] aligns them).
fn mask(len: u8, width: u8) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX << (128 - u32::from(len))) >> (128 - u32::from(width))
    }
}

impl Cidr {
    /// `addr/len`; refused if `len` exceeds the family's bits or `addr` has
    /// bits set past `len` (a typo such as 10.0.0.1/8 would mean 10.0.0.0/8).
    pub fn new(addr: IpAddr, len: u8) -> Result<Cidr, EgressError> {
        let w = width(addr);
        if len > w {
            return Err(EgressError(format!(
                "{addr}/{len}: the prefix length is at most {w}"
            )));
        }
        let net = bits(addr) & mask(len, w);
        if net != bits(addr) {
            let net = match addr {
                IpAddr::V4(_) => IpAddr::V4((net as u32).into()),
                IpAddr::V6(_) => IpAddr::V6(net.into()),
            };
            return Err(EgressError(format!(
                "{addr}/{len}: bits set past the prefix (did you mean {net}/{len}?)"
            )));
        }
        Ok(Cidr { addr, len })
    }

    /// One address: `/32` or `/128`.
    pub fn host(addr: IpAddr) -> Cidr {
        Cidr {
            addr,
            len: width(addr),
        }
    }

    /// Whether `ip` is inside (never across families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && bits(ip) & mask(self.len, width(ip)) == bits(self.addr)
    }
}

impl FromStr for Cidr {
    type Err = EgressError;

    /// `ADDRESS/LEN`, or an address alone (one host).
    fn from_str(s: &str) -> Result<Cidr, EgressError> {
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| {
            EgressError(format!(
                "{s:?}: expected ADDRESS/LEN, e.g. 10.8.0.0/16 or fd00::/8"
            ))
        })?;
        match len {
            None => Ok(Cidr::host(addr)),
            Some(l) => {
                let len = l.parse().map_err(|_| {
                    EgressError(format!("{s:?}: the prefix length {l:?} is not a number"))
                })?;
                Cidr::new(addr, len)
            }
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The prefixes of one length: sorted networks, each with its action.
#[derive(Clone, Debug)]
struct Level {
    len: u8,
    mask: u128,
    nets: Vec<(u128, bool)>,
}

/// Longest-prefix match over one family's prefixes: levels by length, longest first.
#[derive(Clone, Debug, Default)]
struct PrefixTable {
    width: u8,
    levels: Vec<Level>,
}

impl PrefixTable {
    fn new(width: u8) -> Self {
        PrefixTable {
            width,
            levels: Vec::new(),
        }
    }

    /// Adds `c` with `allow`; the action it had already, if it was there.
    fn insert(&mut self, c: Cidr, allow: bool) -> Option<bool> {
        let i = match self.levels.iter().position(|l| l.len <= c.len) {
            Some(i) if self.levels[i].len == c.len => i,
            at => {
                let at = at.unwrap_or(self.levels.len());
                let level = Level {
                    len: c.len,
                    mask: mask(c.len, self.width),
                    nets: Vec::new(),
                };
                self.levels.insert(at, level);
                at
            }
        };
        let nets = &mut self.levels[i].nets;
        let net = bits(c.addr);
        match nets.binary_search_by_key(&net, |&(n, _)| n) {
            Ok(j) => Some(nets[j].1),
            Err(j) => {
                nets.insert(j, (net, allow));
                None
            }
        }
    }

    /// The action of the longest prefix holding `addr`, if any does.
    fn lookup(&self, addr: u128) -> Option<bool> {
        self.levels.iter().find_map(|l| {
            let key = addr & l.mask;
            l.nets
                .binary_search_by_key(&key, |&(n, _)| n)
                .ok()
                .map(|j| l.nets[j].1)
        })
    }
}

/// Which destinations a gateway forwards device packets to (module docs).
#[derive(Clone, Debug)]
pub struct EgressFilter {
    /// The operator's prefixes, [IPv4, IPv6].
    operator: [PrefixTable; 2],
    /// The built-in and own-address denials, [IPv4, IPv6] (all "deny").
    refused: [PrefixTable; 2],
}

fn family(ip: IpAddr) -> usize {
    usize::from(ip.is_ipv6())
}

impl EgressFilter {
    /// The rule for a gateway whose own addresses are `own` (its interfaces'
    /// addresses and broadcast addresses), with the operator's `allow` and
    /// `deny` prefixes. A prefix both allowed and denied is refused.
    pub fn new(own: &[IpAddr], allow: &[Cidr], deny: &[Cidr]) -> Result<Self, EgressError> {
        let mut f = EgressFilter {
            operator: [PrefixTable::new(32), PrefixTable::new(128)],
            refused: [PrefixTable::new(32), PrefixTable::new(128)],
        };
        for (text, _) in BUILTIN_DENY {
            let c: Cidr = text.parse().expect("built-in prefixes parse");
            f.refused[family(c.addr)].insert(c, false);
        }
        for &ip in own {
            f.refused[family(ip)].insert(Cidr::host(ip), false);
        }
        for &c in deny {
            f.operator[family(c.addr)].insert(c, false);
        }
        for &c in allow {
            if f.operator[family(c.addr)].insert(c, true) == Some(false) {
                return Err(EgressError(format!(
                    "{c} is both allowed (--egress-allow) and denied (--egress-deny)"
                )));
            }
        }
        Ok(f)
    }

    /// Whether a device's packet to `dst` may be forwarded.
    pub fn allows(&self, dst: IpAddr) -> bool {
        let (i, b) = (family(dst), bits(dst));
        match self.operator[i].lookup(b) {
            Some(allow) => allow,
            None => self.refused[i].lookup(b).is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn cidrs(v: &[&str]) -> Vec<Cidr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn by_default_the_gateway_itself_and_host_only_places_are_refused() {
        let own = [
            ip("203.0.113.10"),
            ip("203.0.113.255"),
            ip("198.19.0.1"),
            ip("2001:db8::10"),
        ];
        let f = EgressFilter::new(&own, &[], &[]).unwrap();
        for refused in [
            "203.0.113.10",  // own public address
            "203.0.113.255", // its interface's broadcast address
            "198.19.0.1",    // the TUN's address
            "2001:db8::10",  // own IPv6 address
            "127.0.0.1",     // loopback, the whole /8
            "127.255.0.9",
            "169.254.169.254", // metadata
            "169.254.1.1",     // link-local
            "100.100.100.200", // Alibaba metadata
            "224.0.0.1",       // all-hosts multicast
            "239.255.255.250",
            "255.255.255.255",
            "0.0.0.0",
            "::1",
            "::",
            "fe80::1",
            "febf::1", // last of fe80::/10
            "ff02::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
        ] {
            assert!(!f.allows(ip(refused)), "{refused} was forwarded");
        }
        for forwarded in [
            "198.51.100.80", // the internet
            "203.0.113.11",  // a neighbour of the gateway's own address
            "10.9.9.9",      // private ranges: the firewall's business
            "192.168.1.1",
            "100.100.100.201",
            "169.253.255.255", // just below 169.254/16
            "169.255.0.0",     // just above
            "223.255.255.255", // just below multicast
            "1.0.0.0",         // just above 0/8
            "2001:db8::11",
            "fec0::1", // just above fe80::/10
            "fd00:ec2::253",
            "2606:4700::1111",
        ] {
            assert!(f.allows(ip(forwarded)), "{forwarded} was refused");
        }
    }

    #[test]
    fn the_operators_prefixes_decide_first_the_longest_winning() {
        let f = EgressFilter::new(
            &[ip("203.0.113.10")],
            &cidrs(&["169.254.0.0/16", "10.1.0.0/16", "203.0.113.10/32"]),
            &cidrs(&["169.254.169.254/32", "10.0.0.0/8", "198.51.100.0/24"]),
        )
        .unwrap();
        // link-local allowed, but not the metadata address inside it
        assert!(f.allows(ip("169.254.1.1")));
        assert!(!f.allows(ip("169.254.169.254")));
        // 10/8 denied except 10.1/16
        assert!(!f.allows(ip("10.2.0.1")));
        assert!(f.allows(ip("10.1.2.3")));
        // an own address the operator opened; a public range the operator closed
        assert!(f.allows(ip("203.0.113.10")));
        assert!(!f.allows(ip("198.51.100.80")));
        // what the operator did not name still meets the built-in list
        assert!(!f.allows(ip("127.0.0.1")));
        assert!(f.allows(ip("192.0.2.1")));
        // 0.0.0.0/0 opens every IPv4 destination, IPv6 untouched
        let open = EgressFilter::new(&[ip("203.0.113.10")], &cidrs(&["0.0.0.0/0"]), &[]).unwrap();
        assert!(open.allows(ip("127.0.0.1")) && open.allows(ip("203.0.113.10")));
        assert!(!open.allows(ip("::1")));
    }

    #[test]
    fn a_prefix_both_allowed_and_denied_is_refused() {
        let e =
            EgressFilter::new(&[], &cidrs(&["10.0.0.0/8"]), &cidrs(&["10.0.0.0/8"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "10.0.0.0/8 is both allowed (--egress-allow) and denied (--egress-deny)"
        );
    }

    #[test]
    fn prefixes_parse_and_typos_are_refused_with_a_suggestion() {
        assert_eq!(
            "10.8.0.0/16".parse::<Cidr>().unwrap().to_string(),
            "10.8.0.0/16"
        );
        assert_eq!(
            "fd00::1".parse::<Cidr>().unwrap().to_string(),
            "fd00::1/128"
        );
        assert_eq!(
            "10.0.0.1/8".parse::<Cidr>().unwrap_err().to_string(),
            "10.0.0.1/8: bits set past the prefix (did you mean 10.0.0.0/8?)"
        );
        assert_eq!(
            "fe80::1/10".parse::<Cidr>().unwrap_err().to_string(),
            "fe80::1/10: bits set past the prefix (did you mean fe80::/10?)"
        );
        assert!("10.0.0.0/33"
            .parse::<Cidr>()
            .unwrap_err()
            .to_string()
            .contains("at most 32"));
        assert!("10.0.0.0/x"
            .parse::<Cidr>()
            .unwrap_err()
            .0
            .contains("not a number"));
        assert!("eth0"
            .parse::<Cidr>()
            .unwrap_err()
            .0
            .contains("expected ADDRESS/LEN"));
        // /0 holds everything of its family, nothing of the other
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("255.1.2.3")) && !all.contains(ip("::1")));
    }

    #[test]
    fn a_lookup_costs_tens_of_nanoseconds() {
        // A gateway with a handful of own addresses and two operator prefixes;
        // destinations cycling over the internet, private ranges and refusals.
        let own = [ip("203.0.113.10"), ip("203.0.113.255"), ip("198.19.0.1")];
        let f = EgressFilter::new(&own, &cidrs(&["10.1.0.0/16"]), &cidrs(&["10.0.0.0/8"])).unwrap();
        let dsts: Vec<IpAddr> = (0..1024u32)
            .map(|i| IpAddr::V4((i.wrapping_mul(0x9e37_79b9)).into()))
            .collect();
        let n = 2_000_000;
        let t = std::time::Instant::now();
        let allowed = (0..n)
            .filter(|&i| f.allows(std::hint::black_box(dsts[i % dsts.len()])))
            .count();
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        eprintln!("egress lookup: {ns:.1} ns each ({allowed} of {n} allowed)");
        assert!(allowed > n / 2 && allowed < n);
        assert!(ns < 1000.0, "{ns} ns per lookup");
    }

    #[test]
    fn a_lookup_is_a_few_masks_and_searches_however_many_own_addresses() {
        // 10,000 own addresses (a large host) add one level, not 10,000 compares:
        // the IPv4 tables have the built-in lengths (32, 16, 8, 4) only.
        let own: Vec<IpAddr> = (0..10_000u32)
            .map(|i| IpAddr::V4((0xcb00_0000 + i).into()))
            .collect();
        let f = EgressFilter::new(&own, &[], &[]).unwrap();
        let lens: Vec<u8> = f.refused[0].levels.iter().map(|l| l.len).collect();
        assert_eq!(lens, vec![32, 16, 8, 4]);
        assert!(!f.allows(own[9_999]) && f.allows(ip("203.0.39.16")));
    }
}
