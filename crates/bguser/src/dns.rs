//! Name resolution like Chromium's built-in resolver: for each host, an A, an AAAA and an
//! HTTPS (RFC 9460, type 65) query, each on its own UDP socket, to the namespace's
//! resolver (`/etc/resolv.conf`, which `ip netns exec` points at the testbed's); the
//! connection waits for all three answers (Chromium's does, with extra time for HTTPS),
//! and uses the first IPv4 address (the testbed is IPv4).
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
/// The queries Chromium sends for an https:// host, in its order.
pub const CHROMIUM_QUERIES: [u16; 3] = [TYPE_A, TYPE_AAAA, TYPE_HTTPS];

/// How long one attempt waits for an answer before it is sent again (glibc's and
/// Chromium's first retransmission timeout is of this order; the testbed's resolver
/// answers locally).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
const ATTEMPTS: usize = 3;

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

/// The IPv4 addresses in the answer section of `msg`, the response to query `id`;
/// an error if it is not that response or its RCODE is not NOERROR.
pub fn answers_a(msg: &[u8], id: u16) -> Result<Vec<Ipv4Addr>> {
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
    if flags & 0x000F != 0 {
        bail!("DNS RCODE {}", flags & 0x000F);
    }
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
    Ok(out)
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

/// One query on its own socket, retried on silence; its answer's IPv4 addresses
/// (empty for an AAAA or HTTPS query, or a name without them).
async fn ask(server: SocketAddr, host: &str, qtype: u16, id: u16) -> Result<Vec<Ipv4Addr>> {
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
    for _ in 0..ATTEMPTS {
        sock.send(&msg).await?;
        let deadline = tokio::time::Instant::now() + ATTEMPT_TIMEOUT;
        while let Ok(got) = tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
            let n = got?;
            if u16_at(&buf[..n], 0).ok() == Some(id) {
                return answers_a(&buf[..n], id);
            }
        }
    }
    bail!("DNS: no answer from {server} for {host} (type {qtype}) after {ATTEMPTS} tries")
}

/// Resolve `host` as Chromium does (module rule): A, AAAA and HTTPS at once, all
/// answered; the first IPv4 address. `ids` gives the three query IDs.
pub async fn resolve(server: SocketAddr, host: &str, ids: [u16; 3]) -> Result<Ipv4Addr> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    let [a, aaaa, https] = CHROMIUM_QUERIES;
    let (ra, r6, rh) = tokio::join!(
        ask(server, host, a, ids[0]),
        ask(server, host, aaaa, ids[1]),
        ask(server, host, https, ids[2])
    );
    // AAAA and HTTPS only have to be answered (NODATA / an error RCODE is an answer)
    drop((r6, rh));
    ra.with_context(|| format!("cannot resolve {host}"))?
        .into_iter()
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
        assert_eq!(answers_a(&m, 7).unwrap(), vec![Ipv4Addr::new(10, 0, 0, 9)]);
        assert!(answers_a(&m, 8).is_err(), "another query's id");
        m[3] = 0x83; // NXDOMAIN
        assert!(answers_a(&m, 7)
            .unwrap_err()
            .to_string()
            .contains("RCODE 3"));
    }

    #[test]
    fn nameservers_are_read_from_resolv_conf() {
        let t = "# x\nsearch test\nnameserver 10.1.2.3\nnameserver ::1\noptions edns0\n";
        let ns = nameservers(t);
        assert_eq!(ns[0], "10.1.2.3:53".parse().unwrap());
        assert_eq!(ns.len(), 2);
    }
}
