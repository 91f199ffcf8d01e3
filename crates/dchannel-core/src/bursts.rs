//! How bursty a sender's packets are on each channel: a burst is a run of
//! packets sent on one channel with less than [`BURST_GAP`] between each and
//! the previous; the agents count bursts per channel (`channels.<ch>.tx_bursts`)
//! beside the packets, so packets / bursts is the mean burst. At the gateway
//! this is the servers' sending pattern as it arrived (the send half steers
//! each packet when it is read): a paced sender (QUIC's pacer, RFC 9002 §7.7)
//! makes more, shorter bursts than an ACK-clocked TCP sender without pacing
//! (issue 39: one candidate reason why QUIC gains differently).

use crate::{Channel, Nanos, MS};

/// A gap of at least this long since the channel's previous packet starts a burst.
pub const BURST_GAP: Nanos = MS;

/// Per channel, when its previous packet was sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct BurstMeter {
    last: [Option<Nanos>; 2],
}

impl BurstMeter {
    /// A packet is sent on `ch` at `now`: does it start a burst? (The first
    /// packet on a channel does.)
    pub fn on_send(&mut self, now: Nanos, ch: Channel) -> bool {
        let last = self.last[ch.index()].replace(now);
        last.map_or(true, |t| now.saturating_sub(t) >= BURST_GAP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const US: Nanos = MS / 1000;

    #[test]
    fn a_gap_of_one_ms_starts_a_burst_per_channel() {
        let mut m = BurstMeter::default();
        // HBC at 0, 0.2, 0.9 ms: one burst (gaps 0.2 and 0.7 ms); at 1.9 ms
        // (gap exactly 1 ms) a second; at 2.0 ms the same one.
        let hbc = [0, 200 * US, 900 * US, 1900 * US, 2000 * US].map(|t| m.on_send(t, Channel::Hbc));
        assert_eq!(hbc, [true, false, false, true, false]);
        // the LLC's first packet starts its own burst, whatever the HBC did
        assert!(m.on_send(2000 * US, Channel::Llc));
        assert!(!m.on_send(2500 * US, Channel::Llc));
        // the HBC's previous packet (2.0 ms), not the LLC's, is what counts
        assert!(m.on_send(3000 * US, Channel::Hbc));
        // segments of one super-packet share `now`: one burst
        assert!(!m.on_send(3000 * US, Channel::Hbc));
    }
}
