//! Rule (b): the gateway enforces a per-device share of the LLC.
//!
//! Each device has a token bucket filling at its share `r` of the LLC's
//! capacity C (bits/s) up to a burst of `B` bytes, full when the device is
//! first seen. A packet that Algorithm 1 put on the LLC is admitted if the
//! device's bucket holds its size (and the size is taken out); otherwise it
//! goes to the HBC instead. It is never dropped: the HBC always takes it.
//!
//! Guarantee (what the tests check): over any stretch of time `[s, t]`, the
//! bytes a device gets onto the LLC are at most `r·(t − s) + B`. With `B` one
//! packet (an MTU), no device exceeds its share by more than one packet per
//! interval. Conversely a packet is sent to the HBC only if admitting it would
//! break that bound for some stretch ending at it. A packet larger than `B`
//! therefore always goes to the HBC.
//!
//! The arithmetic is exact (integers): credit is counted in byte/(8·10⁹)
//! units, so one nanosecond at `r` bits/s adds exactly `r` units.

use super::ConfigError;
use crate::{Channel, Nanos};
use std::collections::HashMap;
use std::hash::Hash;

/// Credit units per byte: 8 bits × 10⁹ ns/s, so that a rate in bits/s adds
/// exactly `rate` units per nanosecond.
const UNITS_PER_BYTE: u128 = 8_000_000_000;

/// One device's share of the LLC: its rate and its burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareConfig {
    rate_bps: u64,
    burst_bytes: u32,
}

impl ShareConfig {
    /// A share of `rate_bps` bits/s with a burst of `burst_bytes` (both > 0).
    pub fn new(rate_bps: u64, burst_bytes: u32) -> Result<ShareConfig, ConfigError> {
        if rate_bps == 0 {
            return Err(ConfigError {
                field: "rate_bps",
                expected: "a positive rate in bits/s",
            });
        }
        if burst_bytes == 0 {
            return Err(ConfigError {
                field: "burst_bytes",
                expected: "a positive burst (one MTU bounds the excess to one packet)",
            });
        }
        Ok(ShareConfig {
            rate_bps,
            burst_bytes,
        })
    }

    /// An equal split of an LLC of `capacity_bps` among `devices` (rounded
    /// down, so that the shares never add up to more than C).
    pub fn equal_split(
        capacity_bps: u64,
        devices: u32,
        burst_bytes: u32,
    ) -> Result<ShareConfig, ConfigError> {
        if devices == 0 {
            return Err(ConfigError {
                field: "devices",
                expected: "at least one device",
            });
        }
        ShareConfig::new(capacity_bps / u64::from(devices), burst_bytes)
    }

    /// The share's rate in bits/s.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// The burst in bytes.
    pub fn burst_bytes(&self) -> u32 {
        self.burst_bytes
    }
}

/// What the gateway decided for one device so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShareStats {
    /// Packets admitted to the LLC.
    pub llc_packets: u64,
    /// Their bytes.
    pub llc_bytes: u64,
    /// Packets Algorithm 1 wanted on the LLC that went to the HBC instead.
    pub diverted_packets: u64,
    /// Their bytes.
    pub diverted_bytes: u64,
}

/// One device's token bucket (rule (b) for a single device): what the
/// gateway keeps per client in that client's own send state, so that no lock
/// is shared between devices on the data path. [`PerDeviceShare`] is a map of
/// these.
#[derive(Clone, Debug)]
pub struct ShareBucket {
    cfg: ShareConfig,
    /// Credit in units of 1/[`UNITS_PER_BYTE`] byte, at most the burst.
    credit: u128,
    /// When `credit` was last brought up to date (`None`: never used, full).
    last: Option<Nanos>,
    stats: ShareStats,
}

impl ShareBucket {
    /// A full bucket of share `cfg`; its clock starts at the first packet.
    pub fn new(cfg: ShareConfig) -> ShareBucket {
        ShareBucket {
            cfg,
            credit: u128::from(cfg.burst_bytes) * UNITS_PER_BYTE,
            last: None,
            stats: ShareStats::default(),
        }
    }

    /// Its setting.
    pub fn config(&self) -> ShareConfig {
        self.cfg
    }

