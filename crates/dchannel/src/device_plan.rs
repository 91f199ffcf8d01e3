//! What a change to a running gateway's devices is, decided without I/O:
//! the new list of devices (from `dchannel set`, `set --remove`, or a whole
//! devices file for `syncconf` and SIGHUP) is checked as a whole, and only
//! then compared with the current one by name into the devices [`Plan`]
//! adds, removes, re-keys and re-addresses. A change that fails any check
//! (bad key, duplicate name, key or address, no address, an address the
//! tunnel does not route) is refused with the field, and the file and line
//! when it came from a file; nothing of it is applied (control.rs applies a
//! plan only once it is whole).

use dchannel_crypto::devices::{parse_devices_with_lines, Device};
use dchannel_crypto::PublicKey;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;

/// The prefixes the gateway's TUN receives downlink for: its own address's
/// prefix (`--tun-addr`) and every `--tun-route`. A device's tunnel address
/// outside all of them would never get its downlink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelPrefixes(Vec<(IpAddr, u8)>);

impl TunnelPrefixes {
    /// From `--tun-addr` (CIDR) and the `--tun-route` values (CIDR, a bare
    /// address, or `default`).
    pub fn new(tun_addr: &str, routes: &[String]) -> Result<TunnelPrefixes, String> {
        let mut v = vec![parse_prefix(tun_addr).map_err(|e| format!("--tun-addr {e}"))?];
        for r in routes {
            if r == "default" {
                v.push((IpAddr::from([0u8; 4]), 0));
                v.push((IpAddr::from([0u16; 8]), 0));
            } else {
                v.push(parse_prefix(r).map_err(|e| format!("--tun-route {e}"))?);
            }
        }
        Ok(TunnelPrefixes(v))
    }

    /// Whether `ip` is inside one of the prefixes.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|&(net, len)| in_prefix(ip, net, len))
    }
}

impl fmt::Display for TunnelPrefixes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.0.iter().map(|(a, l)| format!("{a}/{l}")).collect();
        write!(f, "{}", list.join(", "))
    }
}

fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = s.split_once('/').unwrap_or((s, ""));
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{s:?}: expected ADDRESS/LENGTH"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        "" => max,
        l => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or_else(|| format!("{s:?}: prefix length must be 0..={max}"))?,
    };
    Ok((addr, len))
}

fn in_prefix(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    let bits = |a: IpAddr| -> (u128, u32) {
        match a {
            IpAddr::V4(v) => (u32::from(v) as u128, 32),
            IpAddr::V6(v) => (u128::from(v), 128),
        }
    };
    let ((a, wa), (n, wn)) = (bits(ip), bits(net));
    if wa != wn {
        return false;
    }
    let shift = wa - len as u32;
    shift >= wa || (a >> shift) == (n >> shift)
}

/// Where a proposed list of devices came from, for messages.
pub enum Origin<'a> {
    /// A devices file: its name and the line of each device (by name).
    File {
        /// The file (as given).
        path: &'a str,
        /// Line of each device's `name`.
        lines: HashMap<String, usize>,
    },
    /// `dchannel set` / `set --remove`: its flags name the fields.
    Command,
}

impl Origin<'_> {
    /// `file: line N: device "x": field `f`: what` or `--flag: what`.
    fn refuse(&self, name: &str, field: &str, what: String) -> String {
        match self {
            Origin::File { path, lines } => match lines.get(name) {
                Some(l) => format!("{path}: line {l}: device {name:?}: field `{field}`: {what}"),
                None => format!("{path}: device {name:?}: field `{field}`: {what}"),
            },
            Origin::Command => {
                let flag = match field {
                    "public_key" => "--public-key",
                    "address" => "--address",
                    _ => "--device",
                };
                format!("{flag} (device {name:?}): {what}")
            }
        }
    }
}

/// A devices file's text as a proposed list, with its origin for messages.
pub fn from_file<'a>(text: &str, path: &'a str) -> Result<(Vec<Device>, Origin<'a>), String> {
    let located = parse_devices_with_lines(text, path).map_err(|e| e.to_string())?;
    let lines = located.iter().map(|(d, l)| (d.name.clone(), *l)).collect();
    let devices = located.into_iter().map(|(d, _)| d).collect();
    Ok((devices, Origin::File { path, lines }))
}

