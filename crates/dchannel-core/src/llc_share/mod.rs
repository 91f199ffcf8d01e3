//! Sharing one URLLC (LLC) channel among many devices (issue 41, item 3).
//!
//! Algorithm 1 (NSDI'23 §4.1) assumes the LLC is the sender's own: its
//! `queue_llc` is a virtual queue fed only by that sender's packets
//! ([`crate::llc_queue`]). A real URLLC slice is shared by every device in the
//! cell, so the rules below decide how devices share it. Each lives in its own
//! file with its rule at the top; all are sans-I/O (explicit `now`, no clock).
//!
//! * **(a) No coordination** — today's agents: each device estimates the LLC
//!   queue from its own traffic only ([`crate::llc_queue::LlcQueue`]) and
//!   ignores everyone else's. Nothing to add here; it is the baseline.
//! * **(b) Per-device share at the gateway** — [`per_device_share`]: a token
//!   bucket per device (rate = its share of C, burst stated); a packet that
//!   Algorithm 1 put on the LLC but is over its device's budget goes to the
//!   HBC instead, never dropped.
//! * **(c) Learning the shared delay from probes** — [`probe_delay`]: the LLC
//!   probe RTTs the agent already takes (NSDI'23 §4.2, [`crate::rtt`]) minus
//!   the base RTT and minus the sender's own queue give the other users'
//!   queue in bytes, which Algorithm 1's `queue_llc` adds to its own virtual
//!   queue; the estimate decays when probes show the queue draining.
//! * **(d) Handshake/control packets prioritised in the shared LLC queue** —
//!   a property of the shared queue itself, so it belongs to the channel
//!   emulator (`chanemu --control-first`, chanemu's `priority.rs`), not to the
//!   agent's core.
//!
//! Wiring (docs/llc_sharing.md): (b) is a [`ShareBucket`] in each sender's
//! [`crate::steer::Steerer`] (`--llc-share token-bucket`); (c) a
//! [`SharedLlcDelay`] per peer in the endpoint's receive half, whose estimate
//! reaches the policy as [`crate::steer::ChannelView::llc_others`]
//! (`--llc-share probe`).

pub mod per_device_share;
pub mod probe_delay;

pub use per_device_share::{PerDeviceShare, ShareBucket, ShareConfig, ShareStats};
pub use probe_delay::{SharedDelayConfig, SharedLlcDelay};

use std::fmt;

/// A sharing setting that cannot work, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The setting at fault (e.g. `rate_bps`, `capacity_bps`).
    pub field: &'static str,
    /// What was expected of it.
    pub expected: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LLC sharing: {}: expected {}", self.field, self.expected)
    }
}

impl std::error::Error for ConfigError {}
