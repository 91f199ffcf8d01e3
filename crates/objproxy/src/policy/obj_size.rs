//! `obj-size:N` — objects below N bytes on the LLC, the rest on the HBC (the HotMobile
//! DChannel paper's object-size heuristic, tried with N = 3 KB and 6 KB).

use super::{Channel, Decision, Reason};

pub fn decide(size: u64, threshold: u64) -> Decision {
    if size < threshold {
        Decision::new(Channel::Llc, Reason::BelowThreshold)
    } else {
        Decision::new(Channel::Hbc, Reason::AboveThreshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_exclusive() {
        assert_eq!(decide(5999, 6000).channel, Channel::Llc);
        assert_eq!(decide(6000, 6000).channel, Channel::Hbc);
        assert_eq!(decide(0, 3000).channel, Channel::Llc);
        assert_eq!(decide(1_000_000, 3000).reason, Reason::AboveThreshold);
    }
}
