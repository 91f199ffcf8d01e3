//! The agent's last act before it writes its stats: the main thread asks the
//! receive thread to publish the receive half's state (reorder stats) once more.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The main thread's request for a last publication of the receive half's state
/// (reorder stats), answered by the receive thread at once: an eventfd in its
/// poll set, and a flag it sets when done. Without it the stats written at exit
/// could miss up to one 50 ms publication period, and waiting that long cost
/// every lab run 60 ms of teardown.
pub struct FinalPublish {
    wake: OwnedFd,
    done: AtomicBool,
}

impl FinalPublish {
    /// A new request channel (an eventfd).
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            done: AtomicBool::new(false),
        })
    }

    /// The descriptor the receive thread polls (readable once requested).
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Receive thread: the request was seen and the publication made.
    pub fn answer(&self) {
        let mut v = [0u8; 8];
        // SAFETY: reading 8 bytes into a valid buffer from our eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
        self.done.store(true, Ordering::Release);
    }

    /// Main thread: asks for the publication and waits for it (at most `timeout`).
    pub fn request(&self, timeout: Duration) -> bool {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a valid buffer to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        let start = Instant::now();
        while !self.done.load(Ordering::Acquire) {
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }
}
