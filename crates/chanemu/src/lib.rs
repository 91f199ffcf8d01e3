//! chanemu: trace-driven emulation of one channel (two directions) between two
//! network namespaces.
//!
//! The library is sans-I/O: every stage takes an explicit `now` (ns since the start
//! of the run, [`time::Nanos`]) and returns decisions and deadlines. The binary
//! (`src/main.rs`, `src/driver/`) moves packets between two TUN devices.
//! See docs/chanemu.md.

#![warn(missing_docs)]

pub mod cellreplay;
pub mod delay;
pub mod drx;
pub mod loss;
pub mod outage;
pub mod pdo_link;
pub mod pipeline;
pub mod priority;
pub mod profile;
pub mod queue;
pub mod rate;
pub mod rng;
pub mod stats;
pub mod time;
pub mod trace;
pub mod wire_class;
