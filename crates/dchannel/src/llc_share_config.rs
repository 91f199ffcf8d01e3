//! The flags of LLC sharing (issue 41 item 3, docs/llc_sharing.md) and the
//! endpoint settings that follow from them. `--llc-share` picks the agent's
//! rule: `none` (today's agents, each modelling the LLC queue from its own
//! traffic), `token-bucket` (rule (b): this sender's packets on the LLC are
//! held to a share, the excess goes to the HBC) or `probe` (rule (c): the
//! other users' queue is learned from the LLC probes). Rule (d), serving
//! control packets first in the shared queue, belongs to the emulated channel
//! (`chanemu --llc-priority`), not to the agents.

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use dchannel_core::endpoint::Config;
use dchannel_core::llc_share::{ShareConfig, SharedDelayConfig};
use dchannel_core::Nanos;

/// Which sharing rule this agent applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LlcShare {
    /// No coordination: the sender's own virtual queue only (rule a).
    None,
    /// A token bucket per device on the LLC; over it, the HBC (rule b).
    TokenBucket,
    /// Learn the other users' LLC queue from the LLC probes (rule c).
    Probe,
}

/// The LLC-sharing flags.
#[derive(Args, Debug, Clone)]
pub struct ShareArgs {
    /// Sharing the LLC with other devices (docs/llc_sharing.md): none,
    /// token-bucket (needs --llc-capacity or --llc-share-rate) or probe.
    #[arg(long, value_enum, default_value_t = LlcShare::None)]
    pub llc_share: LlcShare,
    /// Capacity of the shared LLC in bits/s. token-bucket: split equally among
    /// the configured devices (the gateway's --devices; a client is one);
    /// probe: converts the probes' excess RTT into bytes (default: --llc-mbit).
    #[arg(long, value_name = "BITS")]
    pub llc_capacity: Option<u64>,
    /// token-bucket: each device's share in bits/s (instead of --llc-capacity).
    #[arg(long, value_name = "BITS")]
    pub llc_share_rate: Option<u64>,
    /// token-bucket: the bucket's depth in bytes (outer bytes, as the virtual
    /// LLC queue counts them); default one full-size packet (--outer-mtu), so
    /// that no device exceeds its share by more than one packet.
    #[arg(long, value_name = "BYTES")]
    pub llc_share_burst: Option<u32>,
}

