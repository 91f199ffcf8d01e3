//! Fault stage: a schedule of outages and loss bursts on one direction.
//!
//! Rule: times are run time (ns since the emulator started, not trace time), and a
//! dead radio link loses what is sent into it — it does not hold it. So a packet is
//! dropped if it *enters* the link during an outage window `[from, to)`, or if it
//! would *leave* the link (its release time) inside one: it was on the air or in the
//! transmitter when the link died. During a loss burst `[from, to)` each packet that
//! enters is dropped with the burst's probability, drawn from the stage's own seeded
//! stream (the i.i.d. loss stage's draws are unchanged by adding a burst). With
//! `repeat` the whole schedule starts over every `repeat` ns (run time modulo repeat).
//!
//! Sans-I/O: [`Faults::admit`] and [`Faults::delivers`] take the time explicitly.

use crate::rng::Stream;
use crate::time::Nanos;

/// A time window `[from, to)` in run time (ns), with `from < to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First ns of the window.
    pub from: Nanos,
    /// First ns after the window.
    pub to: Nanos,
}

impl Window {
    fn contains(&self, t: Nanos) -> bool {
        self.from <= t && t < self.to
    }
}

/// A loss burst: packets entering during `window` are dropped with probability `loss`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Burst {
    /// When it applies.
    pub window: Window,
    /// Drop probability in [0, 1].
    pub loss: f64,
}

/// A validated fault schedule of one direction (the profile's `faults` table).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSpec {
    /// Outages, sorted and disjoint.
    pub down: Vec<Window>,
    /// Loss bursts, sorted and disjoint.
    pub bursts: Vec<Burst>,
    /// Period after which the schedule starts over (None: it happens once).
    pub repeat: Option<Nanos>,
}

impl FaultSpec {
    /// Checks the rules of docs/formats.md: every window non-empty, each list sorted
    /// and disjoint, burst losses in [0, 1], and every window inside `repeat`.
    /// The error names the offending entry (`down[1]`, `loss_bursts[0].loss`, …).
    pub fn new(
        down: Vec<Window>,
        bursts: Vec<Burst>,
        repeat: Option<Nanos>,
    ) -> Result<Self, String> {
        check_windows("down", down.iter().copied(), repeat)?;
        check_windows("loss_bursts", bursts.iter().map(|b| b.window), repeat)?;
        if let Some(i) = bursts.iter().position(|b| !(0.0..=1.0).contains(&b.loss)) {
            return Err(format!(
                "loss_bursts[{i}].loss: expected a probability in [0, 1], got {}",
                bursts[i].loss
            ));
        }
        if repeat == Some(0) {
            return Err("repeat_ms: expected > 0".into());
        }
        Ok(FaultSpec {
            down,
            bursts,
            repeat,
        })
    }

    /// No outage and no burst.
    pub fn is_empty(&self) -> bool {
        self.down.is_empty() && self.bursts.is_empty()
    }
}

fn check_windows(
    list: &str,
    windows: impl Iterator<Item = Window>,
    repeat: Option<Nanos>,
) -> Result<(), String> {
    let mut prev_end = None;
    for (i, w) in windows.enumerate() {
        if w.to <= w.from {
            return Err(format!(
                "{list}[{i}]: expected to_ms > from_ms, got {} ≥ {} ms",
                crate::time::to_ms(w.from),
                crate::time::to_ms(w.to)
            ));
        }
        if prev_end.is_some_and(|end| w.from < end) {
            return Err(format!(
                "{list}[{i}]: windows must be sorted by time and must not overlap (starts at {} ms, before the previous one ends)",
                crate::time::to_ms(w.from)
            ));
        }
        if let Some(r) = repeat {
            if w.to > r {
                return Err(format!(
                    "{list}[{i}]: ends at {} ms, after repeat_ms = {} ms",
                    crate::time::to_ms(w.to),
                    crate::time::to_ms(r)
                ));
            }
        }
        prev_end = Some(w.to);
    }
    Ok(())
}

/// Why the fault stage dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultDrop {
    /// The link was down.
    Outage,
    /// A loss burst drew it.
    Burst,
}

/// The fault stage of one direction (see the module docs).
#[derive(Debug, Clone)]
pub struct Faults {
    spec: FaultSpec,
    rng: Stream,
}

impl Faults {
    /// The stage for `spec`; `stream` keeps the directions' burst draws independent.
    pub fn new(spec: FaultSpec, seed: u64, stream: u64) -> Self {
        Faults {
            spec,
            rng: Stream::new(seed, stream),
        }
    }

    /// `t` within one period of the schedule.
    fn phase(&self, t: Nanos) -> Nanos {
        self.spec.repeat.map_or(t, |r| t % r)
    }

    /// The window of sorted, disjoint `windows` holding `t`, if any.
    fn find<T>(windows: &[T], t: Nanos, w: impl Fn(&T) -> Window) -> Option<&T> {
        // first window ending after t; it holds t iff it also starts at or before t
        let i = windows.partition_point(|x| w(x).to <= t);
        windows.get(i).filter(|x| w(x).contains(t))
    }

