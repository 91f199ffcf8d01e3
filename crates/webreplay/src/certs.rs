//! Per-origin TLS identities: load the testbed CA, issue one leaf certificate per origin
//! (SAN = host name, plus the origin's address so clients connecting by IP also verify),
//! and build one rustls `ServerConfig` per origin carrying that origin's ALPN list (TCP),
//! or one per QUIC endpoint that picks the same certificates by SNI (HTTP/3).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, PKCS_ECDSA_P256_SHA256,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

/// The testbed CA loaded from PEM files, able to sign leaf certificates.
pub struct CertAuthority {
    issuer: Issuer<'static, KeyPair>,
}

impl CertAuthority {
    /// Loads `CA.pem` (certificate) and `CA.key` (PKCS#8 private key, PEM).
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Self> {
        let cert_pem = std::fs::read_to_string(cert_path)
            .with_context(|| format!("cannot read CA certificate {}", cert_path.display()))?;
        let key_pem = std::fs::read_to_string(key_path)
            .with_context(|| format!("cannot read CA key {}", key_path.display()))?;
        Self::from_pem(&cert_pem, &key_pem).with_context(|| {
            format!(
                "unusable CA (certificate {}, key {})",
                cert_path.display(),
                key_path.display()
            )
        })
    }

    /// Parses the CA from PEM text (exposed for tests and tools).
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self> {
        if !cert_pem.contains("-----BEGIN CERTIFICATE-----") {
            bail!("CA certificate: expected a PEM block `-----BEGIN CERTIFICATE-----`");
        }
        if key_pem.contains("-----BEGIN EC PRIVATE KEY-----")
            || key_pem.contains("-----BEGIN RSA PRIVATE KEY-----")
        {
            bail!("CA key: found a SEC1/PKCS#1 key; expected PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), e.g. `openssl pkcs8 -topk8 -nocrypt`");
        }
        let key = KeyPair::from_pem(key_pem).map_err(|e| {
            anyhow::anyhow!("CA key: cannot parse as a PKCS#8 ECDSA P-256/P-384, Ed25519 or RSA private key in PEM: {e}")
        })?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
            .map_err(|e| anyhow::anyhow!("CA certificate: cannot parse X.509 PEM: {e}"))?;
        Ok(Self { issuer })
    }

    /// Issues a leaf certificate for `host` (and `addr` as an IP SAN), valid from one hour
    /// ago for 90 days (browsers refuse leaves valid for more than 398 days).
    pub fn issue_leaf(
        &self,
        host: &str,
        addr: Option<IpAddr>,
    ) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).context("generating a leaf key")?;
        let mut params = CertificateParams::new(vec![host.to_string()])
            .with_context(|| format!("host name {host:?} is not a valid DNS SAN"))?;
        if let Some(ip) = addr {
            params.subject_alt_names.push(SanType::IpAddress(ip));
        }
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        dn.push(DnType::OrganizationName, "dchannel webreplay");
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(90);
        let cert = params
            .signed_by(&key, &self.issuer)
            .with_context(|| format!("signing the certificate for {host}"))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((cert.der().clone(), key_der))
    }
}

/// Builds the TLS server configuration of one origin: its leaf certificate, TLS 1.3 and
/// 1.2, and the origin's ALPN protocols in preference order.
pub fn server_config(
    provider: &Arc<CryptoProvider>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    alpn: &[String],
) -> Result<Arc<ServerConfig>> {
    let mut cfg = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .context("installing the leaf certificate")?;
    cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Ok(Arc::new(cfg))
}

/// One origin's certificate and signing key as rustls resolves them (the QUIC listener's
/// form of the leaf [`server_config`] installs for TCP).
pub fn certified_key(
    provider: &Arc<CryptoProvider>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>> {
    let signer = provider
        .key_provider
        .load_private_key(key)
        .context("loading the leaf key")?;
    Ok(Arc::new(CertifiedKey::new(vec![cert], signer)))
}

/// Picks an origin's certificate by the ClientHello's SNI, else the address's first
/// name: one QUIC endpoint serves every name on its address, so unlike the TCP listener
/// (a `ServerConfig` per origin chosen before the handshake) the choice is made inside it.
#[derive(Debug)]
pub struct SniCerts {
    /// Host name (lower case) → certificate, shared by all endpoints.
    pub by_name: Arc<HashMap<String, Arc<CertifiedKey>>>,
    /// The address's first hosts-file name.
    pub default_host: String,
}

impl ResolvesServerCert for SniCerts {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        hello
            .server_name()
            .map(str::to_ascii_lowercase)
            .and_then(|n| self.by_name.get(&n))
            .or_else(|| self.by_name.get(&self.default_host))
            .cloned()
    }
}

/// ALPN of HTTP/3 (RFC 9114 §3.1).
pub const H3_ALPN: &[u8] = b"h3";

/// TLS configuration of one QUIC endpoint: TLS 1.3 only (RFC 9001 §4.2), ALPN `h3`, the
/// origins' certificates by SNI, and no session tickets and no early data, so every
/// connection is a full 1-RTT handshake (loads are cold: nothing resumes between them).
pub fn quic_server_config(provider: &Arc<CryptoProvider>, certs: SniCerts) -> Result<ServerConfig> {
    let mut cfg = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 for QUIC")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(certs));
    cfg.alpn_protocols = vec![H3_ALPN.to_vec()];
    cfg.max_early_data_size = 0;
    cfg.send_tls13_tickets = 0;
    Ok(cfg)
}

/// Checks an ALPN list for the protocols the server speaks.
pub fn validate_alpn(list: &[String], what: &str) -> Result<()> {
    if list.is_empty() {
        bail!("{what}: empty ALPN list (expected \"h2\" and/or \"http/1.1\")");
    }
    for p in list {
        if p != "h2" && p != "http/1.1" {
            bail!("{what}: unsupported ALPN protocol {p:?} (expected \"h2\" or \"http/1.1\")");
        }
    }
    Ok(())
}
