//! Optional capture of what crosses the emulated link (`--pcap PREFIX`): one
//! pcap file per direction, `PREFIX-uplink.pcap` (A→B) and
//! `PREFIX-downlink.pcap` (B→A), LINKTYPE_RAW (101: each record is one IP
//! packet, IPv4 or IPv6, as read from the TUN device), nanosecond timestamps
//! (magic `0xa1b23c4d`) of when the packet left the emulator (was written to
//! the far side's TUN device), wall-clock time. Packets the emulator dropped
//! (queue, loss) are not in the capture: it shows what the far end received.
//!
//! Off the hot path: a packet thread copies the packet into a recycled buffer
//! and hands it to a bounded channel ([`QUEUE`] records); one writer thread
//! writes both files through 1 MiB buffers. When the channel is full the record
//! is dropped and counted (`pcap.*.dropped` in the stats), never waited for.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// LINKTYPE_RAW: the packet starts with its IP header.
pub const LINKTYPE_RAW: u32 = 101;
/// pcap magic for nanosecond timestamps.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Records waiting for the writer at most (per capture, both directions).
pub const QUEUE: usize = 16_384;
/// Largest packet captured whole.
pub const SNAPLEN: u32 = 65_535;

/// The 24-byte pcap global header (little-endian).
pub fn global_header() -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone, sigfigs: 0
    h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
    h
}

/// The 16-byte header of one record: time (ns since the UNIX epoch), captured
/// and original length.
pub fn record_header(unix_ns: u64, incl: u32, orig: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&((unix_ns / 1_000_000_000) as u32).to_le_bytes());
    h[4..8].copy_from_slice(&((unix_ns % 1_000_000_000) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&incl.to_le_bytes());
    h[12..16].copy_from_slice(&orig.to_le_bytes());
    h
}

/// The file of direction `name` (`uplink`, `downlink`) for `prefix`.
pub fn file_name(prefix: &Path, name: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(format!("-{name}.pcap"));
    PathBuf::from(s)
}

struct Record {
    dir: usize,
    unix_ns: u64,
    orig: u32,
    data: Vec<u8>,
}

/// The packet thread's end of a capture, for one direction.
pub struct Tap {
    dir: usize,
    wall_at_epoch_ns: u64,
    tx: SyncSender<Record>,
    spare_rx: Receiver<Vec<u8>>,
    spare: Option<Vec<u8>>,
    dropped: Arc<AtomicU64>,
}

impl Tap {
    /// Captures `packet`, which left the emulator `sent_ns` after the epoch.
    /// Never blocks: a full queue drops the record (counted).
    pub fn packet(&mut self, sent_ns: u64, packet: &[u8]) {
        let mut data = self
            .spare
            .take()
            .or_else(|| self.spare_rx.try_recv().ok())
            .unwrap_or_else(|| Vec::with_capacity(2048));
        let take = packet.len().min(SNAPLEN as usize);
        data.clear();
        data.extend_from_slice(&packet[..take]);
        let rec = Record {
            dir: self.dir,
            unix_ns: self.wall_at_epoch_ns + sent_ns,
            orig: packet.len() as u32,
            data,
        };
        match self.tx.try_send(rec) {
            Ok(()) => {}
            Err(TrySendError::Full(r)) | Err(TrySendError::Disconnected(r)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.spare = Some(r.data);
            }
        }
    }
}

/// Counts of one direction's capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCounts {
    /// Records written.
    pub records: u64,
    /// Records dropped because the writer fell behind.
    pub dropped: u64,
}

/// A running capture: the writer thread and the files.
pub struct Capture {
    writer: JoinHandle<std::io::Result<[u64; 2]>>,
    dropped: [Arc<AtomicU64>; 2],
}