    /// A packet of `bytes` that Algorithm 1 put on the LLC at `now`:
    /// [`Channel::Llc`] if within the budget (which it then uses up), else
    /// [`Channel::Hbc`]. Time going backwards adds no credit.
    pub fn admit(&mut self, now: Nanos, bytes: usize) -> Channel {
        let cap = u128::from(self.cfg.burst_bytes) * UNITS_PER_BYTE;
        let last = *self.last.get_or_insert(now);
        if now > last {
            let added = u128::from(now - last).saturating_mul(u128::from(self.cfg.rate_bps));
            self.credit = self.credit.saturating_add(added).min(cap);
            self.last = Some(now);
        }
        let cost = (bytes as u128).saturating_mul(UNITS_PER_BYTE);
        if self.credit >= cost {
            self.credit -= cost;
            self.stats.llc_packets += 1;
            self.stats.llc_bytes += bytes as u64;
            Channel::Llc
        } else {
            self.stats.diverted_packets += 1;
            self.stats.diverted_bytes += bytes as u64;
            Channel::Hbc
        }
    }

    /// What was decided so far.
    pub fn stats(&self) -> ShareStats {
        self.stats
    }
}

/// Rule (b) at the gateway: a token bucket per device (see the module docs).
/// `D` names a device (its client token or address).
#[derive(Clone, Debug)]
pub struct PerDeviceShare<D> {
    cfg: ShareConfig,
    buckets: HashMap<D, ShareBucket>,
}

impl<D: Eq + Hash + Clone> PerDeviceShare<D> {
    /// Every device gets the share `cfg`.
    pub fn new(cfg: ShareConfig) -> PerDeviceShare<D> {
        PerDeviceShare {
            cfg,
            buckets: HashMap::new(),
        }
    }

    /// Its setting.
    pub fn config(&self) -> ShareConfig {
        self.cfg
    }

    /// A packet of `bytes` from/to `device` that Algorithm 1 put on the LLC at
    /// `now`: [`Channel::Llc`] if within the device's budget (which it then
    /// uses up), else [`Channel::Hbc`]. Time going backwards adds no credit.
    pub fn admit(&mut self, now: Nanos, device: &D, bytes: usize) -> Channel {
        let b = match self.buckets.get_mut(device) {
            Some(b) => b,
            None => self
                .buckets
                .entry(device.clone())
                .or_insert(ShareBucket::new(self.cfg)),
        };
        b.admit(now, bytes)
    }

    /// What was decided for `device` so far (`None`: never seen).
    pub fn stats(&self, device: &D) -> Option<ShareStats> {
        self.buckets.get(device).map(|b| b.stats)
    }

