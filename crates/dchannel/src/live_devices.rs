//! The devices a running gateway serves, changed without a restart: a
//! proposed list (device_plan.rs checks it and says what changes) is applied
//! to the encryption layer's peer table, then to the endpoint's, one change
//! at a time (`AeadAuth::with_peers`), while every other device's datagrams
//! go on (no lock they take is held). A removed or re-keyed device's sessions end
//! at once (its next datagram is refused and counted under
//! `crypto.drops.unknown_index`); devices the change does not name keep their
//! sessions, endpoints, flows and estimates. The control socket (control.rs)
//! and SIGHUP (main.rs) call it.

use crate::device_plan::{self, Origin, Plan, TunnelPrefixes};
use dchannel_core::endpoint::{PeerConfig, Shared};
use dchannel_core::Channel;
use dchannel_crypto::devices::Device;
use dchannel_crypto::endpoint::AeadAuth;
use dchannel_crypto::PeerId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The gateway's devices and the tables they live in.
pub struct LiveDevices {
    /// Each device with its slot (endpoint peer index = crypto peer id), in
    /// the order of the list that configured it.
    devices: Vec<(usize, Device)>,
    aead: AeadAuth,
    shared: Arc<Shared>,
    prefixes: TunnelPrefixes,
    /// `--devices`: read again on SIGHUP.
    path: PathBuf,
}

/// The endpoint's view of a device.
fn peer_config(d: &Device, endpoints: [Option<std::net::SocketAddr>; 2]) -> PeerConfig {
    PeerConfig {
        name: d.name.clone(),
        token: 0,
        tunnel_addr: d.address,
        endpoints,
    }
}

impl LiveDevices {
    /// The gateway as started: device `i` of `devices` is peer `i` of both
    /// tables (AeadAuth::gateway and endpoint::new were built from it).
    pub fn new(
        devices: Vec<Device>,
        aead: AeadAuth,
        shared: Arc<Shared>,
        prefixes: TunnelPrefixes,
        path: PathBuf,
    ) -> LiveDevices {
        LiveDevices {
            devices: devices.into_iter().enumerate().collect(),
            aead,
            shared,
            prefixes,
            path,
        }
    }

    /// The devices now, each with its slot.
    pub fn devices(&self) -> &[(usize, Device)] {
        &self.devices
    }

    /// The encryption layer (sessions, keys).
    pub fn aead(&self) -> &AeadAuth {
        &self.aead
    }

