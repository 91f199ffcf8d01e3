//! The two channels and the two directions of travel.

use std::fmt;

/// A channel between the client and the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// High-bandwidth channel (e.g. 5G eMBB): large capacity, long/unsteady RTT.
    Hbc = 0,
    /// Low-latency channel (e.g. 5G URLLC): small capacity, short RTT.
    Llc = 1,
}

impl Channel {
    /// Both channels, in index order.
    pub const ALL: [Channel; 2] = [Channel::Hbc, Channel::Llc];

    /// `hbc` or `llc` (stats keys, logs).
    pub fn name(self) -> &'static str {
        match self {
            Channel::Hbc => "hbc",
            Channel::Llc => "llc",
        }
    }

    /// 0 for the HBC, 1 for the LLC (index into per-channel arrays).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The other channel.
    pub fn other(self) -> Channel {
        match self {
            Channel::Hbc => Channel::Llc,
            Channel::Llc => Channel::Hbc,
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Direction of a packet relative to the client device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Client (device) towards the network: packets steered by the client agent.
    Uplink = 0,
    /// Network towards the client: packets steered by the gateway agent.
    Downlink = 1,
}

impl Direction {
    /// `up` or `down` (logs).
    pub fn name(self) -> &'static str {
        match self {
            Direction::Uplink => "up",
            Direction::Downlink => "down",
        }
    }
}
