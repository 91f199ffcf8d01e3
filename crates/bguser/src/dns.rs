//! Name resolution like Chromium's built-in resolver: for each host, an A and an HTTPS
//! (RFC 9460, type 65) query, and an AAAA query only when IPv6 is reachable (Chromium
//! probes this by connecting a UDP socket to a public IPv6 address; the testbed has no
//! IPv6 route, and Chromium sends no AAAA there), each on its own UDP socket, to the
//! namespace's resolver (`/etc/resolv.conf`, which `ip netns exec` points at the
//! testbed's). A query unanswered within a second, or answered SERVFAIL or REFUSED, is
//! sent again, ATTEMPTS times in all (resolv.conf's default `attempts:2`, which
//! Chromium's DNS client follows; the testbed's dnsmasq answers HTTPS queries REFUSED,
//! and Chromium sends each twice). The connection waits for every answer
//! and uses the first IPv4 address.
//!
//! Messages are RFC 1035 §4.1: a 12-byte header (ID, flags with RD set, QDCOUNT 1), the
//! question (QNAME as length-prefixed labels, QTYPE, QCLASS IN); answers are read with
//! §4.1.4's name compression.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tokio::net::UdpSocket;

/// RFC 1035 §3.2.2 type A (IPv4 address).
pub const TYPE_A: u16 = 1;
/// RFC 3596 §2.1 type AAAA (IPv6 address).
pub const TYPE_AAAA: u16 = 28;
/// RFC 9460 §14.1 type HTTPS.
pub const TYPE_HTTPS: u16 = 65;
/// RFC 1035 §4.1.1 RCODE 2: server failure.
pub const SERVFAIL: u16 = 2;
/// RFC 1035 §4.1.1 RCODE 5: refused.
pub const REFUSED: u16 = 5;

/// How long one attempt waits for an answer before it is sent again (glibc's and
/// Chromium's first retransmission timeout is of this order; the testbed's resolver
/// answers locally).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// Attempts per query (resolv.conf's default `attempts:2`).
pub const ATTEMPTS: usize = 2;

/// Chromium's IPv6 reachability probe: can a UDP socket be connected to a public IPv6
/// address (2001:4860:4860::8888, Chromium's probe target; nothing is sent)?
pub fn ipv6_reachable() -> bool {
    std::net::UdpSocket::bind("[::]:0")
        .and_then(|s| s.connect("[2001:4860:4860::8888]:53"))
        .is_ok()
}

/// An RFC 1035 query message for `name` of type `qtype` (class IN, recursion desired).
pub fn query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>> {
    let mut m = Vec::with_capacity(18 + name.len());
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; QD=1, AN=NS=AR=0
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            bail!(
                "DNS name {name:?}: a label of {} bytes (expected 1..=63)",
                label.len()
            );
        }
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes()); // IN
    Ok(m)
}

fn u16_at(m: &[u8], at: usize) -> Result<u16> {
    m.get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| anyhow!("DNS message truncated at byte {at}"))
}

/// The offset just past the (possibly compressed) name starting at `at`.
fn skip_name(m: &[u8], mut at: usize) -> Result<usize> {
    loop {
        let len = *m
            .get(at)
            .ok_or_else(|| anyhow!("DNS name runs past the message"))?;
        match len {
            0 => return Ok(at + 1),
            l if l & 0xC0 == 0xC0 => return Ok(at + 2), // a pointer ends the name
            l => at += 1 + l as usize,
        }
    }
}

/// A response: its RCODE and the IPv4 addresses of its answer section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// RFC 1035 §4.1.1 RCODE (0: no error).
    pub rcode: u16,
    /// The A records' addresses.
    pub a: Vec<Ipv4Addr>,
}

/// `msg` read as the response to query `id`; an error if it is not that response.
pub fn parse(msg: &[u8], id: u16) -> Result<Answer> {
    if u16_at(msg, 0)? != id {
        bail!(
            "DNS response for another query (id {} != {id})",
            u16_at(msg, 0)?
        );
    }
    let flags = u16_at(msg, 2)?;
    if flags & 0x8000 == 0 {
        bail!("DNS message is not a response");
    }
    let rcode = flags & 0x000F;
    let (qd, an) = (u16_at(msg, 4)?, u16_at(msg, 6)?);
    let mut at = 12;
    for _ in 0..qd {
        at = skip_name(msg, at)? + 4;
    }
    let mut out = Vec::new();
    for _ in 0..an {
        at = skip_name(msg, at)?;
        let (rtype, rdlen) = (u16_at(msg, at)?, u16_at(msg, at + 8)? as usize);
        let rdata = msg
            .get(at + 10..at + 10 + rdlen)
            .ok_or_else(|| anyhow!("DNS answer's RDATA runs past the message"))?;
        if rtype == TYPE_A && rdlen == 4 {
            out.push(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]));
        }
        at += 10 + rdlen;
    }
    Ok(Answer { rcode, a: out })
}

