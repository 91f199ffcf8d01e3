//! Replays packet arrivals through chanemu's CellReplay stage, for comparing with
//! `mm-cellular`'s packet log (docs/chanemu.md, "Beside mm-cellular").
//!
//! `cellreplay_replay DIR up|down [TIMER_MS] < arrivals`: each stdin line is
//! `ARRIVAL_MS IP_SIZE` (the IP packet's size, without mm-cellular's 4-byte TUN
//! header); each stdout line adds `RELEASE_MS HEAVY` (1 if it went through the
//! heavy-PDO link). Arrivals must be in order; times are whole ms.

use chanemu::cellreplay::CellReplayLink;
use chanemu::time::NS_PER_MS;
use chanemu::trace::cellreplay::{CellReplayDir, CellReplaySide};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        anyhow::bail!("usage: cellreplay_replay DIR up|down [TIMER_MS] < arrivals");
    }
    let side = match args[2].as_str() {
        "up" => CellReplaySide::Up,
        "down" => CellReplaySide::Down,
        s => anyhow::bail!("side must be up or down, got {s:?}"),
    };
    let timer: i64 = args.get(3).map_or(Ok(0), |s| s.parse())?;
    let dir = CellReplayDir::load(Path::new(&args[1]), side, 0)?;
    let mut link = CellReplayLink::new(Arc::new(dir), timer, 0);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        let f: Vec<&str> = line.split_whitespace().collect();
        let [a, s] = f[..] else {
            anyhow::bail!("stdin line {}: expected `ARRIVAL_MS IP_SIZE`", i + 1);
        };
        let (a, s): (u64, u32) = (a.parse()?, s.parse()?);
        let r = link.push(a * NS_PER_MS, s);
        writeln!(
            out,
            "{a} {s} {} {}",
            r.release / NS_PER_MS,
            u8::from(r.heavy)
        )?;
    }
    Ok(())
}
