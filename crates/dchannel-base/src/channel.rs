//! The two channels between a device and the gateway.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_other_and_name_agree() {
        for ch in Channel::ALL {
            assert_eq!(Channel::ALL[ch.index()], ch);
            assert_ne!(ch.other(), ch);
            assert_eq!(ch.other().other(), ch);
        }
        assert_eq!(Channel::Llc.to_string(), "llc");
    }
}
