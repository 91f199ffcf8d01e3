//! Sans-I/O core of the dchannel agent.
//!
//! Every piece here is a plain state machine: it takes an explicit `now`
//! (nanoseconds since an arbitrary epoch chosen by the driver) and its inputs,
//! and returns decisions, packets and deadlines. No sockets, clocks, threads or
//! files: the `dchannel` binary is a thin driver around it, and the unit tests
//! drive it with synthetic time.
//!
//! Paper references: "DChannel: Accelerating Mobile Applications With Parallel
//! High-bandwidth and Low-latency Channels" (NSDI'23), Algorithm 1 and §4;
//! "Packet-level steering ... " (HotMobile'21), Algorithm 1 (`pkt-state`).

#![warn(missing_docs)]

pub mod bursts;
pub mod channel;
#[macro_use]
pub mod counters;
pub mod dedupe;
pub mod egress;
pub mod endpoint;
pub mod flow_table;
pub mod gro;
pub mod gso;
pub mod liveness;
pub mod llc_queue;
pub mod llc_share;
pub mod packet;
pub mod packet_class;
pub mod policy;
pub mod quic;
pub mod reorder;
pub mod rtt;
pub mod steer;
pub mod token;
pub mod wire;

#[cfg(test)]
mod test_packets;

pub use channel::{Channel, Direction};

/// Time in nanoseconds since an epoch chosen by the driver (monotonic), and
/// one millisecond of it: the unit every crate of the project shares.
pub use dchannel_base::{Nanos, MS};
