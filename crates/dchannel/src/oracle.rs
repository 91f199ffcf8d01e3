//! `--hbc-owd-oracle`: the agent side of the lab's delay oracle
//! (`dchannel_base::oracle`), read per packet by the send half.

use anyhow::{Context, Result};
use dchannel_base::oracle::{DelayOracle, Slot};
use dchannel_core::endpoint::{HbcOwdOracle, Role};
use dchannel_core::Nanos;
use std::path::Path;

/// The emulator's published HBC delay in this agent's sending direction.
pub struct FileOracle {
    file: DelayOracle,
    slot: Slot,
}

impl FileOracle {
    /// Maps `path`; a client sends uplink, a gateway downlink.
    pub fn open(path: &Path, role: Role) -> Result<FileOracle> {
        let file = DelayOracle::open(path)
            .with_context(|| format!("--hbc-owd-oracle {}", path.display()))?;
        let slot = match role {
            Role::Client => Slot::Uplink,
            Role::Gateway => Slot::Downlink,
        };
        Ok(FileOracle { file, slot })
    }
}

impl HbcOwdOracle for FileOracle {
    fn hbc_owd(&self) -> Option<Nanos> {
        self.file.read(self.slot)
    }
}
