//! TLS toward the browser: a leaf certificate per host, issued on the fly by the testbed
//! CA (PEM, ECDSA P-256 PKCS#8), cached per host. TLS toward origins: verified against
//! the upstream CA.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use rcgen::{
    date_time_ymd, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer,
    KeyPair,
};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// ALPN offered to browsers and to origins: HTTP/2 first, like Chromium.
pub fn alpn() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec(), b"http/1.1".to_vec()]
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Issues and caches per-host leaf certificates.
pub struct LeafIssuer {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    /// One key for all leaves: generating a key per host would cost a few ms per origin
    /// for no security benefit in a lab proxy.
    leaf_key: KeyPair,
    cache: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl LeafIssuer {
    pub fn from_pem(ca_cert_pem: &str, ca_key_pem: &str) -> Result<Self> {
        let key = KeyPair::from_pem(ca_key_pem)
            .map_err(|e| anyhow!("CA key: expected a PEM PKCS#8 private key: {e}"))?;
        let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, key)
            .map_err(|e| anyhow!("CA certificate: expected a PEM X.509 certificate: {e}"))?;
        let ca_der = CertificateDer::from_pem_slice(ca_cert_pem.as_bytes())
            .map_err(|e| anyhow!("CA certificate: {e}"))?;
        let leaf_key = KeyPair::generate().context("generating the leaf key")?;
        Ok(LeafIssuer {
            issuer,
            ca_der,
            leaf_key,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The TLS server configuration presenting a certificate for `host`.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>> {
        let host = host.to_ascii_lowercase();
        if let Some(c) = self.cache.lock().expect("cert cache").get(&host) {
            return Ok(c.clone());
        }
        let cfg = Arc::new(self.make(&host)?);
        self.cache
            .lock()
            .expect("cert cache")
            .insert(host, cfg.clone());
        Ok(cfg)
    }

    fn make(&self, host: &str) -> Result<ServerConfig> {
        let mut params = CertificateParams::new(vec![host.to_string()])
            .with_context(|| format!("certificate for {host:?}"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let year = 1970
            + (SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
                / 31_556_952) as i32;
        params.not_before = date_time_ymd(year - 1, 1, 1);
        params.not_after = date_time_ymd(year + 1, 12, 31);
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .with_context(|| format!("signing the certificate for {host:?}"))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone(), self.ca_der.clone()], key)?;
        cfg.alpn_protocols = alpn();
        Ok(cfg)
    }
}

/// Client configuration for origins: roots from `pem` (one or more certificates).
// Not dchannel_base::tls::roots_from_pem_file: the roots come as PEM text in the Config
// (read by main.rs under its flag's name, or made in memory by the tests), not a file.
pub fn client_config(roots_pem: &str) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    let mut n = 0;
    for c in CertificateDer::pem_slice_iter(roots_pem.as_bytes()) {
        roots.add(c.map_err(|e| anyhow!("upstream CA: {e}"))?)?;
        n += 1;
    }
    if n == 0 {
        anyhow::bail!("upstream CA: expected at least one PEM certificate");
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn();
    Ok(Arc::new(cfg))
}