    /// The endpoint's shared state (endpoints, estimates, traffic per device).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn list(&self) -> Vec<Device> {
        self.devices.iter().map(|(_, d)| d.clone()).collect()
    }

    /// `dchannel set --device NAME ...`: adds or changes one device.
    pub fn set(
        &mut self,
        name: &str,
        public_key: Option<&str>,
        address: Option<&str>,
    ) -> Result<Plan, String> {
        let proposed = device_plan::with_set(&self.list(), name, public_key, address)?;
        self.apply(&proposed, &Origin::Command)
    }

    /// `dchannel set --remove NAME`.
    pub fn remove(&mut self, name: &str) -> Result<Plan, String> {
        let proposed = device_plan::without(&self.list(), name)?;
        self.apply(&proposed, &Origin::Command)
    }

    /// `dchannel syncconf FILE` (the file's text, read by the caller) and
    /// SIGHUP: the gateway serves exactly the file's devices afterwards.
    pub fn sync(&mut self, text: &str, path: &str) -> Result<Plan, String> {
        let (proposed, origin) = device_plan::from_file(text, path)?;
        self.apply(&proposed, &origin)
    }

    /// SIGHUP: [`sync`](Self::sync) with the `--devices` file as it is now.
    pub fn reload(&mut self) -> Result<Plan, String> {
        let path = self.path.display().to_string();
        let text = std::fs::read_to_string(&self.path).map_err(|e| format!("{path}: {e}"))?;
        self.sync(&text, &path)
    }

    /// SIGHUP: [`reload`](Self::reload), and the outcome in the log.
    pub fn on_sighup(&mut self) {
        match self.reload() {
            Ok(p) if p.is_empty() => {
                tracing::info!("SIGHUP: {}: no change", self.path.display())
            }
            Ok(p) => tracing::info!("SIGHUP: devices changed ({}): {p}", self.path.display()),
            Err(e) => tracing::warn!("SIGHUP: devices file refused, nothing changed: {e}"),
        }
    }

    /// Checks `proposed` whole, then applies it; on `Err` nothing changed.
    fn apply(&mut self, proposed: &[Device], origin: &Origin) -> Result<Plan, String> {
        let plan = device_plan::plan(&self.list(), proposed, origin, &self.prefixes)?;
        if plan.is_empty() {
            return Ok(plan);
        }
        let slot_of: HashMap<&str, usize> = self
            .devices
            .iter()
            .map(|(s, d)| (d.name.as_str(), *s))
            .collect();
        let shared = &self.shared;
        let new_slots = self.aead.with_peers(|peers| {
            // The plan is whole and checked, so no step below can fail: the
            // table holds exactly the current devices, removals come first,
            // and the proposed keys and addresses are unique.
            let mut changes = Vec::new();
            for d in plan.removed.iter().chain(&plan.rekeyed) {
                let slot = slot_of[d.name.as_str()];
                peers.remove_peer(PeerId(slot as u32));
                changes.push((slot, None));
            }
            let mut new_slots = HashMap::new();
            for d in plan.added.iter().chain(&plan.rekeyed) {
                let id = peers
                    .add_peer(d.public_key, d.name.clone(), false)
                    .expect("checked: keys are unique");
                let slot = id.0 as usize;
                new_slots.insert(d.name.clone(), slot);
                changes.push((slot, Some(peer_config(d, [None, None]))));
            }
            for d in &plan.readdressed {
                // the session stays, and so do the endpoints it was heard from
                let slot = slot_of[d.name.as_str()];
                let endpoints = shared
                    .peer(slot)
                    .map_or([None, None], |p| Channel::ALL.map(|ch| p.endpoint(ch)));
                changes.push((slot, Some(peer_config(d, endpoints))));
            }
            // Published before the next change can start. A new peer's
            // handshake answered before this line is answered all the same
            // (AeadAuth::with_peers); its data finds the endpoint's slot.
            shared
                .change_peers(&changes)
                .expect("checked: tunnel addresses are unique and present");
            new_slots
        });
        self.devices = proposed
            .iter()
            .map(|d| {
                let slot = new_slots
                    .get(&d.name)
                    .copied()
                    .unwrap_or_else(|| slot_of[d.name.as_str()]);
                (slot, d.clone())
            })
            .collect();
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_plan::testing::{dev, key};
    use dchannel_core::endpoint::{self, Config, Role};
    use dchannel_core::policy::parse_spec;
    use dchannel_crypto::devices::format_devices;
    use dchannel_crypto::{PrivateKey, PublicKey};

    /// A gateway's tables for `devices`, as main.rs builds them.
    fn live(devices: Vec<Device>) -> LiveDevices {
        let aead = AeadAuth::gateway(
            PrivateKey::from_bytes([99; 32]),
            &devices,
            Default::default(),
        )
        .unwrap();
        let peers = devices
            .iter()
            .map(|d| peer_config(d, [None, None]))
            .collect();
        let (tx, _rx) =
            endpoint::new::<Vec<u8>, _>(Config::new(Role::Gateway), peers, aead.clone(), || {
                parse_spec("all-hbc", 0.75).unwrap()
            })
            .unwrap();
        let prefixes = TunnelPrefixes::new("198.19.0.1/24", &[]).unwrap();
        LiveDevices::new(
            devices,
            aead,
            Arc::clone(tx.shared()),
            prefixes,
            "devices.toml".into(),
        )
    }

    /// Both tables, as (slot, name, key, address) per peer.
    fn tables(l: &LiveDevices) -> Vec<(usize, String, PublicKey, std::net::IpAddr)> {
        l.shared()
            .peers()
            .iter()
            .map(|p| {
                let key = l.aead().public_key(p.slot()).expect("in both tables");
                (
                    p.slot(),
                    p.name().to_string(),
                    key,
                    p.tunnel_addr().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn changes_reach_both_tables_and_keep_untouched_slots() {
        let mut l = live(vec![
            dev("a", 1, "198.19.0.2"),
            dev("b", 2, "198.19.0.3"),
            dev("c", 3, "198.19.0.4"),
        ]);
        let a_link = l.shared().peer(0).unwrap();
        let text = format_devices(&[
            dev("a", 1, "198.19.0.2"),
            dev("c", 30, "198.19.0.4"),
            dev("e", 5, "198.19.0.9"),
        ]);
        let p = l.sync(&text, "new.toml").unwrap();
        assert_eq!(
            p.to_string(),
            "added: e; removed: b; re-keyed: c; re-addressed: -"
        );
        // b's slot 1 and c's slot 2 freed (in that order), then reused, the
        // latest freed first: e (added) takes 2, c's new key 1
        let ip = |s: &str| s.parse().unwrap();
        assert_eq!(
            tables(&l),
            [
                (0, "a".into(), key(1), ip("198.19.0.2")),
                (1, "c".into(), key(30), ip("198.19.0.4")),
                (2, "e".into(), key(5), ip("198.19.0.9")),
            ]
        );
        assert!(
            Arc::ptr_eq(&a_link, &l.shared().peer(0).unwrap()),
            "a untouched"
        );
        assert_eq!(
            l.aead().with_peers(|p| p.find(&key(2))),
            None,
            "b's key gone"
        );
        // re-addressed: the same slot
        let p = l.set("a", None, Some("198.19.0.20")).unwrap();
        assert_eq!(p.readdressed, [dev("a", 1, "198.19.0.20")]);
        assert_eq!(tables(&l)[0], (0, "a".into(), key(1), ip("198.19.0.20")));
        let p = l.remove("e").unwrap();
        assert_eq!(p.removed, [dev("e", 5, "198.19.0.9")]);
        assert_eq!(tables(&l).len(), 2);
        let names: Vec<&str> = l.devices().iter().map(|(_, d)| d.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn a_refused_change_changes_nothing() {
        let mut l = live(vec![dev("a", 1, "198.19.0.2"), dev("b", 2, "198.19.0.3")]);
        let before = tables(&l);
        let generation = l.shared().generation();
        // the first device of the file is fine, the second is refused: the
        // whole file is (all or nothing)
        let text = format_devices(&[dev("n", 7, "198.19.0.7"), dev("m", 8, "10.1.1.1")]);
        let e = l.sync(&text, "new.toml").unwrap_err();
        assert!(
            e.starts_with("new.toml: line 7: device \"m\": field `address`"),
            "{e}"
        );
        let k1 = key(1).to_base64();
        for e in [
            l.set("z", Some(&k1), Some("198.19.0.8")).unwrap_err(),
            l.set("z", Some(&key(9).to_base64()), Some("198.19.0.3"))
                .unwrap_err(),
            l.set("z", Some("AAAA"), Some("198.19.0.8")).unwrap_err(),
            l.remove("nobody").unwrap_err(),
        ] {
            assert!(e.contains("--"), "names the flag: {e}");
        }
        assert_eq!(tables(&l), before);
        assert_eq!(
            l.shared().generation(),
            generation,
            "the endpoint saw no change"
        );
        assert_eq!(l.devices().len(), 2);
        // and an unchanged file is no change at all
        let same = format_devices(&[dev("a", 1, "198.19.0.2"), dev("b", 2, "198.19.0.3")]);
        assert!(l.sync(&same, "same.toml").unwrap().is_empty());
        assert_eq!(l.shared().generation(), generation);
    }
}
