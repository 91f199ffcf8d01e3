//! Sliding anti-replay window over 64-bit counters (RFC 6479 style, as in
//! WireGuard): a ring of 64-bit blocks; moving the window forward clears whole
//! blocks, so each datagram costs O(1) whatever the jump.
//!
//! Size: [`RING_BITS`] = 8192 bits (1 KiB) per channel and session, of which
//! [`WINDOW`] = 8128 counters behind the highest one seen are accepted once. One
//! window per channel (each channel has its own counter space, see
//! docs/wire.md), so the HBC/LLC delay difference never shows up here; the
//! window only absorbs reordering inside one channel: 8128 packets are 45 ms at
//! 2 Gbit/s of 1400-byte packets (178 k pkt/s), more than any path or a
//! multi-queue sender reorders within one channel.
//!
//! Use: [`ReplayWindow::check`] before decrypting (cheap reject), then
//! [`ReplayWindow::update`] once the datagram has authenticated, so forged
//! datagrams never move the window.

use crate::CryptoDrop;

const BLOCK_BITS: u64 = 64;
/// Bits in the ring.
pub const RING_BITS: u64 = 8192;
const BLOCKS: u64 = RING_BITS / BLOCK_BITS;
/// Counters this far (or less) behind the highest seen are still accepted once.
pub const WINDOW: u64 = RING_BITS - BLOCK_BITS;

/// The window of one receive direction of one channel.
#[derive(Clone)]
pub struct ReplayWindow {
    /// Highest counter accepted so far (0 before any; counter 0 is then new).
    last: u64,
    ring: [u64; BLOCKS as usize],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            last: 0,
            ring: [0; BLOCKS as usize],
        }
    }
}

impl std::fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("last", &self.last)
            .finish()
    }
}

impl ReplayWindow {
    /// Would `counter` be accepted? Does not change the window.
    pub fn check(&self, counter: u64) -> Result<(), CryptoDrop> {
        if counter > self.last {
            return Ok(());
        }
        if self.last - counter > WINDOW {
            return Err(CryptoDrop::TooOld);
        }
        let block = ((counter / BLOCK_BITS) % BLOCKS) as usize;
        if self.ring[block] & (1 << (counter % BLOCK_BITS)) != 0 {
            Err(CryptoDrop::Replay)
        } else {
            Ok(())
        }
    }

    /// Marks `counter` as seen (after it authenticated), moving the window if it
    /// is the highest so far. Returns false if it had been seen (or is too old).
    pub fn update(&mut self, counter: u64) -> bool {
        if counter > self.last {
            let current = self.last / BLOCK_BITS;
            let target = counter / BLOCK_BITS;
            let clear = (target - current).min(BLOCKS);
            for i in 1..=clear {
                self.ring[((current + i) % BLOCKS) as usize] = 0;
            }
            self.last = counter;
        } else if self.last - counter > WINDOW {
            return false;
        }
        let block = ((counter / BLOCK_BITS) % BLOCKS) as usize;
        let bit = 1u64 << (counter % BLOCK_BITS);
        let old = self.ring[block];
        self.ring[block] = old | bit;
        old & bit == 0
    }

    /// Highest counter accepted so far.
    pub fn highest(&self) -> u64 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(w: &mut ReplayWindow, c: u64) -> Result<(), CryptoDrop> {
        w.check(c)?;
        assert!(w.update(c));
        Ok(())
    }

    #[test]
    fn in_order_then_duplicates() {
        let mut w = ReplayWindow::default();
        for c in 0..200 {
            assert_eq!(accept(&mut w, c), Ok(()), "counter {c}");
        }
        for c in 0..200 {
            assert_eq!(w.check(c), Err(CryptoDrop::Replay), "counter {c}");
            assert!(!w.update(c));
        }
    }

    #[test]
    fn reordered_within_window_accepted_once() {
        let mut w = ReplayWindow::default();
        assert_eq!(accept(&mut w, 10_000), Ok(()));
        // exactly WINDOW behind is the oldest accepted; one more is too old
        assert_eq!(accept(&mut w, 10_000 - WINDOW), Ok(()));
        assert_eq!(w.check(10_000 - WINDOW - 1), Err(CryptoDrop::TooOld));
        assert!(!w.update(10_000 - WINDOW - 1));
        // arbitrary reordering inside the window
        for c in (9_000..10_000).rev() {
            assert_eq!(accept(&mut w, c), Ok(()), "counter {c}");
        }
        assert_eq!(w.check(9_500), Err(CryptoDrop::Replay));
        assert_eq!(w.highest(), 10_000);
    }

    #[test]
    fn big_jump_clears_the_ring() {
        let mut w = ReplayWindow::default();
        for c in 0..RING_BITS {
            accept(&mut w, c).unwrap();
        }
        let far = 1_000_000;
        accept(&mut w, far).unwrap();
        // counters just behind the jump were never seen: accepted
        assert_eq!(accept(&mut w, far - 1), Ok(()));
        assert_eq!(accept(&mut w, far - 100), Ok(()));
        assert_eq!(w.check(10), Err(CryptoDrop::TooOld));
    }

    #[test]
    fn check_alone_does_not_move_the_window() {
        let mut w = ReplayWindow::default();
        accept(&mut w, 5).unwrap();
        assert_eq!(w.check(1_000_000), Ok(()));
        assert_eq!(w.highest(), 5);
        assert_eq!(accept(&mut w, 4), Ok(()));
    }

    #[test]
    fn window_slides_block_by_block() {
        // After moving into a new block, the bits of the block that fell out of
        // the ring must read as "too old", not as stale "seen" bits.
        let mut w = ReplayWindow::default();
        accept(&mut w, 0).unwrap();
        accept(&mut w, RING_BITS).unwrap(); // same ring slot as counter 0
        assert_eq!(w.check(0), Err(CryptoDrop::TooOld));
        assert_eq!(accept(&mut w, RING_BITS - 1), Ok(()));
        assert_eq!(accept(&mut w, 64), Ok(())); // RING_BITS - 64 behind: still inside
    }
}
