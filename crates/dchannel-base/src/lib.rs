//! What every dchannel crate shares, written once: the clock unit
//! ([`Nanos`]), the two channels ([`Channel`]), the HTTP hop-by-hop header
//! list ([`http::HOP_BY_HOP`]), and behind features the TUN device set-up
//! (`tun`), the lab's delay oracle file (`oracle`), a TLS client's trust
//! roots from a PEM file (`tls`) and the harness of the crates' integration
//! tests (`testing`).
//!
//! The default build has no dependency and no I/O, so the sans-I/O crates
//! (dchannel-core, chanemu's stages, dchannel-crypto) can use it freely.
#![warn(missing_docs)]

mod channel;
pub mod http;
#[cfg(feature = "oracle")]
pub mod oracle;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "tun")]
pub mod tun;

pub use channel::Channel;

/// Time in nanoseconds since an epoch the driver picks (monotonic). Exact for
/// the serialisation time of a 1500-byte packet at 1 Gbit/s (12 000 ns);
/// overflows after 584 years.
pub type Nanos = u64;

/// One microsecond in [`Nanos`].
pub const US: Nanos = 1_000;
/// One millisecond in [`Nanos`].
pub const MS: Nanos = 1_000_000;
/// One second in [`Nanos`].
pub const SECOND: Nanos = 1_000_000_000;
