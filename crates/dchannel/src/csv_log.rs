//! A CSV log the agent writes while it runs (`--decision-log`,
//! `--arrival-log`): the header row, then one line per event through a 1 MiB
//! buffer, flushed at exit. One thread writes each log; the mutex is
//! uncontended and lets main flush.

use anyhow::{Context, Result};
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

pub struct CsvLog {
    w: Mutex<BufWriter<File>>,
    /// The log's name ("decision log"), for the panic on a poisoned lock.
    name: String,
}

impl CsvLog {
    /// Creates `path` (given by command-line `flag`, which errors name) and
    /// writes the header row `columns`.
    pub fn create(path: &Path, flag: &str, columns: &str) -> Result<CsvLog> {
        let f = File::create(path).with_context(|| format!("{flag} {}", path.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        writeln!(w, "{columns}")?;
        Ok(CsvLog {
            w: Mutex::new(w),
            name: flag.trim_start_matches("--").replace('-', " "),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BufWriter<File>> {
        self.w
            .lock()
            .unwrap_or_else(|e| panic!("{} lock: {e:?}", self.name))
    }

    /// Appends one row (`row` without its newline). A write error (disk
    /// full) is ignored: the log must not stop the agent.
    pub fn write_row(&self, row: fmt::Arguments) {
        let _ = writeln!(self.lock(), "{row}");
    }

    pub fn flush(&self) {
        let _ = self.lock().flush();
    }
}
