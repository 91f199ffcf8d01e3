//! The loopback set-up shared by the integration tests and the `loopback_overhead`
//! example: a throw-away CA and a proxy whose HBC leaves from 127.0.0.2 and LLC from
//! 127.0.0.3, with the paper's channels as static estimates.
// Each target uses its own subset (the example signs no origin certificates).
#![allow(dead_code)]

use std::time::Duration;

use objproxy::config::{Binding, Config};
use objproxy::corpus::SizeOracle;
use objproxy::estimate::Prior;
use objproxy::policy::PolicyKind;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// Source address of the HBC's upstream connections.
pub const HBC_SRC: &str = "127.0.0.2";
/// Source address of the LLC's upstream connections.
pub const LLC_SRC: &str = "127.0.0.3";

/// A test CA: the proxy's and the origins' certificates are signed by it.
pub struct Ca {
    pub cert_pem: String,
    pub key_pem: String,
    pub issuer: Issuer<'static, KeyPair>,
}

pub fn make_ca() -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "objproxy test CA");
    let cert = p.self_signed(&key).unwrap();
    let key_pem = key.serialize_pem();
    Ca {
        cert_pem: cert.pem(),
        key_pem,
        issuer: Issuer::new(p, key),
    }
}

/// A proxy on 127.0.0.1 (any port) running `policy`, trusting `ca` upstream.
pub fn loopback_config(ca: &Ca, policy: PolicyKind, oracle: Option<SizeOracle>) -> Config {
    let from = |src: &str| Binding {
        dev: None,
        src: Some(src.parse().unwrap()),
    };
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        policy,
        ca_cert_pem: ca.cert_pem.clone(),
        ca_key_pem: ca.key_pem.clone(),
        upstream_ca_pem: ca.cert_pem.clone(),
        bindings: [from(HBC_SRC), from(LLC_SRC)],
        // The paper's channels: eMBB 40 ms / 200 Mbit/s, URLLC 5 ms / 2 Mbit/s.
        priors: [
            Prior {
                rtt_ms: 40.0,
                rate: 25_000.0,
            },
            Prior {
                rtt_ms: 5.0,
                rate: 250.0,
            },
        ],
        static_estimates: true,
        oracle,
        h1_per_origin: 6,
        rate_sample: Duration::from_millis(250),
    }
}