/// Sets `cfg`'s sharing rule from `a` for an endpoint with `devices`
/// configured peers, an LLC of `llc_mbit` (--llc-mbit), packets of at most
/// `outer_mtu` bytes and the LLC RTT pinned at `pin_llc_rtt` (if it is).
pub fn apply(
    a: &ShareArgs,
    cfg: &mut Config,
    devices: usize,
    llc_mbit: f64,
    outer_mtu: usize,
    pin_llc_rtt: Option<Nanos>,
) -> Result<()> {
    let token_flags = a.llc_share_rate.is_some() || a.llc_share_burst.is_some();
    match a.llc_share {
        LlcShare::None => {
            if token_flags || a.llc_capacity.is_some() {
                bail!("--llc-capacity/--llc-share-rate/--llc-share-burst: only with --llc-share token-bucket or probe");
            }
        }
        LlcShare::TokenBucket => {
            let burst = a
                .llc_share_burst
                .unwrap_or(u32::try_from(outer_mtu).unwrap_or(u32::MAX));
            let share = match (a.llc_capacity, a.llc_share_rate) {
                (Some(c), None) => {
                    let n = u32::try_from(devices).unwrap_or(u32::MAX);
                    ShareConfig::equal_split(c, n, burst)
                }
                (None, Some(r)) => ShareConfig::new(r, burst),
                _ => bail!(
                    "--llc-share token-bucket: expected exactly one of --llc-capacity BITS (split among the devices) and --llc-share-rate BITS (per device)"
                ),
            };
            cfg.steer.llc_share =
                Some(share.map_err(|e| anyhow::anyhow!("--llc-share token-bucket: {e}"))?);
        }
        LlcShare::Probe => {
            if token_flags {
                bail!("--llc-share-rate/--llc-share-burst: only with --llc-share token-bucket");
            }
            let c = a.llc_capacity.map_or(llc_mbit * 1e6, |c| c as f64);
            let mut d =
                SharedDelayConfig::new(c).map_err(|e| anyhow::anyhow!("--llc-capacity: {e}"))?;
            if let Some(rtt) = pin_llc_rtt {
                d = d.with_base_rtt(rtt);
            }
            cfg.llc_probe_share = Some(d);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dchannel_core::endpoint::Role;

    fn args(rule: LlcShare) -> ShareArgs {
        ShareArgs {
            llc_share: rule,
            llc_capacity: None,
            llc_share_rate: None,
            llc_share_burst: None,
        }
    }

    fn applied(a: &ShareArgs, devices: usize) -> Result<Config> {
        let mut cfg = Config::new(Role::Gateway);
        apply(a, &mut cfg, devices, 2.0, 1500, None)?;
        Ok(cfg)
    }

    #[test]
    fn none_changes_nothing() {
        let cfg = applied(&args(LlcShare::None), 3).unwrap();
        assert!(cfg.steer.llc_share.is_none() && cfg.llc_probe_share.is_none());
    }

    #[test]
    fn token_bucket_splits_the_capacity_or_takes_the_rate() {
        // 10 Mbit/s among 4 devices: 2.5 Mbit/s each, burst one 1500 B packet
        let a = ShareArgs {
            llc_capacity: Some(10_000_000),
            ..args(LlcShare::TokenBucket)
        };
        let s = applied(&a, 4).unwrap().steer.llc_share.unwrap();
        assert_eq!((s.rate_bps(), s.burst_bytes()), (2_500_000, 1500));
        let a = ShareArgs {
            llc_share_rate: Some(500_000),
            llc_share_burst: Some(3000),
            ..args(LlcShare::TokenBucket)
        };
        let s = applied(&a, 4).unwrap().steer.llc_share.unwrap();
        assert_eq!((s.rate_bps(), s.burst_bytes()), (500_000, 3000));
    }

    #[test]
    fn bad_combinations_are_refused_by_flag() {
        let e = applied(&args(LlcShare::TokenBucket), 2).unwrap_err();
        assert!(
            e.to_string().contains("exactly one of --llc-capacity"),
            "{e}"
        );
        let both = ShareArgs {
            llc_capacity: Some(1),
            llc_share_rate: Some(1),
            ..args(LlcShare::TokenBucket)
        };
        assert!(applied(&both, 2).is_err());
        let zero = ShareArgs {
            llc_share_rate: Some(0),
            ..args(LlcShare::TokenBucket)
        };
        let e = applied(&zero, 2).unwrap_err().to_string();
        assert!(e.contains("rate_bps: expected a positive rate"), "{e}");
        let stray = ShareArgs {
            llc_capacity: Some(2_000_000),
            ..args(LlcShare::None)
        };
        assert!(applied(&stray, 2).is_err());
        let rate_with_probe = ShareArgs {
            llc_share_rate: Some(1),
            ..args(LlcShare::Probe)
        };
        assert!(applied(&rate_with_probe, 1).is_err());
    }

    #[test]
    fn probe_takes_the_capacity_or_the_llc_rate() {
        let cfg = applied(&args(LlcShare::Probe), 1).unwrap();
        assert_eq!(
            cfg.llc_probe_share,
            Some(SharedDelayConfig::new(2e6).unwrap())
        );
        let a = ShareArgs {
            llc_capacity: Some(10_000_000),
            ..args(LlcShare::Probe)
        };
        let cfg = applied(&a, 1).unwrap();
        assert_eq!(
            cfg.llc_probe_share,
            Some(SharedDelayConfig::new(1e7).unwrap())
        );
        assert!(cfg.steer.llc_share.is_none());
    }
}
