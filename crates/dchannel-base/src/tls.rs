//! The trust roots of a TLS client, read from a PEM file (the testbed's CA), written once
//! for every client that trusts only that CA (bguser's Chromium-like client, webreplay's
//! h3get). The crypto provider and the rest of the configuration stay with the caller.

use std::path::Path;

use anyhow::{bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

/// The trust roots in the PEM file `path`: every `CERTIFICATE` block in it (other blocks,
/// such as keys, are passed over). An error names the file and what was expected: a
/// readable file, well-formed PEM, certificates usable as trust anchors, at least one.
pub fn roots_from_pem_file(path: &Path) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read CA file {}", path.display()))?;
    for (i, cert) in certs.enumerate() {
        let n = i + 1;
        let cert = cert.with_context(|| {
            format!(
                "CA file {}: certificate {n}: bad PEM (expected base64 between \
                 -----BEGIN CERTIFICATE----- and -----END CERTIFICATE-----)",
                path.display()
            )
        })?;
        roots.add(cert).with_context(|| {
            format!(
                "CA file {}: certificate {n}: unusable as a trust anchor \
                 (expected a DER X.509 certificate)",
                path.display()
            )
        })?;
    }
    if roots.is_empty() {
        bail!(
            "CA file {}: no certificate in it (expected at least one \
             -----BEGIN CERTIFICATE----- block)",
            path.display()
        );
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A self-signed test root (`CN=bguser test root`, P-256).
    const CA_PEM: &str = include_str!("../tests/data/ca.pem");

    fn file(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f
    }

    fn error(content: &str) -> (String, String) {
        let f = file(content);
        let e = roots_from_pem_file(f.path()).unwrap_err();
        (format!("{e:#}"), f.path().display().to_string())
    }

    #[test]
    fn every_certificate_becomes_a_root_and_other_blocks_are_passed_over() {
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let f = file(&format!("{CA_PEM}{key}{CA_PEM}"));
        assert_eq!(roots_from_pem_file(f.path()).unwrap().len(), 2);
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = roots_from_pem_file(Path::new("/nonexistent/ca.pem")).unwrap_err();
        assert!(
            format!("{e}").starts_with("cannot read CA file /nonexistent/ca.pem"),
            "{e}"
        );
    }

    #[test]
    fn a_file_without_certificates_says_what_was_expected() {
        let (e, path) = error("not PEM at all\n");
        assert_eq!(
            e,
            format!(
                "CA file {path}: no certificate in it (expected at least one \
                 -----BEGIN CERTIFICATE----- block)"
            )
        );
    }

    #[test]
    fn bad_base64_names_the_file_and_the_certificate() {
        let (e, path) = error(&format!(
            "{CA_PEM}-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"
        ));
        let want = format!("CA file {path}: certificate 2: bad PEM (expected base64");
        assert!(e.starts_with(&want), "{e}");
    }

    #[test]
    fn a_block_that_is_not_a_certificate_is_unusable() {
        // "AAAA" is valid base64 (three zero bytes) but no DER certificate
        let (e, path) = error("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        let want = format!(
            "CA file {path}: certificate 1: unusable as a trust anchor \
             (expected a DER X.509 certificate)"
        );
        assert!(e.starts_with(&want), "{e}");
    }
}
