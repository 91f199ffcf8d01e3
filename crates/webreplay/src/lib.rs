//! webreplay: the testbed's HTTPS replay server (see docs/webreplay.md).
//!
//! One origin per hosts-file name, one listener pair (HTTP, HTTPS) per address, a leaf
//! certificate per origin signed by the testbed CA, HTTP/2 and HTTP/1.1 by ALPN (TCP) and
//! HTTP/3 (QUIC, UDP; `--h3-port`), recorded
//! page corpora with server think time and CDN-tier delays, built-in `/bytes/N` and `/health`, single byte ranges.

pub mod access_log;
pub mod cdn;
pub mod certs;
pub mod corpus;
pub mod h3fetch;
pub mod hosts;
pub mod listener;
pub mod pattern_body;
pub mod quic;
pub mod quic_stats;
pub mod range;
pub mod server;
pub mod service;
