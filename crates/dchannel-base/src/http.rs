//! HTTP facts both HTTP crates (webreplay, objproxy) need.

/// Header fields that belong to one connection (one hop) and are never
/// forwarded or replayed (RFC 9110 §7.6.1), plus the pre-standard
/// `keep-alive` and `proxy-connection`; HTTP/2 forbids them outright
/// (RFC 9113 §8.2.2). Lower case. Headers named in `Connection` are
/// hop-by-hop too; callers handle those.
pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether `name` (lower case) is a hop-by-hop header.
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.contains(&name)
}
