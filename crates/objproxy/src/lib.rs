//! objproxy: object-level steering in a client-side HTTP/HTTPS proxy.
//!
//! The sans-I/O parts — [`policy`], [`discovery`], [`estimate`], [`corpus`] — hold every
//! decision; [`proxy`], [`upstream`], [`certs`] and [`tcpinfo`] are the thin I/O drivers.

pub mod certs;
pub mod config;
pub mod corpus;
pub mod discovery;
pub mod estimate;
pub mod fetch;
pub mod metered;
pub mod policy;
pub mod proxy;
pub mod stats;
pub mod tcpinfo;
pub mod upstream;
