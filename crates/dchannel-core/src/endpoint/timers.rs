//! The endpoint's periodic work as named deadlines (as quinn-proto's
//! `TimerTable`): a half reports the earliest through `poll_timeout` and does
//! what is due in `handle_timeout`. Probe deadlines (per peer, in the RTT
//! estimators) and reorder timeouts (in the reorder buffer) live with their
//! state machines; the halves take the minimum.

use crate::Nanos;

/// A periodic job of one half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// Send half: evict idle flows from the flow tables.
    FlowExpiry = 0,
    /// Receive half: publish RTT estimates, liveness and reorder stats.
    Publish = 1,
    /// Receive half: forget idle reorder-buffer flows.
    ReorderExpiry = 2,
}

impl Timer {
    const COUNT: usize = 3;
}

/// One optional deadline per [`Timer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerTable {
    at: [Option<Nanos>; Timer::COUNT],
}

impl TimerTable {
    /// Arms `timer` for `at`.
    pub fn set(&mut self, timer: Timer, at: Nanos) {
        self.at[timer as usize] = Some(at);
    }

    /// The deadline of `timer`, if armed.
    pub fn get(&self, timer: Timer) -> Option<Nanos> {
        self.at[timer as usize]
    }

    /// Whether `timer` is armed and due at `now`.
    pub fn is_due(&self, timer: Timer, now: Nanos) -> bool {
        self.get(timer).is_some_and(|t| t <= now)
    }

    /// The earliest armed deadline.
    pub fn next(&self) -> Option<Nanos> {
        self.at.iter().flatten().copied().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_armed_deadline_is_next() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Publish, 50);
        t.set(Timer::ReorderExpiry, 10);
        assert_eq!(t.next(), Some(10));
        assert!(t.is_due(Timer::ReorderExpiry, 10));
        assert!(!t.is_due(Timer::Publish, 49));
        assert!(!t.is_due(Timer::FlowExpiry, u64::MAX));
    }
}
