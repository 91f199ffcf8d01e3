//! `passthrough` — every object on the HBC: measures the proxy's own cost against a
//! direct `all-hbc` run.

use super::{Channel, Decision, Reason};

pub fn decide() -> Decision {
    Decision::new(Channel::Hbc, Reason::Default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_hbc() {
        assert_eq!(decide().channel, Channel::Hbc);
    }
}
