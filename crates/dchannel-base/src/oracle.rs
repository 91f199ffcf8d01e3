//! The delay oracle: a 16-byte shared-memory file in which the channel
//! emulator publishes, per direction, the one-way delay a packet entering the
//! link now would see, and which an agent started with `--hbc-owd-oracle`
//! reads instead of its own estimate.
//!
//! A lab instrument, not a deployment feature: it tells a policy the true
//! current delay of the emulated HBC, so a campaign can measure how much any
//! better delay estimate could buy (issue 19). Layout: two native-endian u64
//! nanosecond values, uplink (device → gateway) at offset 0, downlink at 8;
//! `u64::MAX` = nothing published yet. Each value is written and read as one
//! atomic, so a reader never sees half of an update.

use crate::Nanos;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A direction's slot in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Device → gateway (what the client agent sends on).
    Uplink = 0,
    /// Gateway → device (what the gateway agent sends on).
    Downlink = 1,
}

const LEN: usize = 16;
const NOTHING: u64 = u64::MAX;

/// A mapping of the oracle file, for writing (the emulator) or reading (an agent).
pub struct DelayOracle {
    ptr: *mut AtomicU64,
}

// SAFETY: the mapping is only accessed through atomics and lives as long as the value.
unsafe impl Send for DelayOracle {}
// SAFETY: as above.
unsafe impl Sync for DelayOracle {}

impl DelayOracle {
    /// Creates (or truncates) the file at `path` with nothing published.
    pub fn create(path: &Path) -> io::Result<DelayOracle> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        f.set_len(LEN as u64)?;
        let o = Self::map(&f)?;
        o.publish(Slot::Uplink, None);
        o.publish(Slot::Downlink, None);
        Ok(o)
    }

    /// Maps an existing oracle file (written by an emulator started with `--oracle`).
    pub fn open(path: &Path) -> io::Result<DelayOracle> {
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        let len = f.metadata()?.len();
        if len != LEN as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: {len} bytes, expected {LEN} (an emulator's --oracle file)",
                    path.display()
                ),
            ));
        }
        Self::map(&f)
    }

    fn map(f: &File) -> io::Result<DelayOracle> {
        // SAFETY: a fresh shared mapping of LEN bytes of a file that has LEN bytes;
        // the fd may close afterwards (the mapping keeps the file).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(DelayOracle { ptr: p.cast() })
    }

    fn slot(&self, s: Slot) -> &AtomicU64 {
        // SAFETY: the mapping is LEN = 2 * 8 bytes, page-aligned, alive as long as self.
        unsafe { &*self.ptr.add(s as usize) }
    }

    /// Publishes the delay of `slot` (`None`: unknown).
    pub fn publish(&self, slot: Slot, owd: Option<Nanos>) {
        self.slot(slot).store(owd.unwrap_or(NOTHING), Relaxed);
    }

    /// The delay last published for `slot`, if any.
    pub fn read(&self, slot: Slot) -> Option<Nanos> {
        match self.slot(slot).load(Relaxed) {
            NOTHING => None,
            ns => Some(ns),
        }
    }
}

impl Drop for DelayOracle {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`.
        unsafe { libc::munmap(self.ptr.cast(), LEN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_what_the_writer_publishes() {
        let dir = std::env::temp_dir().join(format!("dch-oracle-{}", std::process::id()));
        let w = DelayOracle::create(&dir).unwrap();
        let r = DelayOracle::open(&dir).unwrap();
        assert_eq!(r.read(Slot::Downlink), None);
        w.publish(Slot::Downlink, Some(53_000_000));
        w.publish(Slot::Uplink, Some(9_000_000));
        assert_eq!(r.read(Slot::Downlink), Some(53_000_000));
        assert_eq!(r.read(Slot::Uplink), Some(9_000_000));
        std::fs::write(&dir, b"short").unwrap();
        let e = DelayOracle::open(&dir).err().unwrap().to_string();
        assert!(e.contains("5 bytes, expected 16"), "{e}");
        std::fs::remove_file(&dir).unwrap();
    }
}
