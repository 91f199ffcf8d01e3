//! dchannel-crypto: sans-I/O authenticated encryption of dchannel datagrams.
//!
//! What it does (docs/wire.md, "Encrypted datagrams"):
//!
//! - **Keys** ([`keys`]): per-device static X25519 key pairs, base64 key files
//!   (private keys mode 0600, refused when group/world readable), and the
//!   gateway's device list ([`devices`], TOML `[[device]]`).
//! - **Handshake** ([`handshake`]): Noise `IK` (`Noise_IK_25519_ChaChaPoly_BLAKE2s`,
//!   the `snow` crate), two datagrams with a type byte; either channel may carry
//!   them, a lost one is retried on the other channel.
//! - **Transport** ([`session`], [`aead`]): every datagram sealed with an AEAD
//!   (AES-256-GCM or ChaCha20-Poly1305, `ring`), the dchannel header as
//!   associated data, an explicit 64-bit counter per channel and a sliding
//!   anti-replay window per channel ([`replay`]).
//! - **Lifecycle** ([`peer`], [`peers`]): rekey by time and by volume, the old
//!   session kept briefly for datagrams in flight; a [`Peers`] table keyed by
//!   static public key (one peer at the device, thousands at the gateway).
//! - **Flood bounds** ([`ratelimit`]): handshake initiations pass a token bucket
//!   per source address and a global one before any Diffie-Hellman work.
//!
//! Nothing here touches a socket, a clock or a thread: every entry point takes
//! `now` ([`Nanos`], monotonic nanoseconds from any fixed epoch) and the driver
//! sends what [`Peers::poll_transmit`] hands out and calls
//! [`Peers::handle_timeout`] at [`Peers::poll_timeout`]. Randomness (ephemeral
//! keys, session indices) comes from the operating system's generator.
//!
//! Hot path: [`Peers::seal`] and [`Peers::open`] work in place in a buffer the
//! caller owns and allocate nothing.
#![warn(missing_docs)]

pub mod aead;
pub mod devices;
pub mod drop;
pub mod format;
pub mod handshake;
pub mod keys;
pub mod peer;
pub mod peers;
pub mod ratelimit;
pub mod replay;
pub mod session;

pub use aead::Cipher;
pub use drop::{Drop, DropCounts, SealError};
pub use keys::{PrivateKey, PublicKey};
pub use peers::{Config, Limits, Opened, PeerId, Peers, Transmit};

/// Monotonic time in nanoseconds since an epoch the driver picks (it never goes back).
pub type Nanos = u64;

/// Nanoseconds per second.
pub const SECOND: Nanos = 1_000_000_000;

/// The channel a datagram travels on. Part of every transport nonce, so a datagram
/// moved from one channel to the other fails authentication.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    /// The high-bandwidth channel.
    Hbc = 0,
    /// The low-latency channel.
    Llc = 1,
}

impl Channel {
    /// Both channels, in index order.
    pub const ALL: [Channel; 2] = [Channel::Hbc, Channel::Llc];

    /// 0 for the HBC, 1 for the LLC.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The other channel.
    pub fn other(self) -> Channel {
        match self {
            Channel::Hbc => Channel::Llc,
            Channel::Llc => Channel::Hbc,
        }
    }

    /// Lower-case name (`hbc`, `llc`).
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Hbc => "hbc",
            Channel::Llc => "llc",
        }
    }
}
