//! Replays packet arrivals through chanemu's CellReplay stage, for comparing with
//! `mm-cellular`'s packet log (docs/chanemu.md, "Beside mm-cellular").
//!
//! `cellreplay_replay DIR up|down [TIMER_MS] < arrivals`: each stdin line is
//! `ARRIVAL_MS IP_SIZE` (the IP packet's size, without mm-cellular's 4-byte TUN
//! header); each stdout line adds `RELEASE_MS HEAVY HELD_MS` (HEAVY: 1 if it went
//! through the heavy-PDO link; HELD_MS: when it left the light part, i.e.
//! mm-cellular's delay-queue release). Arrivals must be in order; times are whole ms.
//!
//! `cellreplay_replay DIR up|down --link BASE_MS < entries`: the heavy-PDO link
//! alone (`pdo_link.rs`), its time 0 at `BASE_MS`: each line `ENTRY_MS IP_SIZE` (when
//! the packet entered the link) gets `DELIVERY_MS` appended.

use chanemu::cellreplay::{CellReplayLink, TUN_HEADER_BYTES};
use chanemu::pdo_link::PdoLink;
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
    let dir = Arc::new(CellReplayDir::load(Path::new(&args[1]), side, 0)?);
    let link_only = match (args.get(3).map(String::as_str), args.get(4)) {
        (Some("--link"), Some(b)) => Some(b.parse::<i64>()?),
        _ => None,
    };
    let timer: i64 = match link_only {
        Some(_) => 0,
        None => args.get(3).map_or(Ok(0), |s| s.parse())?,
    };
    let mut link = CellReplayLink::new(dir.clone(), timer, 0);
    let mut pdo = PdoLink::new(dir, link_only.unwrap_or(0));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        let f: Vec<&str> = line.split_whitespace().collect();
        let [a, s] = f[..] else {
            anyhow::bail!("stdin line {}: expected `ARRIVAL_MS IP_SIZE`", i + 1);
        };
        let (a, s): (u64, u32) = (a.parse()?, s.parse()?);
        if link_only.is_some() {
            writeln!(
                out,
                "{a} {s} {}",
                pdo.deliver(a as i64, s + TUN_HEADER_BYTES)
            )?;
            continue;
        }
        let r = link.push(a * NS_PER_MS, s);
        writeln!(
            out,
            "{a} {s} {} {} {}",
            r.release / NS_PER_MS,
            u8::from(r.heavy),
            r.held / NS_PER_MS
        )?;
    }
    Ok(())
}