/// The `nameserver` addresses of a resolv.conf text (port 53).
pub fn nameservers(resolv_conf: &str) -> Vec<SocketAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// This namespace's first resolver (from /etc/resolv.conf).
pub fn system_resolver() -> Result<SocketAddr> {
    let text =
        std::fs::read_to_string("/etc/resolv.conf").context("cannot read /etc/resolv.conf")?;
    nameservers(&text)
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("/etc/resolv.conf names no nameserver"))
}

/// One query on its own socket, sent again on silence, SERVFAIL or REFUSED (module rule);
/// its last answer.
async fn ask(server: SocketAddr, host: &str, qtype: u16, id: u16) -> Result<Answer> {
    let bind: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()?;
    let sock = UdpSocket::bind(bind).await?;
    sock.connect(server).await?;
    let msg = query(id, host, qtype)?;
    let mut buf = vec![0u8; 4096];
    let mut last = None;
    for _ in 0..ATTEMPTS {
        sock.send(&msg).await?;
        let deadline = tokio::time::Instant::now() + ATTEMPT_TIMEOUT;
        while let Ok(got) = tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
            let n = got?;
            if u16_at(&buf[..n], 0).ok() == Some(id) {
                last = Some(parse(&buf[..n], id)?);
                break;
            }
        }
        if matches!(&last, Some(a) if a.rcode != SERVFAIL && a.rcode != REFUSED) {
            break;
        }
    }
    last.ok_or_else(|| anyhow!("DNS: no answer from {server} for {host} (type {qtype})"))
}

/// Resolve `host` as Chromium does (module rule): A, HTTPS and (with `ipv6`) AAAA at
/// once, every one answered or given up on; the A answer's first address. `ids`: the
/// A, HTTPS and AAAA queries' IDs.
pub async fn resolve(
    server: SocketAddr,
    host: &str,
    ipv6: bool,
    ids: [u16; 3],
) -> Result<Ipv4Addr> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    let a = ask(server, host, TYPE_A, ids[0]);
    let https = ask(server, host, TYPE_HTTPS, ids[1]);
    // HTTPS and AAAA only have to be answered (NODATA or an error RCODE is an answer)
    let a = if ipv6 {
        tokio::join!(a, https, ask(server, host, TYPE_AAAA, ids[2])).0
    } else {
        tokio::join!(a, https).0
    };
    let a = a.with_context(|| format!("cannot resolve {host}"))?;
    if a.rcode != 0 {
        bail!("cannot resolve {host}: DNS RCODE {}", a.rcode);
    }
    a.a.into_iter()
        .next()
        .ok_or_else(|| anyhow!("{host}: no A record"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_the_rfc1035_header_and_question() {
        // RFC 1035 §4.1.1 header: ID 0x1234, flags RD (0x0100), QDCOUNT 1; §4.1.2:
        // QNAME 1 "a" 4 "test" 0, QTYPE 65 (RFC 9460 HTTPS), QCLASS 1 (IN)
        let q = query(0x1234, "a.test", TYPE_HTTPS).unwrap();
        let want: Vec<u8> = [
            &[0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0][..],
            &[1, b'a', 4, b't', b'e', b's', b't', 0],
            &[0, 65, 0, 1],
        ]
        .concat();
        assert_eq!(q, want);
        assert!(query(1, "a..test", TYPE_A).is_err());
    }

    #[test]
    fn an_answer_with_a_compressed_name_yields_its_address() {
        let mut m = query(7, "a.test", TYPE_A).unwrap();
        m[2] = 0x81; // QR + RD
        m[3] = 0x80; // RA, RCODE 0
        m[7] = 2; // ANCOUNT 2: a CNAME-like record of another type, then the A record
                  // answer 1: name = pointer to offset 12 (0xC00C), type 5, class 1, ttl, rdlen 2
        m.extend_from_slice(&[0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xC0, 12]);
        // answer 2: A 10.0.0.9
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 9]);
        let want = Answer {
            rcode: 0,
            a: vec![Ipv4Addr::new(10, 0, 0, 9)],
        };
        assert_eq!(parse(&m, 7).unwrap(), want);
        assert!(parse(&m, 8).is_err(), "another query's id");
        m[3] = 0x85; // REFUSED
        assert_eq!(parse(&m, 7).unwrap().rcode, REFUSED);
    }

    #[test]
    fn nameservers_are_read_from_resolv_conf() {
        let t = "# x\nsearch test\nnameserver 10.1.2.3\nnameserver ::1\noptions edns0\n";
        let ns = nameservers(t);
        assert_eq!(ns[0], "10.1.2.3:53".parse().unwrap());
        assert_eq!(ns.len(), 2);
    }
}