/// `dchannel set --device NAME [--public-key KEY] [--address ADDR]`: the
/// current list with that device added (both fields required) or changed
/// (the fields given).
pub fn with_set(
    current: &[Device],
    name: &str,
    public_key: Option<&str>,
    address: Option<&str>,
) -> Result<Vec<Device>, String> {
    if name.trim().is_empty() {
        return Err("--device: the name must not be empty".into());
    }
    let key = public_key
        .map(|k| PublicKey::from_base64(k, "--public-key"))
        .transpose()
        .map_err(|e| format!("{e} (device {name:?})"))?;
    let address = address
        .map(|a| {
            a.parse::<IpAddr>().map_err(|_| {
                format!("--address {a:?} (device {name:?}): not an IPv4 or IPv6 address")
            })
        })
        .transpose()?;
    let mut devices = current.to_vec();
    match devices.iter_mut().find(|d| d.name == name) {
        Some(d) => {
            d.public_key = key.unwrap_or(d.public_key);
            d.address = address.or(d.address);
        }
        None => {
            let public_key =
                key.ok_or_else(|| format!("--public-key is required: {name:?} is a new device"))?;
            if address.is_none() {
                return Err(format!("--address is required: {name:?} is a new device"));
            }
            devices.push(Device {
                name: name.to_string(),
                public_key,
                address,
            });
        }
    }
    Ok(devices)
}

/// `dchannel set --remove NAME`: the current list without that device.
pub fn without(current: &[Device], name: &str) -> Result<Vec<Device>, String> {
    if !current.iter().any(|d| d.name == name) {
        return Err(format!("--remove {name:?}: no such device"));
    }
    Ok(current.iter().filter(|d| d.name != name).cloned().collect())
}

/// What applying a new list of devices changes, by device name. Devices in
/// none of the lists keep their sessions, endpoints and flows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// New names.
    pub added: Vec<Device>,
    /// Names no longer listed: their sessions end at once.
    pub removed: Vec<Device>,
    /// Same name, another key (the address may change too): the old key's
    /// sessions end at once, the new key must handshake.
    pub rekeyed: Vec<Device>,
    /// Same name and key, another address: the session is kept.
    pub readdressed: Vec<Device>,
}

impl Plan {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.rekeyed.is_empty()
            && self.readdressed.is_empty()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |v: &[Device]| {
            let n: Vec<&str> = v.iter().map(|d| d.name.as_str()).collect();
            if n.is_empty() {
                "-".to_string()
            } else {
                n.join(" ")
            }
        };
        write!(
            f,
            "added: {}; removed: {}; re-keyed: {}; re-addressed: {}",
            names(&self.added),
            names(&self.removed),
            names(&self.rekeyed),
            names(&self.readdressed)
        )
    }
}

/// Checks `proposed` as the gateway's whole list of devices and compares it
/// with `current` (the list it serves now). Refused, naming the device and
/// field (and line, for a file): an empty name, two devices with one name,
/// key or address, a device without address, and an added or re-addressed
/// device whose address is outside `prefixes`.
pub fn plan(
    current: &[Device],
    proposed: &[Device],
    origin: &Origin,
    prefixes: &TunnelPrefixes,
) -> Result<Plan, String> {
    let mut names = HashSet::new();
    let mut keys: HashMap<PublicKey, &str> = HashMap::new();
    let mut addrs: HashMap<IpAddr, &str> = HashMap::new();
    let was: HashMap<&str, &Device> = current.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut p = Plan::default();
    for d in proposed {
        let name = d.name.as_str();
        let refuse = |field: &str, what: String| Err(origin.refuse(name, field, what));
        if name.trim().is_empty() {
            return refuse("name", "must not be empty".into());
        }
        if !names.insert(name) {
            return refuse("name", "a second device with this name".into());
        }
        if let Some(other) = keys.insert(d.public_key, name) {
            return refuse("public_key", format!("the same key as device {other:?}"));
        }
        let Some(addr) = d.address else {
            return refuse(
                "address",
                "required at the gateway (where the device's downlink goes)".into(),
            );
        };
        if let Some(other) = addrs.insert(addr, name) {
            return refuse(
                "address",
                format!("{addr} is already the address of device {other:?}"),
            );
        }
        let old = was.get(name);
        if old.map_or(true, |o| o.address != d.address) && !prefixes.contains(addr) {
            return refuse(
                "address",
                format!("{addr} is outside the tunnel's prefixes ({prefixes})"),
            );
        }
        match old {
            None => p.added.push(d.clone()),
            Some(o) if o.public_key != d.public_key => p.rekeyed.push(d.clone()),
            Some(o) if o.address != d.address => p.readdressed.push(d.clone()),
            Some(_) => {}
        }
    }
    p.removed = current
        .iter()
        .filter(|d| !names.contains(d.name.as_str()))
        .cloned()
        .collect();
    Ok(p)
}

