//! Bounded busy-poll (`--busy-poll-us`): after a thread moves a packet it polls
//! its descriptors without sleeping for a window, and so does its sibling.
//!
//! Why both: a lone request/response (a ping, a small RPC) crosses each agent
//! once each way, in two threads. Blocked in `poll(2)`, every crossing pays a
//! wake-up (tens of µs on a VM whose idle cores halt). The request's first
//! crossing cannot avoid it, but the reply comes back to the *other* thread of
//! the same agent: the client's `tun->udp` thread sends the request and its
//! `udp->tun` thread receives the reply; the gateway's `udp->tun` thread writes
//! the request to the TUN and its `tun->udp` thread reads the reply. So a
//! thread that moves a packet wakes a sleeping sibling at once (an eventfd in
//! the sibling's poll set): the sibling's wake-up is paid while the packet is
//! still in flight, and the sibling then spins until the reply is there.
//!
//! Cost: up to one window of CPU per thread after each burst of traffic (off
//! by default; the lab's agents share their cores with the browser). Correct
//! wake-ups rely on a Dekker-style pair: [`BusyPoll::moved`] stores the window
//! and then reads the sibling's `parked`; [`BusyPoll::park`] stores `parked`
//! and then reads the window (both `SeqCst`), so a sibling never sleeps
//! through a window opened for it.

use dchannel_core::Nanos;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

/// Which agent thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `tun->udp` (send_loop.rs).
    Sender = 0,
    /// `udp->tun` (agent.rs `run_receiver`).
    Receiver = 1,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Sender => Side::Receiver,
            Side::Receiver => Side::Sender,
        }
    }
}

/// One thread's state, on its own cache line (the other thread writes it only
/// when it opens a window, at most once per half window).
#[repr(align(64))]
struct Thread {
    /// Poll without sleeping while `now < until`.
    until: AtomicU64,
    /// Sleeping in `poll(2)` (or about to): a window opened for it must wake it.
    parked: AtomicBool,
    /// Readable when woken; in the thread's poll set.
    wake: OwnedFd,
}

/// Shared by an agent's two threads.
pub struct BusyPoll {
    window: Nanos,
    threads: [Thread; 2],
}

