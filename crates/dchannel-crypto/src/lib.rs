//! dchannel-crypto: sans-I/O authenticated encryption of dchannel datagrams.
//!
//! What it does (docs/wire.md, "Encrypted datagrams"):
//!
//! - **Keys** ([`keys`]): per-device static X25519 key pairs, base64 key files
//!   (private keys mode 0600, refused when group/world readable or owned by
//!   another user), public keys of small order refused ([`low_order`]), and
//!   the gateway's device list ([`devices`], TOML `[[device]]`).
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
//! - **The agent's seam** ([`endpoint`]): [`endpoint::AeadAuth`] implements
//!   `dchannel_core::endpoint::DatagramAuth`, so the agent's endpoint seals,
//!   opens, handshakes and rekeys through it.
//! - **Flood bounds** ([`mac`], [`cookie`], [`ratelimit`]): every handshake
//!   message carries a `mac1` keyed by its receiver's public key, checked
//!   before anything else; under load an initiation also needs a `mac2` from a
//!   cookie proving its source address (WireGuard §5.4.4–5.4.7); only then does
//!   it take tokens from a bucket per source address and a global one, before
//!   any Diffie-Hellman work.
//!
//! Nothing here touches a socket, a clock or a thread: every entry point takes
//! `now` ([`Nanos`], monotonic nanoseconds from any fixed epoch) and the driver
//! sends what [`Peers::poll_transmit`] hands out and calls
//! [`Peers::handle_timeout`] at [`Peers::poll_timeout`]. Randomness (ephemeral
//! keys, session indices) comes from the operating system's generator.
//!
//! Hot path: [`Peers::seal`] and [`Peers::open`] work in place in a buffer the
//! caller owns and allocate nothing.
//!
//! # Driving it
//!
//! ```
//! use dchannel_crypto::format::{MAX_HANDSHAKE_LEN, PREFIX_LEN, TAG_LEN};
//! use dchannel_crypto::{Channel, Config, Opened, Peers, PrivateKey};
//!
//! let (dev_key, gw_key) = (PrivateKey::generate(), PrivateKey::generate());
//! // the device knows the gateway's public key; the gateway has its device list
//! let mut dev = Peers::new(dev_key.clone(), Config::default());
//! let gw_peer = dev.add_peer(gw_key.public_key(), "gateway", true).unwrap();
//! let mut gw = Peers::new(gw_key, Config::default());
//! gw.add_peer(dev_key.public_key(), "phone-1", false).unwrap();
//! let (dev_addr, gw_addr) = ("198.18.0.2:9000".parse().unwrap(), "198.18.0.1:9000".parse().unwrap());
//!
//! // a packet to send: room for the prefix, the 16-byte header, the payload, the tag
//! let payload = b"an inner IP packet";
//! let mut buf = vec![0u8; PREFIX_LEN + 16 + payload.len() + TAG_LEN];
//! buf[PREFIX_LEN + 16..][..payload.len()].copy_from_slice(payload);
//! // no session yet: the packet is dropped and a handshake is queued
//! assert!(dev.seal(0, gw_peer, Channel::Hbc, &mut buf, payload.len()).is_err());
//!
//! // the driver loop: timers, then everything queued goes out
//! let mut hs = [0u8; MAX_HANDSHAKE_LEN];
//! dev.handle_timeout(0); // poll_timeout() said 0
//! let t = dev.poll_transmit(&mut hs).unwrap(); // initiation, on t.channel
//! gw.open(0, t.channel, dev_addr, &mut hs[..t.len]).unwrap();
//! let t = gw.poll_transmit(&mut hs).unwrap(); // response, to t.to
//! let r = dev.open(1, t.channel, gw_addr, &mut hs[..t.len]).unwrap();
//! assert_eq!(r, Opened::Handshake { peer: gw_peer, established: true });
//!
//! // now the packet goes through, sealed in place
//! let n = dev.seal(2, gw_peer, Channel::Hbc, &mut buf, payload.len()).unwrap();
//! match gw.open(3, Channel::Hbc, dev_addr, &mut buf[..n]).unwrap() {
//!     Opened::Data { payload: p, .. } => assert_eq!(&buf[p], payload),
//!     other => panic!("{other:?}"),
//! }
//! ```
#![warn(missing_docs)]

pub mod aead;
pub mod cookie;
pub mod devices;
pub mod drop;
pub mod endpoint;
pub mod format;
pub mod handshake;
pub mod keys;
pub mod low_order;
pub mod mac;
pub mod peer;
pub mod peers;
pub mod ratelimit;
pub mod replay;
pub mod session;
mod slots;

pub use aead::Cipher;
pub use drop::{CryptoDrop, DropCounts, SealError};
pub use keys::{PrivateKey, PublicKey};
pub use peers::{Config, Limits, Opened, PeerId, Peers, Transmit};

/// Monotonic time in nanoseconds since an epoch the driver picks (it never goes back).
pub use dchannel_base::Nanos;

/// Nanoseconds per second.
pub const SECOND: Nanos = 1_000_000_000;

/// The channel a datagram travels on (the project's one definition). Part of every
/// transport nonce, so a datagram moved from one channel to the other fails
/// authentication.
pub use dchannel_base::Channel;
