//! The two channels (shared with the other crates through dchannel-base) and
//! the two directions of travel.

pub use dchannel_base::Channel;

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