impl BusyPoll {
    /// A busy-poll of `window` ns after each packet (0: off, every thread
    /// sleeps as soon as it has nothing to do).
    pub fn new(window: Nanos) -> io::Result<Self> {
        let thread = || -> io::Result<Thread> {
            // SAFETY: plain syscall; the fd is owned below.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Thread {
                until: AtomicU64::new(0),
                parked: AtomicBool::new(false),
                // SAFETY: fd is a fresh descriptor that nothing else owns.
                wake: unsafe { OwnedFd::from_raw_fd(fd) },
            })
        };
        Ok(Self {
            window,
            threads: [thread()?, thread()?],
        })
    }

    /// Busy-poll is on.
    pub fn enabled(&self) -> bool {
        self.window > 0
    }

    /// `side` moved a packet at `now`: both threads poll without sleeping
    /// until `now + window` (at least half a window after the last packet:
    /// the shared window is stored at most once per half window), and a
    /// sleeping sibling is woken now (returns true then).
    pub fn moved(&self, side: Side, now: Nanos) -> bool {
        if self.window == 0 {
            return false;
        }
        self.extend(side, now);
        let other = &self.threads[side.other() as usize];
        self.extend(side.other(), now);
        if other.parked.load(SeqCst) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writing 8 bytes from a valid buffer to our eventfd.
            unsafe { libc::write(other.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
            return true;
        }
        false
    }

    fn extend(&self, side: Side, now: Nanos) {
        let t = &self.threads[side as usize];
        if t.until.load(Relaxed) < now + self.window / 2 {
            t.until.fetch_max(now + self.window, SeqCst);
        }
    }

    /// `side` has nothing to do at `now`: poll again at once (true) or sleep.
    pub fn spinning(&self, side: Side, now: Nanos) -> bool {
        now < self.threads[side as usize].until.load(Relaxed)
    }

    /// `side` is about to sleep in `poll(2)` with [`BusyPoll::wake_fd`] in its
    /// set. False if a window opened meanwhile (then it must not sleep; it is
    /// no longer parked).
    pub fn park(&self, side: Side, now: Nanos) -> bool {
        let t = &self.threads[side as usize];
        t.parked.store(true, SeqCst);
        if now < t.until.load(SeqCst) {
            t.parked.store(false, Relaxed);
            return false;
        }
        true
    }

    /// `side` woke up: no longer parked; a pending wake is consumed.
    pub fn unpark(&self, side: Side) {
        let t = &self.threads[side as usize];
        t.parked.store(false, Relaxed);
        let mut v = [0u8; 8];
        // SAFETY: reading 8 bytes into a valid buffer from our non-blocking eventfd.
        unsafe { libc::read(t.wake.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    }

    /// One turn of a spin: the core goes to any other runnable thread first
    /// (on two cores the agents' four threads, the application and the
    /// kernel's network work share them; a spin that never yields would
    /// delay the very packet it waits for).
    pub fn pause(&self) {
        std::thread::yield_now();
    }

    /// The eventfd that wakes `side` (readable after a wake).
    pub fn wake_fd(&self, side: Side) -> RawFd {
        self.threads[side as usize].wake.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const US: Nanos = 1_000;

    #[test]
    fn off_never_spins_and_never_wakes() {
        let b = BusyPoll::new(0).unwrap();
        assert!(!b.enabled());
        assert!(b.park(Side::Receiver, 0));
        assert!(!b.moved(Side::Sender, 10 * US));
        assert!(!b.spinning(Side::Receiver, 10 * US));
        assert!(!readable(b.wake_fd(Side::Receiver)));
    }

    #[test]
    fn a_packet_opens_the_window_for_both_sides() {
        let b = BusyPoll::new(200 * US).unwrap();
        assert!(!b.spinning(Side::Sender, 0) && !b.spinning(Side::Receiver, 0));
        b.moved(Side::Sender, 1_000 * US);
        for side in [Side::Sender, Side::Receiver] {
            assert!(b.spinning(side, 1_000 * US));
            assert!(b.spinning(side, 1_199 * US));
            assert!(!b.spinning(side, 1_200 * US), "closes at now + window");
        }
        // Nobody was parked: no wake is pending.
        assert!(!readable(b.wake_fd(Side::Receiver)));
    }

    #[test]
    fn the_window_moves_at_most_once_per_half_window() {
        let b = BusyPoll::new(200 * US).unwrap();
        b.moved(Side::Sender, 1_000 * US); // until 1200
        b.moved(Side::Sender, 1_050 * US); // 1200 >= 1050 + 100: kept
        assert!(!b.spinning(Side::Sender, 1_200 * US));
        b.moved(Side::Sender, 1_101 * US); // 1200 < 1101 + 100: moved to 1301
        assert!(b.spinning(Side::Sender, 1_300 * US));
        assert!(!b.spinning(Side::Sender, 1_301 * US));
    }

    #[test]
    fn a_parked_sibling_is_woken_and_a_late_window_cancels_the_park() {
        let b = BusyPoll::new(200 * US).unwrap();
        assert!(b.park(Side::Receiver, 0), "nothing open: it may sleep");
        assert!(b.moved(Side::Sender, 10 * US));
        assert!(readable(b.wake_fd(Side::Receiver)), "woken at once");
        b.unpark(Side::Receiver);
        assert!(!readable(b.wake_fd(Side::Receiver)), "the wake is consumed");
        // A window still open when the thread is about to sleep: it spins instead.
        assert!(!b.park(Side::Receiver, 100 * US));
        assert!(!b.moved(Side::Sender, 150 * US));
        assert!(
            !readable(b.wake_fd(Side::Receiver)),
            "not parked: no wake sent"
        );
    }

    #[test]
    fn a_sleeping_thread_wakes_within_a_second_of_a_packet_on_the_other() {
        let b = Arc::new(BusyPoll::new(200 * US).unwrap());
        let epoch = Instant::now();
        let now = move || epoch.elapsed().as_nanos() as Nanos;
        let sleeper = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                // The receive loop's shape: park, sleep in poll(2) until woken.
                while b.park(Side::Receiver, now()) {
                    let mut p = libc::pollfd {
                        fd: b.wake_fd(Side::Receiver),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    let rc = unsafe { libc::poll(&mut p, 1, 10_000) };
                    b.unpark(Side::Receiver);
                    if rc == 1 {
                        return true;
                    }
                }
                b.spinning(Side::Receiver, now())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        b.moved(Side::Sender, now());
        let t0 = Instant::now();
        assert!(sleeper.join().unwrap());
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }
}
