//! Parser for the testbed hosts file (`/etc/hosts` syntax, docs/formats.md "Hosts file").
//!
//! Each line is `ADDRESS NAME [NAME...]`, `#` starts a comment. Every name is one origin;
//! webreplay binds its listeners on every distinct address.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// One distinct address from the hosts file and the origin names that resolve to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAddr {
    pub addr: IpAddr,
    /// Lower-cased host names, in file order. Never empty.
    pub names: Vec<String>,
}

/// Reads and parses a hosts file; errors name `file:line` and what was expected.
pub fn load(path: &Path) -> Result<Vec<HostAddr>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read hosts file {}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// Parses hosts-file text; `origin` names the source in error messages.
pub fn parse(text: &str, origin: &str) -> Result<Vec<HostAddr>> {
    // Keyed by address so that several lines for one address merge into one listener.
    let mut by_addr: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
    let mut order: Vec<IpAddr> = Vec::new();
    let mut seen_name: BTreeMap<String, (IpAddr, usize)> = BTreeMap::new();
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut fields = line.split_whitespace();
        let addr_s = fields.next().unwrap_or_default();
        let addr: IpAddr = addr_s.parse().map_err(|_| {
            anyhow::anyhow!(
                "{origin}:{lineno}: expected an IPv4 or IPv6 address as the first field, got {addr_s:?}"
            )
        })?;
        let names: Vec<String> = fields.map(|n| n.to_ascii_lowercase()).collect();
        if names.is_empty() {
            bail!("{origin}:{lineno}: address {addr} has no host name after it (expected `ADDRESS NAME [NAME...]`)");
        }
        for name in &names {
            validate_name(name)
                .map_err(|why| anyhow::anyhow!("{origin}:{lineno}: host name {name:?}: {why}"))?;
            if let Some((prev_addr, prev_line)) = seen_name.get(name) {
                if *prev_addr != addr {
                    bail!(
                        "{origin}:{lineno}: host name {name:?} maps to {addr} but line {prev_line} already maps it to {prev_addr} (one address per origin)"
                    );
                }
                continue;
            }
            seen_name.insert(name.clone(), (addr, lineno));
            let entry = by_addr.entry(addr).or_insert_with(|| {
                order.push(addr);
                Vec::new()
            });
            entry.push(name.clone());
        }
    }
    if order.is_empty() {
        bail!("{origin}: no `ADDRESS NAME` lines found (expected at least one origin)");
    }
    Ok(order
        .into_iter()
        .map(|addr| HostAddr {
            addr,
            names: by_addr.remove(&addr).unwrap_or_default(),
        })
        .collect())
}

/// Accepts DNS names (letters, digits, `-`, `.`, `_`); rejects what cannot go into a SAN.
fn validate_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.len() > 253 {
        return Err("longer than 253 characters");
    }
    if name.parse::<IpAddr>().is_ok() {
        return Err("expected a host name, got an address");
    }
    if name
        .split('.')
        .any(|label| label.is_empty() || label.len() > 63)
    {
        return Err("empty or over-long label (expected dot-separated labels of 1-63 characters)");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
    {
        return Err("contains characters other than letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_merges_addresses_and_keeps_order() {
        let text = "# testbed\n198.19.128.1 server.test  # main\n\n198.19.128.2 a.test B.test\n198.19.128.1 www.server.test\n";
        let hosts = parse(text, "h").unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[0].addr, "198.19.128.1".parse::<IpAddr>().unwrap());
        assert_eq!(hosts[0].names, vec!["server.test", "www.server.test"]);
        assert_eq!(hosts[1].names, vec!["a.test", "b.test"]);
    }

    #[test]
    fn bad_address_names_file_and_line() {
        let err = parse("198.19.128.1 ok.test\nnot-an-ip x.test\n", "hosts.txt").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("hosts.txt:2:"), "{msg}");
        assert!(msg.contains("not-an-ip"), "{msg}");
    }

    #[test]
    fn missing_name_and_conflicting_name_are_errors() {
        let msg = parse("198.19.128.1\n", "f").unwrap_err().to_string();
        assert!(
            msg.starts_with("f:1:") && msg.contains("no host name"),
            "{msg}"
        );
        let msg = parse("198.19.128.1 a.test\n198.19.128.2 a.test\n", "f")
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("f:2:") && msg.contains("line 1"), "{msg}");
        let msg = parse("198.19.128.1 bad/name\n", "f")
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("f:1:"), "{msg}");
        assert!(parse("# only comments\n", "f").is_err());
    }

    #[test]
    fn duplicate_name_same_address_is_merged() {
        let hosts = parse("198.19.128.1 a.test a.test\n198.19.128.1 a.test\n", "f").unwrap();
        assert_eq!(hosts[0].names, vec!["a.test"]);
    }
}
