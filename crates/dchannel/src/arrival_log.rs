//! Per-datagram arrival log (CSV) of the receiving agent, the "realised" side of
//! the reward-accuracy analysis (NSDI'23 Fig. 11): when each data datagram from
//! a peer arrived (CLOCK_MONOTONIC ns, shared by all network namespaces), its
//! flow id and sequence number (the sender's decision-log key), the channel and
//! the inner IP packet's size. Written only with `--arrival-log`.

use crate::csv_log::CsvLog;
use anyhow::Result;
use dchannel_core::endpoint::Arrival;
use dchannel_core::{Channel, Nanos};
use std::path::Path;

pub const COLUMNS: &str = "t_mono_ns,peer,flow_id,seq,channel,size";

pub struct ArrivalLog {
    // Only the receive thread writes.
    log: CsvLog,
    epoch_mono_ns: u64,
}

impl ArrivalLog {
    pub fn create(path: &Path, epoch_mono_ns: u64) -> Result<ArrivalLog> {
        Ok(ArrivalLog {
            log: CsvLog::create(path, "--arrival-log", COLUMNS)?,
            epoch_mono_ns,
        })
    }

    /// One line for `a`, which arrived on `ch`; `now` on the agent's clock (ns
    /// since its epoch). `size` is the inner packet's.
    pub fn record(&self, now: Nanos, a: &Arrival, ch: Channel) {
        self.log.write_row(format_args!(
            "{},{},{},{},{},{}",
            self.epoch_mono_ns + now,
            a.peer,
            a.flow_id,
            a.seq,
            ch.name(),
            a.inner_len
        ));
    }

    pub fn flush(&self) {
        self.log.flush();
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
