//! The gateway's log of refused handshakes: a device with a wrong gateway key,
//! a key missing from `--devices` or a flood is otherwise only a counter.
//! At most one warn line per [`EVERY`], with the refusals since the last line
//! per reason and their totals.

use dchannel_crypto::{CryptoDrop, DropCounts};
use std::time::{Duration, Instant};

/// At most one line this often.
pub const EVERY: Duration = Duration::from_secs(10);

/// The drop reasons that are refused handshakes, with what they usually mean.
const REFUSALS: [(CryptoDrop, &str); 6] = [
    (
        CryptoDrop::BadMac1,
        "wrong gateway key on the device, or junk",
    ),
    (
        CryptoDrop::HandshakeInvalid,
        "forged or corrupted initiation",
    ),
    (CryptoDrop::UnknownPeer, "device key not in --devices"),
    (CryptoDrop::HandshakeReplay, "replayed initiation"),
    (CryptoDrop::RateLimited, "handshake flood"),
    (
        CryptoDrop::CookieReplied,
        "under load: answered with a cookie",
    ),
];

/// Remembers what was last logged.
#[derive(Default)]
pub struct RefusalLog {
    logged: [u64; REFUSALS.len()],
    at: Option<Instant>,
}

impl RefusalLog {
    /// The line to log at `now` given the drop counters, if handshakes were
    /// refused since the last line and that line is at least [`EVERY`] old.
    pub fn check(&mut self, now: Instant, drops: &DropCounts) -> Option<String> {
        if self.at.is_some_and(|t| now.duration_since(t) < EVERY) {
            return None;
        }
        let counts = REFUSALS.map(|(r, _)| drops.get(r));
        let new: u64 = counts.iter().zip(self.logged).map(|(c, l)| c - l).sum();
        if new == 0 {
            return None;
        }
        let parts: Vec<String> = REFUSALS
            .iter()
            .zip(counts.iter().zip(self.logged))
            .filter(|(_, (c, l))| *c > l)
            .map(|((r, why), (c, l))| format!("{} {} ({why}; {c} in all)", r.name(), c - l))
            .collect();
        self.logged = counts;
        self.at = Some(now);
        Some(format!(
            "refused {new} handshake message(s): {}",
            parts.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_with_the_refusals_since_the_last() {
        let t0 = Instant::now();
        let mut log = RefusalLog::default();
        let mut d = DropCounts::default();
        assert_eq!(log.check(t0, &d), None, "nothing refused");
        d.add(CryptoDrop::AuthFailed); // not a handshake
        assert_eq!(log.check(t0, &d), None);
        for _ in 0..3 {
            d.add(CryptoDrop::HandshakeInvalid);
        }
        let want = "refused 3 handshake message(s): handshake_invalid 3 \
                    (forged or corrupted initiation; 3 in all)";
        assert_eq!(log.check(t0, &d).as_deref(), Some(want));
        d.add(CryptoDrop::HandshakeInvalid);
        d.add(CryptoDrop::UnknownPeer);
        assert_eq!(
            log.check(t0 + Duration::from_secs(9), &d),
            None,
            "rate-limited"
        );
        let want = "refused 2 handshake message(s): handshake_invalid 1 \
                    (forged or corrupted initiation; 4 in all), unknown_peer 1 \
                    (device key not in --devices; 1 in all)";
        assert_eq!(log.check(t0 + EVERY, &d).as_deref(), Some(want));
        // a device with a wrong gateway key: its mac1 is not the gateway's
        d.add(CryptoDrop::BadMac1);
        let want = "refused 1 handshake message(s): bad_mac1 1 \
                    (wrong gateway key on the device, or junk; 1 in all)";
        assert_eq!(log.check(t0 + 2 * EVERY, &d).as_deref(), Some(want));
        assert_eq!(log.check(t0 + 4 * EVERY, &d), None, "nothing new");
    }
}