/// Devices for the tests here and in live_devices.rs.
#[cfg(test)]
pub(crate) mod testing {
    use dchannel_crypto::devices::Device;
    use dchannel_crypto::{PrivateKey, PublicKey};

    /// The public key of private key `[i; 32]`.
    pub fn key(i: u8) -> PublicKey {
        PrivateKey::from_bytes([i; 32]).public_key()
    }

    /// Device `name` with [`key`]`(k)` at `addr`.
    pub fn dev(name: &str, k: u8, addr: &str) -> Device {
        Device {
            name: name.into(),
            public_key: key(k),
            address: Some(addr.parse().unwrap()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{dev, key};
    use super::*;
    use dchannel_crypto::devices::format_devices;

    fn prefixes() -> TunnelPrefixes {
        TunnelPrefixes::new("198.19.0.1/32", &["198.19.0.0/24".into()]).unwrap()
    }

    fn current() -> Vec<Device> {
        vec![
            dev("a", 1, "198.19.0.2"),
            dev("b", 2, "198.19.0.3"),
            dev("c", 3, "198.19.0.4"),
            dev("d", 4, "198.19.0.5"),
        ]
    }

    #[test]
    fn prefixes_hold_their_addresses_only() {
        let p = prefixes();
        assert!(p.contains("198.19.0.1".parse().unwrap()));
        assert!(p.contains("198.19.0.255".parse().unwrap()));
        assert!(!p.contains("198.19.1.0".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
        assert_eq!(p.to_string(), "198.19.0.1/32, 198.19.0.0/24");
        let all = TunnelPrefixes::new("198.19.0.1/32", &["default".into()]).unwrap();
        assert!(all.contains("10.1.2.3".parse().unwrap()));
        assert!(all.contains("2001:db8::1".parse().unwrap()));
        let v6 = TunnelPrefixes::new("fd00::1/64", &[]).unwrap();
        assert!(v6.contains("fd00::ffff".parse().unwrap()));
        assert!(!v6.contains("fd00:0:0:1::1".parse().unwrap()));
        for (bad, says) in [("198.19.0.1/33", "0..=32"), ("x/24", "ADDRESS/LENGTH")] {
            let e = TunnelPrefixes::new(bad, &[]).unwrap_err();
            assert!(e.starts_with("--tun-addr") && e.contains(says), "{e}");
        }
    }

    /// One device of each kind: `a` untouched, `b` removed, `c` re-keyed,
    /// `d` re-addressed, `e` added.
    #[test]
    fn plan_names_exactly_what_changes() {
        let proposed = vec![
            dev("a", 1, "198.19.0.2"),
            dev("c", 30, "198.19.0.4"),
            dev("d", 4, "198.19.0.9"),
            dev("e", 5, "198.19.0.3"), // b's old address, free once b goes
        ];
        let p = plan(&current(), &proposed, &Origin::Command, &prefixes()).unwrap();
        assert_eq!(p.added, [proposed[3].clone()]);
        assert_eq!(p.removed, [current()[1].clone()]);
        assert_eq!(p.rekeyed, [proposed[1].clone()]);
        assert_eq!(p.readdressed, [proposed[2].clone()]);
        assert_eq!(
            p.to_string(),
            "added: e; removed: b; re-keyed: c; re-addressed: d"
        );
        assert!(plan(&current(), &current(), &Origin::Command, &prefixes())
            .unwrap()
            .is_empty());
        // keys swapped between two devices: both re-keyed
        let mut swapped = current();
        swapped[0].public_key = key(2);
        swapped[1].public_key = key(1);
        let p = plan(&current(), &swapped, &Origin::Command, &prefixes()).unwrap();
        assert_eq!(p.rekeyed, swapped[..2]);
        assert!(p.added.is_empty() && p.removed.is_empty());
    }

    #[test]
    fn set_and_remove_build_the_whole_list() {
        let k9 = key(9).to_base64();
        let added = with_set(&current(), "e", Some(&k9), Some("198.19.0.6")).unwrap();
        assert_eq!(added.len(), 5);
        assert_eq!(added[4], dev("e", 9, "198.19.0.6"));
        let moved = with_set(&current(), "a", None, Some("198.19.0.7")).unwrap();
        assert_eq!(moved[0], dev("a", 1, "198.19.0.7"));
        let rekeyed = with_set(&current(), "a", Some(&k9), None).unwrap();
        assert_eq!(rekeyed[0], dev("a", 9, "198.19.0.2"));
        assert_eq!(without(&current(), "b").unwrap().len(), 3);
        let cases = [
            (
                with_set(&current(), "e", None, Some("198.19.0.6")),
                "--public-key is required: \"e\" is a new device",
            ),
            (
                with_set(&current(), "e", Some(&k9), None),
                "--address is required",
            ),
            (
                with_set(&current(), "e", Some("short"), Some("198.19.0.6")),
                "--public-key",
            ),
            (
                with_set(&current(), "e", Some(&k9), Some("198.19.0.300")),
                "--address \"198.19.0.300\" (device \"e\"): not an IPv4",
            ),
            (
                with_set(&current(), " ", Some(&k9), None),
                "--device: the name must not be empty",
            ),
            (without(&current(), "zz"), "--remove \"zz\": no such device"),
        ];
        for (r, says) in cases {
            let e = r.unwrap_err();
            assert!(e.contains(says), "{says:?} not in {e}");
        }
    }

    #[test]
    fn bad_changes_are_refused_naming_the_field() {
        let set = |name, k: u8, a| {
            let l = with_set(&current(), name, Some(&key(k).to_base64()), Some(a)).unwrap();
            plan(&current(), &l, &Origin::Command, &prefixes()).unwrap_err()
        };
        assert_eq!(
            set("e", 2, "198.19.0.6"),
            "--public-key (device \"e\"): the same key as device \"b\""
        );
        assert_eq!(
            set("e", 9, "198.19.0.3"),
            "--address (device \"e\"): 198.19.0.3 is already the address of device \"b\""
        );
        assert_eq!(
            set("e", 9, "10.0.0.5"),
            "--address (device \"e\"): 10.0.0.5 is outside the tunnel's prefixes \
             (198.19.0.1/32, 198.19.0.0/24)"
        );
        // an unchanged device outside the prefixes (configured before) stays
        let mut outside = current();
        outside[0].address = Some("10.0.0.5".parse().unwrap());
        let p = plan(&outside, &outside, &Origin::Command, &prefixes()).unwrap();
        assert!(p.is_empty());
    }

    #[test]
    fn file_changes_are_refused_naming_file_and_line() {
        let mut devices = current();
        devices.push(dev("e", 9, "10.0.0.5"));
        let text = format_devices(&devices);
        let (proposed, origin) = from_file(&text, "new.toml").unwrap();
        // device e's name is on line 22: 5 lines per device before it
        // (header, name, key, address, blank line), then its header
        assert_eq!(
            plan(&current(), &proposed, &origin, &prefixes()).unwrap_err(),
            "new.toml: line 22: device \"e\": field `address`: 10.0.0.5 is outside the \
             tunnel's prefixes (198.19.0.1/32, 198.19.0.0/24)"
        );
        // the file's own checks (duplicates, keys) come from the parser, with lines
        let dup = format!(
            "{text}[[device]]\nname = \"a\"\npublic_key = \"{}\"\n",
            key(10).to_base64()
        );
        let e = from_file(&dup, "new.toml").map(|_| ()).unwrap_err();
        assert!(
            e.starts_with("new.toml: line 27: device \"a\": field `name`"),
            "{e}"
        );
        // no address: refused at the gateway
        let text = format!(
            "[[device]]\nname = \"z\"\npublic_key = \"{}\"\n",
            key(10).to_base64()
        );
        let (proposed, origin) = from_file(&text, "new.toml").unwrap();
        let e = plan(&current(), &proposed, &origin, &prefixes()).unwrap_err();
        assert!(
            e.starts_with("new.toml: line 2: device \"z\": field `address`: required"),
            "{e}"
        );
    }
}