impl Capture {
    /// Creates both files (writing their global headers) and starts the
    /// writer. `wall_at_epoch_ns`: wall-clock time (ns since the UNIX epoch)
    /// of the driver's epoch. Returns the taps for uplink and downlink.
    pub fn start(prefix: &Path, wall_at_epoch_ns: u64) -> anyhow::Result<(Capture, [Tap; 2])> {
        let mut outs = Vec::new();
        for f in [file_name(prefix, "uplink"), file_name(prefix, "downlink")] {
            let file = File::create(&f)
                .map_err(|e| anyhow::anyhow!("create pcap {}: {e}", f.display()))?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            w.write_all(&global_header())?;
            outs.push(w);
        }
        let (tx, rx) = sync_channel::<Record>(QUEUE);
        let (sp_up_tx, sp_up_rx) = sync_channel::<Vec<u8>>(1024);
        let (sp_dn_tx, sp_dn_rx) = sync_channel::<Vec<u8>>(1024);
        let dropped = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
        let spares = [sp_up_tx, sp_dn_tx];
        let writer = std::thread::Builder::new().name("pcap".into()).spawn(
            move || -> std::io::Result<[u64; 2]> {
                let mut counts = [0u64; 2];
                for r in rx {
                    let w = &mut outs[r.dir];
                    w.write_all(&record_header(r.unix_ns, r.data.len() as u32, r.orig))?;
                    w.write_all(&r.data)?;
                    counts[r.dir] += 1;
                    let _ = spares[r.dir].try_send(r.data);
                }
                for w in &mut outs {
                    w.flush()?;
                }
                Ok(counts)
            },
        )?;
        let mk = |dir: usize, spare_rx| Tap {
            dir,
            wall_at_epoch_ns,
            tx: tx.clone(),
            spare_rx,
            spare: None,
            dropped: dropped[dir].clone(),
        };
        let taps = [mk(0, sp_up_rx), mk(1, sp_dn_rx)];
        Ok((Capture { writer, dropped }, taps))
    }

    /// Waits for the writer once every tap is gone (the packet threads ended),
    /// flushes the files and returns the counts (uplink, downlink).
    pub fn finish(self) -> anyhow::Result<[DirCounts; 2]> {
        let written = self
            .writer
            .join()
            .map_err(|_| anyhow::anyhow!("pcap writer panicked"))??;
        Ok([0, 1].map(|d| DirCounts {
            records: written[d],
            dropped: self.dropped[d].load(Ordering::Relaxed),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_have_the_pcap_layout() {
        let g = global_header();
        assert_eq!(&g[..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&g[4..8], &[2, 0, 4, 0]);
        assert_eq!(&g[16..20], &[0xff, 0xff, 0, 0]);
        assert_eq!(&g[20..24], &[101, 0, 0, 0]);
        let r = record_header(1_700_000_000_123_456_789, 60, 1500);
        assert_eq!(
            u32::from_le_bytes(r[0..4].try_into().unwrap()),
            1_700_000_000
        );
        assert_eq!(u32::from_le_bytes(r[4..8].try_into().unwrap()), 123_456_789);
        assert_eq!(u32::from_le_bytes(r[8..12].try_into().unwrap()), 60);
        assert_eq!(u32::from_le_bytes(r[12..16].try_into().unwrap()), 1500);
        assert_eq!(
            file_name(Path::new("/tmp/run/hbc"), "uplink"),
            PathBuf::from("/tmp/run/hbc-uplink.pcap")
        );
    }

    #[test]
    fn capture_writes_records_per_direction() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("cap");
        let (cap, [mut up, mut down]) = Capture::start(&prefix, 5_000_000_000).unwrap();
        up.packet(1, &[0x45, 1, 2, 3]);
        up.packet(2, &[0x45, 4]);
        down.packet(3, &[0x60; 40]);
        drop((up, down));
        let counts = cap.finish().unwrap();
        assert_eq!(
            counts[0],
            DirCounts {
                records: 2,
                dropped: 0
            }
        );
        assert_eq!(
            counts[1],
            DirCounts {
                records: 1,
                dropped: 0
            }
        );
        let u = std::fs::read(file_name(&prefix, "uplink")).unwrap();
        assert_eq!(u.len(), 24 + 16 + 4 + 16 + 2);
        assert_eq!(&u[24..40], &record_header(5_000_000_001, 4, 4));
        assert_eq!(&u[40..44], &[0x45, 1, 2, 3]);
        let d = std::fs::read(file_name(&prefix, "downlink")).unwrap();
        assert_eq!(d.len(), 24 + 16 + 40);
    }
}
