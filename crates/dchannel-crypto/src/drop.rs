//! Why a received datagram was dropped (each reason has its own counter), and
//! why a datagram could not be sealed.
//!
//! A dropped datagram is never answered: the caller counts it and moves on.

use std::fmt;

/// Why [`crate::Peers::open`] refused a datagram. Nothing is ever sent in reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drop {
    /// Shorter than its type's fixed part (or than the header plus tag).
    Truncated,
    /// First byte is not one of the encrypted message types.
    UnknownType,
    /// A transport datagram or response for a session index we do not have
    /// (never had, expired, or replaced and past its grace period).
    UnknownIndex,
    /// The session is older than the reject-after time.
    Expired,
    /// The counter was seen before on this channel (replay or duplicate).
    Replay,
    /// The counter is older than the anti-replay window of this channel.
    TooOld,
    /// The counter is past the reject-after-messages limit.
    CounterLimit,
    /// The AEAD tag did not verify: forged, corrupted, wrong key or wrong channel.
    AuthFailed,
    /// A handshake initiation over the per-source or global rate limit (no work done).
    RateLimited,
    /// A handshake message that did not decrypt or parse.
    HandshakeInvalid,
    /// A valid initiation from a static key that is not configured.
    UnknownPeer,
    /// An initiation whose stamp is not newer than the last accepted one from
    /// that peer (a replayed initiation).
    HandshakeReplay,
    /// A response to no initiation we have in flight.
    UnexpectedResponse,
}

impl Drop {
    /// Every reason, in counter order.
    pub const ALL: [Drop; 13] = [
        Drop::Truncated,
        Drop::UnknownType,
        Drop::UnknownIndex,
        Drop::Expired,
        Drop::Replay,
        Drop::TooOld,
        Drop::CounterLimit,
        Drop::AuthFailed,
        Drop::RateLimited,
        Drop::HandshakeInvalid,
        Drop::UnknownPeer,
        Drop::HandshakeReplay,
        Drop::UnexpectedResponse,
    ];

    /// Stable counter name for stats.
    pub fn as_str(self) -> &'static str {
        match self {
            Drop::Truncated => "truncated",
            Drop::UnknownType => "unknown_type",
            Drop::UnknownIndex => "unknown_index",
            Drop::Expired => "expired",
            Drop::Replay => "replay",
            Drop::TooOld => "too_old",
            Drop::CounterLimit => "counter_limit",
            Drop::AuthFailed => "auth_failed",
            Drop::RateLimited => "rate_limited",
            Drop::HandshakeInvalid => "handshake_invalid",
            Drop::UnknownPeer => "unknown_peer",
            Drop::HandshakeReplay => "handshake_replay",
            Drop::UnexpectedResponse => "unexpected_response",
        }
    }
}

impl fmt::Display for Drop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One counter per [`Drop`] reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    counts: [u64; Drop::ALL.len()],
}

impl DropCounts {
    /// Counts one drop.
    pub fn add(&mut self, reason: Drop) {
        self.counts[reason as usize] += 1;
    }

    /// The count for `reason`.
    pub fn get(&self, reason: Drop) -> u64 {
        self.counts[reason as usize]
    }

    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(name, count)` for every reason, in a fixed order (for stats JSON).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Drop::ALL.iter().map(|r| (r.as_str(), self.get(*r)))
    }
}

/// Why [`crate::Peers::seal`] produced no datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// No usable session with this peer yet (or it expired). A handshake has been
    /// queued if this side may initiate; the packet should be dropped (and counted).
    #[error("no session with the peer (handshake pending)")]
    NoSession,
    /// The buffer is too short for prefix, header, payload and tag.
    #[error("buffer of {have} bytes, need {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// No peer with this id.
    #[error("unknown peer id")]
    UnknownPeer,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_reason_and_names_are_unique() {
        let mut c = DropCounts::default();
        c.add(Drop::Replay);
        c.add(Drop::Replay);
        c.add(Drop::AuthFailed);
        assert_eq!(c.get(Drop::Replay), 2);
        assert_eq!(c.get(Drop::AuthFailed), 1);
        assert_eq!(c.get(Drop::TooOld), 0);
        assert_eq!(c.total(), 3);
        let names: std::collections::HashSet<_> = c.iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), Drop::ALL.len());
        for (i, r) in Drop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }
}
