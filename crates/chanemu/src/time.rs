//! The emulator's clock: plain `u64` nanoseconds since the start of the run.
//!
//! Every stage takes `now` as such a value and returns deadlines in the same unit;
//! the driver maps it to `CLOCK_MONOTONIC`. Nanoseconds keep the serialisation time
//! of a 1500-byte packet at 1 Gbit/s exact (12 000 ns) and overflow after 584 years.

/// Nanoseconds since the start of the run (the unit every crate shares).
pub use dchannel_base::Nanos;

/// Nanoseconds per microsecond.
pub const NS_PER_US: u64 = 1_000;
/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

/// Milliseconds (possibly fractional, ≥ 0) to nanoseconds, rounded to the nearest ns.
pub fn ms_f64(ms: f64) -> Nanos {
    debug_assert!(ms >= 0.0);
    (ms * NS_PER_MS as f64).round() as Nanos
}

/// Nanoseconds to fractional milliseconds (for reports).
pub fn to_ms(ns: Nanos) -> f64 {
    ns as f64 / NS_PER_MS as f64
}