    /// Devices seen so far.
    pub fn devices(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MS;
    use proptest::prelude::*;

    #[test]
    fn bad_settings_are_refused_by_name() {
        let e = ShareConfig::new(0, 1500).unwrap_err();
        assert_eq!(e.field, "rate_bps");
        assert_eq!(ShareConfig::new(1, 0).unwrap_err().field, "burst_bytes");
        let e = ShareConfig::equal_split(2_000_000, 0, 1500).unwrap_err();
        assert_eq!(
            e.to_string(),
            "LLC sharing: devices: expected at least one device"
        );
        // 2 Mbit/s among 3 devices: 666_666 bit/s each, rounded down
        let c = ShareConfig::equal_split(2_000_000, 3, 1500).unwrap();
        assert_eq!((c.rate_bps(), c.burst_bytes()), (666_666, 1500));
    }

    #[test]
    fn over_budget_goes_to_hbc_and_refills_at_the_share() {
        // C = 2 Mbit/s split between 2 devices: 1 Mbit/s = 125 B/ms each,
        // burst one MTU (1500 B).
        let cfg = ShareConfig::equal_split(2_000_000, 2, 1500).unwrap();
        let mut s = PerDeviceShare::<u32>::new(cfg);
        // t=0: full bucket 1500 B; 1000 B in (500 left), 1000 B over -> HBC
        assert_eq!(s.admit(0, &1, 1000), Channel::Llc);
        assert_eq!(s.admit(0, &1, 1000), Channel::Hbc);
        // device 2 has its own full bucket
        assert_eq!(s.admit(0, &2, 1500), Channel::Llc);
        // t=3 ms: device 1 has 500 + 3 x 125 = 875 B: 876 B is over, 875 B fits
        assert_eq!(s.admit(3 * MS, &1, 876), Channel::Hbc);
        assert_eq!(s.admit(3 * MS, &1, 875), Channel::Llc);
        // t=100 ms: refill caps at the burst, 1500 B; a 1501 B packet never fits
        assert_eq!(s.admit(100 * MS, &1, 1501), Channel::Hbc);
        assert_eq!(s.admit(100 * MS, &1, 1500), Channel::Llc);
        // time going backwards adds nothing
        assert_eq!(s.admit(50 * MS, &1, 1), Channel::Hbc);
        let st = s.stats(&1).unwrap();
        assert_eq!(
            st,
            ShareStats {
                llc_packets: 3,
                llc_bytes: 1000 + 875 + 1500,
                diverted_packets: 4,
                diverted_bytes: 1000 + 876 + 1501 + 1,
            }
        );
        assert_eq!(s.stats(&2).unwrap().llc_bytes, 1500);
        assert_eq!(s.stats(&3), None);
        assert_eq!(s.devices(), 2);
    }

    #[test]
    fn sub_byte_credit_is_kept_exactly() {
        // 1 bit/s: one byte of credit takes 8 s; seven 1 s steps are not enough
        let mut s = PerDeviceShare::<u8>::new(ShareConfig::new(1, 1).unwrap());
        assert_eq!(s.admit(0, &0, 1), Channel::Llc);
        for sec in 1..8u64 {
            assert_eq!(s.admit(sec * 1_000 * MS, &0, 1), Channel::Hbc);
        }
        assert_eq!(s.admit(8_000 * MS, &0, 1), Channel::Llc);
    }

    proptest! {
        /// Issue 41's check for rule (b), over random arrival sequences of up
        /// to 4 devices: for every device and every stretch `[t_j, t_n]` of its
        /// arrivals, its LLC bytes stay within `r·(t_n − t_j) + B` (B = one
        /// MTU, so at most one packet over its share); a packet goes to the HBC
        /// exactly when admitting it would break that bound for some stretch
        /// ending at it; and the counters account for every packet (none dropped).
        #[test]
        fn llc_bytes_never_exceed_the_share_by_more_than_one_packet(
            arrivals in proptest::collection::vec((0u64..3 * MS, 0u8..4, 40usize..=1500), 1..300),
            devices in 1u32..=8,
            capacity in prop_oneof![Just(2_000_000u64), Just(10_000_000), Just(20_000_000)],
        ) {
            const MTU: u32 = 1500;
            let cfg = ShareConfig::equal_split(capacity, devices, MTU).unwrap();
            let rate = u128::from(cfg.rate_bps());
            let cap = u128::from(MTU) * UNITS_PER_BYTE;
            let mut s = PerDeviceShare::<u8>::new(cfg);
            // per device: (time, bytes, admitted) of every arrival so far
            let mut seen: HashMap<u8, Vec<(Nanos, usize, bool)>> = HashMap::new();
            let mut now = 0;
            for (gap, dev, bytes) in arrivals {
                now += gap;
                let ch = s.admit(now, &dev, bytes);
                let hist = seen.entry(dev).or_default();
                hist.push((now, bytes, ch == Channel::Llc));
                // LLC bytes from arrival j through this one, with this one
                // counted as if admitted: does some stretch [t_j, now] break?
                let mut llc_bytes = 0u128;
                let mut would_break = false;
                let mut breaks = false;
                for (j, &(t_j, b_j, in_j)) in hist.iter().enumerate().rev() {
                    let allowed = cap + rate * u128::from(now - t_j);
                    let last = j + 1 == hist.len();
                    if last || in_j {
                        llc_bytes += b_j as u128 * UNITS_PER_BYTE;
                    }
                    would_break |= llc_bytes > allowed;
                    let actual = llc_bytes - if ch == Channel::Hbc { bytes as u128 * UNITS_PER_BYTE } else { 0 };
                    breaks |= actual > allowed;
                }
                prop_assert!(!breaks, "device {} over its share + one MTU at {} ns", dev, now);
                prop_assert_eq!(ch == Channel::Hbc, would_break, "device {} at {} ns", dev, now);
            }
            for (dev, hist) in &seen {
                let st = s.stats(dev).unwrap();
                let hbc: usize = hist.iter().filter(|a| !a.2).map(|a| a.1).sum();
                prop_assert_eq!(st.llc_packets + st.diverted_packets, hist.len() as u64);
                prop_assert_eq!(st.diverted_bytes, hbc as u64);
            }
        }
    }
}
