//! Why a received datagram was dropped (each reason has its own counter), and
//! why a datagram could not be sealed.
//!
//! A dropped datagram is never answered: the caller counts it and moves on.
//! The one exception is `cookie_replied`: the table itself answers such an
//! initiation with a cookie reply (crate::cookie), through `poll_transmit`.

dchannel_core::counter_table! {
    /// Why [`crate::Peers::open`] refused a datagram (`crypto.drops.<name>`
    /// in the agent's stats). Nothing is ever sent in reply, except the cookie
    /// reply of [`CryptoDrop::CookieReplied`].
    pub enum CryptoDrop {
        /// Shorter than its type's fixed part (or than the header plus tag)
        Truncated,
        /// First byte is not one of the encrypted message types
        UnknownType,
        /// Transport datagram or response for a session index we do not have (never had, expired, or replaced and past its grace period)
        UnknownIndex,
        /// The session is older than the reject-after time
        Expired,
        /// The counter was seen before on this channel (replay or duplicate)
        Replay,
        /// The counter is older than the anti-replay window of this channel
        TooOld,
        /// The counter is past the reject-after-messages limit
        CounterLimit,
        /// The AEAD tag did not verify: forged, corrupted, wrong key or wrong channel
        AuthFailed,
        /// Handshake initiation over the per-source or global rate limit (no work done)
        RateLimited,
        /// Handshake message that did not decrypt or parse
        HandshakeInvalid,
        /// Valid initiation from a static key that is not configured
        UnknownPeer,
        /// Initiation whose stamp is not newer than the last accepted one from that peer
        HandshakeReplay,
        /// Response (or cookie reply) to no initiation we have in flight
        UnexpectedResponse,
        /// Handshake message whose mac1 is not keyed by our public key or does not cover it (checked first: no token, state or Diffie-Hellman spent)
        BadMac1,
        /// Initiation while under load without a valid mac2 for its source address: answered with a cookie reply only (no token, state or Diffie-Hellman spent)
        CookieReplied,
    }
}

/// One counter per [`CryptoDrop`] reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    counts: [u64; CryptoDrop::COUNT],
}

impl DropCounts {
    /// Counts one drop.
    pub fn add(&mut self, reason: CryptoDrop) {
        self.counts[reason as usize] += 1;
    }

    /// The count for `reason`.
    pub fn get(&self, reason: CryptoDrop) -> u64 {
        self.counts[reason as usize]
    }

    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(name, count)` for every reason, in a fixed order (for stats JSON).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        CryptoDrop::ALL.iter().map(|r| (r.name(), self.get(*r)))
    }
}

/// [`DropCounts`] that threads add to concurrently (relaxed atomics: each
/// counter is independent and read only for reporting).
#[derive(Debug, Default)]
pub(crate) struct SharedDropCounts {
    counts: [std::sync::atomic::AtomicU64; CryptoDrop::COUNT],
}

impl SharedDropCounts {
    /// Counts one drop.
    pub(crate) fn add(&self, reason: CryptoDrop) {
        self.counts[reason as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts as of now.
    pub(crate) fn snapshot(&self) -> DropCounts {
        DropCounts {
            counts: std::array::from_fn(|i| {
                self.counts[i].load(std::sync::atomic::Ordering::Relaxed)
            }),
        }
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
        c.add(CryptoDrop::Replay);
        c.add(CryptoDrop::Replay);
        c.add(CryptoDrop::AuthFailed);
        assert_eq!(c.get(CryptoDrop::Replay), 2);
        assert_eq!(c.get(CryptoDrop::AuthFailed), 1);
        assert_eq!(c.get(CryptoDrop::TooOld), 0);
        assert_eq!(c.total(), 3);
        let names: std::collections::HashSet<_> = c.iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), CryptoDrop::COUNT);
        // the `crypto.drops` keys of the agent's stats
        assert_eq!(
            CryptoDrop::ALL.map(CryptoDrop::name),
            [
                "truncated",
                "unknown_type",
                "unknown_index",
                "expired",
                "replay",
                "too_old",
                "counter_limit",
                "auth_failed",
                "rate_limited",
                "handshake_invalid",
                "unknown_peer",
                "handshake_replay",
                "unexpected_response",
                "bad_mac1",
                "cookie_replied",
            ]
        );
        for (i, r) in CryptoDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }
}
