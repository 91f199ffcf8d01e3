//! Reported channel liveness (logs and metrics), per peer and channel.
//!
//! Steering has its own, quicker rule ([`RttEstimator::alive`](crate::rtt::RttEstimator::alive):
//! one silent probe round takes the LLC out of use). What an operator is told
//! must not flap on one lost probe: a channel is reported **down** once nothing
//! has been heard on it for [`MISSED_ROUNDS`] probe intervals, and **up** again
//! at the first datagram heard on it. A channel never heard is neither (it is
//! "not up" in the metrics, and no transition is logged: a gateway serving
//! thousands of devices would otherwise log every absent one).

use crate::{Channel, Nanos};

/// Probe rounds without any reply after which a channel is reported down.
pub const MISSED_ROUNDS: u64 = 3;

/// A reported change of a channel's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// The channel.
    pub channel: Channel,
    /// Up (true) or down.
    pub up: bool,
    /// Down: how long the channel has been silent; up: how long it was
    /// reported down.
    pub after: Nanos,
}

/// One peer's reported state of both channels.
#[derive(Clone, Debug)]
pub struct Liveness {
    silence: Nanos,
    /// `None` until first heard; then up (true) or down.
    up: [Option<bool>; 2],
    /// When the channel was last reported down.
    down_since: [Nanos; 2],
    /// Transitions to down, per channel.
    pub downs: [u64; 2],
}

impl Liveness {
    /// Down after [`MISSED_ROUNDS`] probe intervals of `interval` without a reply.
    pub fn new(interval: Nanos) -> Liveness {
        Liveness {
            silence: MISSED_ROUNDS * interval,
            up: [None, None],
            down_since: [0, 0],
            downs: [0, 0],
        }
    }

    /// The state of `ch` at `now`, given when anything was last heard on it;
    /// returns the change, if the state changed.
    pub fn update(&mut self, ch: Channel, now: Nanos, last_heard: Option<Nanos>) -> Option<Change> {
        let i = ch.index();
        let heard = last_heard?;
        let silent = now.saturating_sub(heard);
        let up = silent <= self.silence;
        let was = self.up[i].replace(up);
        match (was, up) {
            (Some(true), false) => {
                self.down_since[i] = now;
                self.downs[i] += 1;
                Some(Change {
                    channel: ch,
                    up,
                    after: silent,
                })
            }
            (Some(false), true) => Some(Change {
                channel: ch,
                up,
                after: now.saturating_sub(self.down_since[i]),
            }),
            _ => None,
        }
    }

    /// Whether `ch` is reported up (false until first heard).
    pub fn is_up(&self, ch: Channel) -> bool {
        self.up[ch.index()] == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;

    const LLC: Channel = Channel::Llc;

    #[test]
    fn down_after_three_silent_probe_intervals_up_at_the_first_reply() {
        let mut l = Liveness::new(500 * MS);
        assert_eq!(l.update(LLC, 100 * MS, None), None, "never heard: no state");
        assert!(!l.is_up(LLC));
        assert_eq!(
            l.update(LLC, 1_000 * MS, Some(1_000 * MS)),
            None,
            "first heard: up, quietly"
        );
        assert!(l.is_up(LLC));
        // last reply at 1 s: still up at 2.5 s (1.5 s = 3 intervals), down after
        assert_eq!(l.update(LLC, 2_500 * MS, Some(1_000 * MS)), None);
        let down = l.update(LLC, 2_550 * MS, Some(1_000 * MS));
        assert_eq!(
            down,
            Some(Change {
                channel: LLC,
                up: false,
                after: 1_550 * MS
            })
        );
        assert!(!l.is_up(LLC));
        assert_eq!(
            l.update(LLC, 7_000 * MS, Some(1_000 * MS)),
            None,
            "down once"
        );
        assert_eq!(l.downs, [0, 1]);
        // a reply at 7.52 s, seen at the next update: up, after 4.97 s down
        let up = l.update(LLC, 7_520 * MS, Some(7_520 * MS));
        assert_eq!(
            up,
            Some(Change {
                channel: LLC,
                up: true,
                after: 4_970 * MS
            })
        );
        assert!(l.is_up(LLC));
        assert!(!l.is_up(Channel::Hbc), "the other channel is separate");
    }

    #[test]
    fn one_lost_probe_round_is_not_down() {
        let mut l = Liveness::new(500 * MS);
        l.update(LLC, 0, Some(0));
        for t in [500, 1_000, 1_500] {
            assert_eq!(l.update(LLC, t * MS, Some(0)), None, "{t} ms");
        }
        assert_eq!(l.update(LLC, 1_600 * MS, Some(1_550 * MS)), None);
        assert_eq!(l.downs, [0, 0]);
    }
}