    /// Whether the link is down at run time `t`.
    pub fn is_down(&self, t: Nanos) -> bool {
        Self::find(&self.spec.down, self.phase(t), |w| *w).is_some()
    }

    /// A packet enters the link at `now`: `Err` if the link is down or a burst drops it.
    pub fn admit(&mut self, now: Nanos) -> Result<(), FaultDrop> {
        let t = self.phase(now);
        if Self::find(&self.spec.down, t, |w| *w).is_some() {
            return Err(FaultDrop::Outage);
        }
        if let Some(b) = Self::find(&self.spec.bursts, t, |b| b.window) {
            // draws only inside bursts: the stream is this stage's own
            if self.rng.next_f64() < b.loss {
                return Err(FaultDrop::Burst);
            }
        }
        Ok(())
    }

    /// False if a packet released at `release` would leave the link while it is down.
    pub fn delivers(&self, release: Nanos) -> bool {
        !self.is_down(release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS as MS;

    fn w(from_ms: u64, to_ms: u64) -> Window {
        Window {
            from: from_ms * MS,
            to: to_ms * MS,
        }
    }

    #[test]
    fn down_window_is_half_open_and_repeats() {
        let spec = FaultSpec::new(
            vec![w(2000, 4000), w(6000, 6500)],
            vec![],
            Some(10_000 * MS),
        )
        .unwrap();
        let mut f = Faults::new(spec, 1, 3);
        assert_eq!(f.admit(2000 * MS - 1), Ok(()));
        assert_eq!(f.admit(2000 * MS), Err(FaultDrop::Outage));
        assert_eq!(f.admit(4000 * MS - 1), Err(FaultDrop::Outage));
        assert_eq!(f.admit(4000 * MS), Ok(()));
        assert_eq!(f.admit(6200 * MS), Err(FaultDrop::Outage));
        // second period: 12 s is 2 s into it
        assert_eq!(f.admit(12_000 * MS), Err(FaultDrop::Outage));
        assert_eq!(f.admit(14_000 * MS), Ok(()));
        assert!(f.delivers(1999 * MS) && !f.delivers(3999 * MS) && f.delivers(4000 * MS));
    }

    #[test]
    fn once_without_repeat() {
        let mut f = Faults::new(FaultSpec::new(vec![w(0, 1)], vec![], None).unwrap(), 1, 3);
        assert_eq!(f.admit(0), Err(FaultDrop::Outage));
        assert_eq!(f.admit(MS), Ok(()));
        assert_eq!(f.admit(1_000_000 * MS), Ok(()));
    }

    #[test]
    fn burst_rate_is_binomial_and_seeded_and_only_inside() {
        let burst = Burst {
            window: w(1000, 2000),
            loss: 0.3,
        };
        let spec = FaultSpec::new(vec![], vec![burst], None).unwrap();
        let run = |seed| {
            let mut f = Faults::new(spec.clone(), seed, 3);
            // 10 000 packets 0.1 ms apart inside the burst
            (0..10_000u64)
                .map(|i| f.admit(1000 * MS + i * MS / 10).is_err())
                .collect::<Vec<_>>()
        };
        let a = run(7);
        let k = a.iter().filter(|d| **d).count() as f64;
        // Binomial(10000, 0.3): mean 3000, sd 45.8; ±3.29 sd = 99.9 %
        assert!((k - 3000.0).abs() < 3.29 * 45.83, "{k}");
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        let mut f = Faults::new(spec, 7, 3);
        assert!((0..1000).all(|i| f.admit(i * MS).is_ok()));
        assert!((2000..3000).all(|i| f.admit(i * MS).is_ok()));
    }

    #[test]
    fn refuses_bad_schedules_naming_the_entry() {
        let e = FaultSpec::new(vec![w(5, 5)], vec![], None).unwrap_err();
        assert!(e.starts_with("down[0]: expected to_ms > from_ms"), "{e}");
        let e = FaultSpec::new(vec![w(0, 10), w(5, 20)], vec![], None).unwrap_err();
        assert!(e.starts_with("down[1]: windows must be sorted"), "{e}");
        let e = FaultSpec::new(vec![w(0, 10)], vec![], Some(5 * MS)).unwrap_err();
        assert!(
            e.contains("down[0]: ends at 10 ms, after repeat_ms = 5 ms"),
            "{e}"
        );
        let b = Burst {
            window: w(0, 1),
            loss: 1.5,
        };
        let e = FaultSpec::new(vec![], vec![b], None).unwrap_err();
        assert!(e.starts_with("loss_bursts[0].loss"), "{e}");
        let e = FaultSpec::new(vec![], vec![], Some(0)).unwrap_err();
        assert!(e.starts_with("repeat_ms"), "{e}");
    }
}
