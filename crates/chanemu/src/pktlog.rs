//! Optional per-packet log: CSV, one line per delivered or dropped packet.
//!
//! `dir,arrival_us,release_us,sent_us,outcome,size,delay_us,queue_pkts`
//! Times are µs since chanemu printed READY; `release_us` is the emulated
//! schedule, `sent_us` when the packet was actually written to the TUN device;
//! drops leave release/sent/delay empty.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Mutex;

pub const HEADER: &str = "dir,arrival_us,release_us,sent_us,outcome,size,delay_us,queue_pkts";

pub struct PacketLog {
    out: Mutex<BufWriter<File>>,
}

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl PacketLog {
    pub fn create(path: &std::path::Path) -> anyhow::Result<PacketLog> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
        writeln!(w, "{HEADER}")?;
        Ok(PacketLog { out: Mutex::new(w) })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn sent(&self, dir: &str, arrival: u64, release: u64, sent: u64, size: u32, depth: u32) {
        let line = format!(
            "{dir},{},{},{},sent,{size},{},{depth}\n",
            us(arrival),
            us(release),
            us(sent),
            us(release - arrival)
        );
        let _ = self
            .out
            .lock()
            .expect("log lock")
            .write_all(line.as_bytes());
    }

    pub fn dropped(&self, dir: &str, arrival: u64, reason: &str, size: u32, depth: u32) {
        let line = format!("{dir},{},,,{reason},{size},,{depth}\n", us(arrival));
        let _ = self
            .out
            .lock()
            .expect("log lock")
            .write_all(line.as_bytes());
    }

    pub fn flush(&self) {
        let _ = self.out.lock().expect("log lock").flush();
    }
}
