//! Shared-URLLC cell simulator (issue 41, item 5): many users' page loads,
//! replayed from per-user inner-packet traces through the real dchannel
//! steering core, into one shared LLC queue per direction.
//!
//! * [`trace`]: a page load as inner packets (read from CSV).
//! * [`shared_llc`]: the cell's shared FIFO LLC queue.
//! * [`cell`]: users, browsing schedule, sharing rules, per-page results.
//! * [`quantiles`], [`rng`]: percentiles and the seeded generator.
//!
//! Sans-I/O like the core: [`cell::run`] takes traces and a configuration and
//! returns results; the `llcsim` binary reads and writes files around it.

#![warn(missing_docs)]

pub mod cell;
pub mod quantiles;
pub mod rng;
pub mod shared_llc;
pub mod trace;

#[cfg(test)]
mod cell_tests;
