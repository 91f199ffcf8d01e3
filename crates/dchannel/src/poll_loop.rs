//! Busy-poll mode (`--busy-poll-us US`): one thread per agent runs both
//! directions and polls without sleeping for US µs after each packet.
//!
//! Why: a lone request/response (a ping, a small RPC) crosses each agent once
//! each way. Blocked in `poll(2)`, every crossing pays a wake-up (tens of µs
//! on a VM whose idle cores halt). A thread that keeps polling for a while
//! after a packet finds the reply already awake. One thread for both
//! directions (rather than a spinning `tun->udp` and `udp->tun` thread each)
//! halves the spinning threads: on two cores, the client's and the gateway's
//! spinners then leave the application and the kernel's network work a core
//! between them, and the reply never waits for a spinning sibling to be
//! scheduled.
//!
//! Each spin is one `poll(2)` with a zero timeout on the TUN, both channel
//! sockets and the final-publication request, then `sched_yield` when nothing
//! was ready (whatever else is runnable goes first: a spin that never yields
//! would delay the very packet it waits for). When the window has closed, the
//! same `poll(2)` sleeps until a descriptor is readable or a timer is due.
//! Cost: up to US µs of a core per agent after each burst of traffic.

use crate::agent::Io;
use crate::receive_loop::Receiver;
use crate::send_loop::{set_nonblocking, Read, Sender};
use dchannel_core::endpoint::{DatagramAuth, ReceiveHalf, SendHalf};
use dchannel_core::{Channel, Nanos, MS};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// TUN reads per wake-up before the sockets get their turn.
const TUN_READS_PER_TURN: usize = 64;

/// The single polling thread. `window` ns of busy-poll after each packet.
/// Never returns.
pub fn run<A: DatagramAuth>(
    io: Arc<Io>,
    tx: SendHalf<A>,
    rx: ReceiveHalf<Vec<u8>, A>,
    window: Nanos,
) {
    let mut s = Sender::new(&io, tx);
    let mut r = Receiver::new(&io, rx);
    set_nonblocking(io.tun.as_raw_fd());
    // Index 0, 1 = the channel sockets (index = Channel), 2 = the TUN,
    // 3 = the final-publication request.
    let mut pfds = [
        io.socks[0].as_raw_fd(),
        io.socks[1].as_raw_fd(),
        io.tun.as_raw_fd(),
        io.final_publish.fd(),
    ]
    .map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // Poll without sleeping while `now < until`.
    let mut until: Nanos = 0;
    loop {
        let now = io.now();
        r.handle_timeout(&io, now);
        s.handle_timeout(&io, now);
        let spin = now < until;
        let wait_ms = if spin {
            0
        } else {
            let due = r
                .poll_timeout(now)
                .min(s.poll_timeout().unwrap_or(Nanos::MAX));
            due.saturating_sub(now).div_ceil(MS).min(1000) as libc::c_int
        };
        // SAFETY: pfds is a valid array of four pollfd structs.
        if unsafe { libc::poll(pfds.as_mut_ptr(), 4, wait_ms) } <= 0 {
            if spin {
                io.stats.busy_poll.empty_spins.fetch_add(1, Relaxed);
                std::thread::yield_now();
            }
            continue;
        }
        let mut moved = 0;
        if pfds[2].revents != 0 {
            for _ in 0..TUN_READS_PER_TURN {
                if s.read_once(&io) != Read::Moved {
                    break;
                }
                moved += 1;
            }
        }
        for ch in Channel::ALL {
            if pfds[ch.index()].revents != 0 {
                moved += r.drain(&io, ch);
            }
        }
        // After the sockets were drained, so that what had arrived is counted.
        if pfds[3].revents != 0 {
            r.publish_final(&io);
        }
        if moved > 0 {
            if !spin {
                io.stats.busy_poll.windows.fetch_add(1, Relaxed);
            }
            until = io.now() + window;
        }
    }
}
