//! Runtime configuration of the proxy (built by `main` from the command line, or by tests).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::corpus::SizeOracle;
use crate::estimate::Prior;
use crate::policy::PolicyKind;

/// Where a channel's upstream connections go out: `SO_BINDTODEVICE` and/or a source address.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    pub dev: Option<String>,
    pub src: Option<IpAddr>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub policy: PolicyKind,
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    /// Roots that origin certificates must chain to.
    pub upstream_ca_pem: String,
    /// Indexed by `Channel::index()`: HBC, LLC.
    pub bindings: [Binding; 2],
    pub priors: [Prior; 2],
    pub static_estimates: bool,
    pub oracle: Option<SizeOracle>,
    /// HTTP/1.1 keep-alive connections per origin and channel (Chromium: 6).
    pub h1_per_origin: usize,
    /// Interface counter sampling period (for the current/max rate).
    pub rate_sample: Duration,
}
