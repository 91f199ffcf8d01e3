//! Devices for the endpoint's tests of several devices at one gateway
//! (limits_tests, share_tests): written once so both build the same peers.

use super::PeerConfig;

/// Device `i` with token `token`: tunnel address 198.19.0.`i`, its HBC and LLC
/// endpoints (198.18.1.`i`:5000, 198.18.2.`i`:5001) known from the start.
pub(super) fn device(i: u8, token: u64) -> PeerConfig {
    PeerConfig {
        name: format!("dev{i}"),
        token,
        tunnel_addr: Some(format!("198.19.0.{i}").parse().unwrap()),
        endpoints: [
            Some(format!("198.18.1.{i}:5000").parse().unwrap()),
            Some(format!("198.18.2.{i}:5001").parse().unwrap()),
        ],
    }
}
