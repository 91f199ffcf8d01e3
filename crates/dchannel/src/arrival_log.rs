//! Per-datagram arrival log (CSV) of the receiving agent, the "realised" side of
//! the reward-accuracy analysis (NSDI'23 Fig. 11): when each data datagram from
//! a peer arrived (CLOCK_MONOTONIC ns, shared by all network namespaces), its
//! flow id and sequence number (the sender's decision-log key), the channel and
//! the inner IP packet's size. Written only with `--arrival-log`.

use anyhow::{Context, Result};
use dchannel_core::{Channel, Nanos};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

pub const COLUMNS: &str = "t_mono_ns,peer,flow_id,seq,channel,size";

pub struct ArrivalLog {
    // Only the receive thread writes; the mutex is uncontended and lets main flush.
    w: Mutex<BufWriter<File>>,
    epoch_mono_ns: u64,
}

impl ArrivalLog {
    pub fn create(path: &Path, epoch_mono_ns: u64) -> Result<ArrivalLog> {
        let f = File::create(path).with_context(|| format!("--arrival-log {}", path.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        writeln!(w, "{COLUMNS}")?;
        Ok(ArrivalLog {
            w: Mutex::new(w),
            epoch_mono_ns,
        })
    }

    /// One line; `now` on the agent's clock (ns since its epoch).
    pub fn record(
        &self,
        now: Nanos,
        peer: usize,
        flow_id: u16,
        seq: u32,
        ch: Channel,
        size: usize,
    ) {
        let mut w = self.w.lock().expect("arrival log lock");
        let _ = writeln!(
            w,
            "{},{peer},{flow_id},{seq},{},{size}",
            self.epoch_mono_ns + now,
            ch.name()
        );
    }

    pub fn flush(&self) {
        let _ = self.w.lock().expect("arrival log lock").flush();
    }
}

/// CLOCK_MONOTONIC now, in ns (the clock `std::time::Instant` reads on Linux).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
