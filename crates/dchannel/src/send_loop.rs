//! The `tun->udp` thread: reads inner packets from the TUN, lets the send
//! half steer, encapsulate and seal each in place, sends the datagrams and
//! counts them. With TUN offloads a read may be a TCP super-packet: it is cut
//! into its packets (`dchannel_core::gso`), each steered on its own, and their
//! datagrams leave together (`sendmmsg`, batch_send.rs).

use crate::agent::Io;
use crate::batch_send::SendBatch;
use crate::busy_poll::Side;
use crate::stats::Malformed;
use dchannel_core::endpoint::{DatagramAuth, SendHalf, Transmit};
use dchannel_core::gso::{Segments, VnetHdr};
use dchannel_core::{Channel, Nanos};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Sender loop: TUN -> send half -> UDP. Never returns.
pub fn run_sender<A: DatagramAuth>(io: Arc<Io>, mut tx: SendHalf<A>) {
    let fd = io.tun.as_raw_fd();
    let headroom = tx.headroom();
    let mut buf = vec![0u8; headroom + 65536 + tx.tailroom()];
    let read_max = buf.len() - headroom - tx.tailroom();
    // With offloads a read is a virtio_net_hdr and a packet of up to 64 KiB,
    // cut into `buf` one packet at a time.
    let mut sup = if io.vnet_hdr {
        vec![0u8; VnetHdr::LEN + 65536]
    } else {
        Vec::new()
    };
    let mut batch = SendBatch::new(buf.len());
    let mut wake_buf = vec![0u8; tx.wake_buf_len()];
    let one_peer = tx.shared().peers().len() == 1;
    if io.busy.enabled() {
        set_nonblocking(fd);
    }
    loop {
        let into = if io.vnet_hdr {
            &mut sup[..]
        } else {
            &mut buf[headroom..headroom + read_max]
        };
        // SAFETY: reading into our own buffer.
        let n = unsafe { libc::read(fd, into.as_mut_ptr().cast(), into.len()) };
        if n <= 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                idle(&io, fd); // busy-poll on: the TUN is non-blocking
            } else if e.kind() != ErrorKind::Interrupted {
                tracing::warn!("TUN read failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            continue;
        }
        let now = io.now();
        if !io.vnet_hdr {
            if let Some(t) = steer(&io, &mut tx, &mut buf, n as usize, &mut wake_buf, now) {
                match io.socks[t.channel.index()].send_to(&buf[..t.len], t.destination) {
                    Ok(_) => io.stats.chan(t.channel).sent(t.len),
                    Err(e) => {
                        io.stats.bad(Malformed::SendError);
                        tracing::debug!("send on {} to {} failed: {e}", t.channel, t.destination);
                    }
                }
            }
        } else {
            let segments = VnetHdr::parse(&sup[..n as usize])
                .and_then(|h| Segments::new(h, &sup[VnetHdr::LEN..n as usize]));
            match segments {
                Ok(mut segs) => {
                    if segs.count() > 1 {
                        io.stats.tun.superpackets.fetch_add(1, Relaxed);
                        io.stats
                            .tun
                            .segments
                            .fetch_add(segs.count() as u64, Relaxed);
                    }
                    // Each segment sealed in its own slot, all sent together.
                    loop {
                        if batch.is_full() {
                            send_batch(&io, &mut batch);
                        }
                        let slot = batch.slot();
                        let Some(len) = segs.next_into(&mut slot[headroom..headroom + read_max])
                        else {
                            break;
                        };
                        if let Some(t) = steer(&io, &mut tx, slot, len, &mut wake_buf, now) {
                            batch.push(t.channel, t.destination, t.len);
                        }
                    }
                    send_batch(&io, &mut batch);
                }
                Err(e) => {
                    io.stats.bad(Malformed::BadOffload);
                    tracing::debug!("TUN read of {n} bytes: {e}");
                }
            }
        }
        if io.busy.moved(Side::Sender, now) {
            io.stats.busy_poll.wakes.fetch_add(1, Relaxed);
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now);
            io.stats.flows.publish(tx.flows(), tx.flow_table_stats());
        } else if one_peer {
            io.stats.flows.publish(tx.flows(), tx.flow_table_stats());
        }
    }
}

/// Steers and seals the packet at `buf[headroom..headroom + len]` in place and
/// counts the decision; the datagram is `buf[..t.len]`, for the caller to send.
fn steer<A: DatagramAuth>(
    io: &Io,
    tx: &mut SendHalf<A>,
    buf: &mut [u8],
    len: usize,
    wake_buf: &mut [u8],
    now: Nanos,
) -> Option<Transmit> {
    let t = match tx.handle_tun(now, buf, len) {
        Ok(t) => t,
        Err(reason) => {
            io.stats.dropped(reason);
            return None;
        }
    };
    let st = &t.steered;
    if st.flow_id == 0 {
        io.stats.bad(Malformed::UnparsableInner);
    }
    io.stats.decisions[st.decision.outcome as usize][t.channel.index()].fetch_add(1, Relaxed);
    if let Some(log) = &io.log {
        log.record(now, t.peer, st, t.channel);
    }
    if let Some(w) = tx.poll_wake(now, wake_buf) {
        // `prewarm`: a one-way probe on the HBC wakes the device's radio before
        // the reply to this LLC packet comes down the HBC.
        match io.socks[w.channel.index()].send_to(&wake_buf[..w.len], w.destination) {
            Ok(_) => _ = io.stats.chan(w.channel).wake_tx.fetch_add(1, Relaxed),
            Err(_) => io.stats.bad(Malformed::SendError),
        }
    }
    Some(t)
}

/// Sends a batch of sealed segments and counts them.
fn send_batch(io: &Io, batch: &mut SendBatch) {
    for (ch, s) in Channel::ALL.into_iter().zip(batch.flush(&io.socks)) {
        let c = io.stats.chan(ch);
        c.tx_pkts.fetch_add(s.datagrams, Relaxed);
        c.tx_bytes.fetch_add(s.bytes, Relaxed);
        for _ in 0..s.failed {
            io.stats.bad(Malformed::SendError);
        }
    }
}

/// Nothing to read (busy-poll on): look again at once while a window is open,
/// else sleep until the TUN is readable or the receive thread wakes us.
fn idle(io: &Io, tun: libc::c_int) {
    let now = io.now();
    if io.busy.spinning(Side::Sender, now) || !io.busy.park(Side::Sender, now) {
        io.busy.pause();
        return;
    }
    let mut pfds = [tun, io.busy.wake_fd(Side::Sender)].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: pfds is a valid array of two pollfd structs.
    unsafe { libc::poll(pfds.as_mut_ptr(), 2, -1) };
    io.busy.unpark(Side::Sender);
}

/// Sets `O_NONBLOCK` on the TUN (its writes never block either way).
fn set_nonblocking(fd: libc::c_int) {
    // SAFETY: fcntl on a descriptor we own, integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}
