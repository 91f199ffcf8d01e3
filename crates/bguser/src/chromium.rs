//! What makes the connections look like Chromium's on the wire: its TLS ClientHello's
//! size drivers and its HTTP/2 settings.
//!
//! TLS: TLS 1.3 only, key exchange groups in aws-lc-rs's post-quantum-first order, so the
//! ClientHello carries an X25519MLKEM768 key share (1216 bytes) next to a plain X25519
//! one, as Chromium's since version 131 does; a GREASE Encrypted Client Hello extension
//! (RFC 8701 style, draft-ietf-tls-esni §6.2), which Chromium sends to every server
//! without an ECH config; ALPN h2, http/1.1. Each page load gets a fresh config (no
//! session ticket from an earlier page: each load is cold, like the measured one).
//!
//! HTTP/2: Chromium's SETTINGS and connection window, from Chromium's
//! net/http/http_network_session.h (`kSpdyMaxHeaderTableSize = 64 * 1024`,
//! `kSpdyMaxHeaderListSize = 256 * 1024`, push disabled) and http_network_session.cc
//! (`kSpdySessionMaxRecvWindowSize = 15 * 1024 * 1024`, `kSpdyStreamMaxRecvWindowSize =
//! 6 * 1024 * 1024`): SETTINGS HEADER_TABLE_SIZE 65536, ENABLE_PUSH 0,
//! INITIAL_WINDOW_SIZE 6291456, MAX_HEADER_LIST_SIZE 262144, then a WINDOW_UPDATE
//! raising the connection window to 15 MB.

use std::sync::Arc;

use anyhow::Result;
use rustls::client::{EchGreaseConfig, EchMode};
use rustls::crypto::aws_lc_rs;
use rustls::crypto::hpke::HpkePublicKey;

/// SETTINGS_HEADER_TABLE_SIZE (kSpdyMaxHeaderTableSize).
pub const HEADER_TABLE_SIZE: u32 = 64 * 1024;
/// SETTINGS_INITIAL_WINDOW_SIZE (kSpdyStreamMaxRecvWindowSize).
pub const STREAM_WINDOW: u32 = 6 * 1024 * 1024;
/// The connection's receive window (kSpdySessionMaxRecvWindowSize).
pub const CONNECTION_WINDOW: u32 = 15 * 1024 * 1024;
/// SETTINGS_MAX_HEADER_LIST_SIZE (kSpdyMaxHeaderListSize).
pub const MAX_HEADER_LIST_SIZE: u32 = 256 * 1024;
/// Chromium's parallel HTTP/1.1 connections per host.
pub const H1_PER_HOST: usize = 6;

/// A fresh TLS client configuration (module rule) trusting `roots`.
pub fn tls(roots: rustls::RootCertStore) -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(aws_lc_rs::default_provider());
    // GREASE ECH needs a placeholder public key of the suite's KEM (X25519: 32 bytes)
    let mut placeholder = [0u8; 32];
    provider
        .secure_random
        .fill(&mut placeholder)
        .map_err(|_| anyhow::anyhow!("no secure random bytes for the GREASE ECH key"))?;
    let grease = EchGreaseConfig::new(
        aws_lc_rs::hpke::DH_KEM_X25519_HKDF_SHA256_AES_128,
        HpkePublicKey(placeholder.to_vec()),
    );
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_ech(EchMode::Grease(grease))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// An HTTP/2 client builder with Chromium's settings (module rule).
pub fn h2_builder() -> hyper::client::conn::http2::Builder<hyper_util::rt::TokioExecutor> {
    let mut b = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    b.header_table_size(HEADER_TABLE_SIZE)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEADER_LIST_SIZE)
        .adaptive_window(false);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    use rustls::NamedGroup;

    #[test]
    fn chromiums_settings_values() {
        // the SETTINGS Chromium sends (its h2 fingerprint 1:65536;2:0;4:6291456;6:262144)
        // and its connection WINDOW_UPDATE increment 15663105 = 15 MiB - 65535 (RFC 9113
        // §6.9.2: the connection window starts at 65535)
        assert_eq!(HEADER_TABLE_SIZE, 65536);
        assert_eq!(STREAM_WINDOW, 6_291_456);
        assert_eq!(MAX_HEADER_LIST_SIZE, 262_144);
        assert_eq!(CONNECTION_WINDOW - 65_535, 15_663_105);
    }

    #[test]
    fn the_provider_prefers_x25519mlkem768_then_x25519() {
        let p = aws_lc_rs::default_provider();
        let groups: Vec<NamedGroup> = p.kx_groups.iter().map(|g| g.name()).collect();
        assert_eq!(
            groups[..2],
            [NamedGroup::X25519MLKEM768, NamedGroup::X25519]
        );
    }

    /// The extensions (type, data) of the ClientHello in TLS record `rec` (RFC 8446 §4.1.2).
    fn hello_extensions(rec: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let be = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]) as usize;
        assert_eq!(
            (rec[0], rec[5]),
            (22, 1),
            "a handshake record holding a ClientHello"
        );
        let mut at = 5 + 4 + 2 + 32; // record and handshake headers, version, random
        at += 1 + rec[at] as usize; // session id
        at += 2 + be(rec, at); // cipher suites
        at += 1 + rec[at] as usize; // compression methods
        let end = at + 2 + be(rec, at);
        at += 2;
        let mut out = Vec::new();
        while at < end {
            let (ty, len) = (be(rec, at) as u16, be(rec, at + 2));
            out.push((ty, rec[at + 4..at + 4 + len].to_vec()));
            at += 4 + len;
        }
        out
    }

    #[test]
    fn the_client_hello_carries_mlkem_and_x25519_shares_grease_ech_and_h2_alpn() {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(test_root()).unwrap();
        let cfg = tls(roots).unwrap();
        let name = rustls::pki_types::ServerName::try_from("a.test").unwrap();
        let mut conn = rustls::ClientConnection::new(cfg, name).unwrap();
        let mut rec = Vec::new();
        conn.write_tls(&mut rec).unwrap();
        let ext = hello_extensions(&rec);
        let find = |ty: u16| ext.iter().find(|(t, _)| *t == ty).map(|(_, d)| d.clone());
        // key_share (51, RFC 8446 §4.2.8): X25519MLKEM768 (0x11EC) = ML-KEM-768 key (1184
        // bytes, FIPS 203) + X25519 key (32), then X25519 (0x001D) alone (32)
        let ks = find(51).expect("key_share");
        let be = |at: usize| u16::from_be_bytes([ks[at], ks[at + 1]]);
        assert_eq!((be(2), be(4) as usize), (0x11EC, 1184 + 32));
        let next = 6 + 1216;
        assert_eq!((be(next), be(next + 2)), (0x001D, 32));
        assert!(find(0xfe0d).is_some(), "encrypted_client_hello (GREASE)");
        // ALPN (16, RFC 7301 §3.1): list length 12, "h2", "http/1.1"
        assert_eq!(find(16).unwrap(), b"\x00\x0c\x02h2\x08http/1.1");
        // supported_versions (43): TLS 1.3 only
        assert_eq!(find(43).unwrap(), [2, 3, 4]);
        assert!(
            rec.len() > 1500,
            "ClientHello record of {} bytes",
            rec.len()
        );
    }

    /// A tiny self-signed certificate (DER) for the root store; only parsed, never used.
    fn test_root() -> CertificateDer<'static> {
        const PEM: &str = include_str!("../../dchannel-base/tests/data/ca.pem");
        CertificateDer::from_pem_slice(PEM.as_bytes()).unwrap()
    }
}
