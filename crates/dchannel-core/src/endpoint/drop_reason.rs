//! Why the endpoint refused a packet or a datagram. Every reason has its own
//! stable counter name (`malformed.<name>` in the agent's stats), so a drop is
//! never silent.

use crate::wire::WireError;
use std::fmt;

/// Why a datagram (receive half) or an inner packet (send half) was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The dchannel header or body did not decode (truncated, unknown
    /// version or type, bad probe, empty data).
    Wire(WireError),
    /// Not authentic: token of no configured peer (version 1, `--insecure`).
    BadToken,
    /// Refused by the AEAD layer (dchannel-crypto): forged, replayed, too old,
    /// truncated, unknown session, a handshake that failed or was rate
    /// limited... `name` is the layer's stable counter name, `code` its index
    /// in the layer's list of reasons (for fixed counter arrays).
    Crypto {
        /// Index of the reason in the layer's list.
        code: u8,
        /// Stable counter name (e.g. `auth_failed`, `replay`).
        name: &'static str,
    },
    /// Send half (and probes): no session with the peer yet or any more (a
    /// handshake is under way); the packet is dropped.
    NoSession,
    /// Authentic, but from an address other than the peer's configured
    /// endpoint on that channel (client role: only the gateway may send).
    ForeignSource,
    /// Data whose inner source is not the sending client's tunnel address.
    SpoofedSource,
    /// Data whose inner packet is not IPv4/IPv6, where the source must be checked.
    BadInner,
    /// Send half: an inner packet for an address of no configured client (gateway).
    NoClient,
    /// Send half: no endpoint known for the peer on either channel yet (gateway).
    NoEndpoint,
}

impl DropReason {
    /// Stable counter name, as in the stats JSON (`malformed.<name>`).
    pub fn counter(&self) -> &'static str {
        match self {
            DropReason::Wire(e) => e.counter(),
            DropReason::BadToken => "bad_token",
            DropReason::Crypto { name, .. } => name,
            DropReason::NoSession => "no_session",
            DropReason::ForeignSource => "foreign_source",
            DropReason::SpoofedSource => "spoofed_source",
            DropReason::BadInner => "bad_inner",
            DropReason::NoClient => "no_client",
            DropReason::NoEndpoint => "no_endpoint",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::Wire(e) => write!(f, "{e}"),
            DropReason::BadToken => write!(f, "token of no configured peer"),
            DropReason::Crypto { name, .. } => write!(f, "not authentic ({name})"),
            DropReason::NoSession => write!(f, "no session with the peer (handshake pending)"),
            DropReason::ForeignSource => write!(f, "not from the peer's endpoint"),
            DropReason::SpoofedSource => {
                write!(f, "inner source is not the client's tunnel address")
            }
            DropReason::BadInner => write!(f, "inner packet is not IPv4/IPv6"),
            DropReason::NoClient => write!(f, "inner destination is no configured client"),
            DropReason::NoEndpoint => write!(f, "no endpoint known for the peer yet"),
        }
    }
}

impl From<WireError> for DropReason {
    fn from(e: WireError) -> Self {
        DropReason::Wire(e)
    }
}
