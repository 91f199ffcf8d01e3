//! Radio sleep (DRX), downlink only.
//!
//! After `inactivity` without traffic the device sleeps and wakes every
//! `wake_period`, counted from the moment it fell asleep. A downlink packet that
//! reaches the device while it sleeps waits for the next wake-up: one that
//! arrives 20 ms after the device fell asleep with a 40 ms wake period waits
//! another 20 ms. Any delivered downlink packet, and any uplink packet the
//! driver reports through [`Drx::note_activity`], counts as traffic.
//! Presets: mmWave 30 ms / 40 ms, low-band 100 ms / 20 ms.

use crate::time::Nanos;

/// The radio-sleep (DRX) stage of a downlink (see the module docs).
#[derive(Debug, Clone)]
pub struct Drx {
    inactivity: Nanos,
    wake_period: Nanos,
    /// Last traffic; the run starts with the radio just active.
    last_activity: Nanos,
}

impl Drx {
    /// Sleeps after `inactivity` without traffic; then wakes every `wake_period`.
    pub fn new(inactivity: Nanos, wake_period: Nanos) -> Self {
        Drx {
            inactivity,
            wake_period: wake_period.max(1),
            last_activity: 0,
        }
    }

    /// Traffic in the other direction at `t` keeps the radio awake.
    pub fn note_activity(&mut self, t: Nanos) {
        self.last_activity = self.last_activity.max(t);
    }

    /// When a downlink packet that reaches the radio at `t` is delivered.
    pub fn deliver(&mut self, t: Nanos) -> Nanos {
        let out = self.would_deliver(t, 0);
        self.last_activity = self.last_activity.max(out);
        out
    }

    /// What [`deliver`](Self::deliver) would return if the radio had also
    /// heard traffic at `activity`, without counting the packet as traffic.
    pub fn would_deliver(&self, t: Nanos, activity: Nanos) -> Nanos {
        let asleep_at = self.last_activity.max(activity) + self.inactivity;
        if t > asleep_at {
            let k = (t - asleep_at).div_ceil(self.wake_period);
            asleep_at + k * self.wake_period
        } else {
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS as MS;

    #[test]
    fn waits_for_next_wake_up() {
        // mmWave preset: inactivity 30 ms, wake every 40 ms
        let mut d = Drx::new(30 * MS, 40 * MS);
        // awake: 10 ms after start
        assert_eq!(d.deliver(10 * MS), 10 * MS);
        // last activity 10 → asleep at 40; packet at 60 (20 ms into sleep) waits to 80
        assert_eq!(d.deliver(60 * MS), 80 * MS);
        // radio now active since 80: a packet at 100 goes straight through
        assert_eq!(d.deliver(100 * MS), 100 * MS);
        // asleep at 130; packet at 131 waits for 170; packet exactly on a wake-up is not delayed
        assert_eq!(d.deliver(131 * MS), 170 * MS);
        let mut e = Drx::new(30 * MS, 40 * MS);
        assert_eq!(e.deliver(110 * MS), 110 * MS); // asleep at 30, wake-ups 70, 110
    }

    #[test]
    fn uplink_activity_keeps_radio_awake() {
        let mut d = Drx::new(100 * MS, 20 * MS); // low-band preset
        d.note_activity(500 * MS);
        assert_eq!(d.deliver(550 * MS), 550 * MS);
        // asleep at 650, wake-ups every 20 ms: a packet at 760 waits to 770
        assert_eq!(d.deliver(760 * MS), 770 * MS);
    }
}
