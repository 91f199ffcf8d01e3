//! Agent restarts in the middle of a download (issue 16.2). SIGKILL the
//! gateway (or the client) while 50 MB flow from srv to ue, start it again
//! with the same flags and re-add its route (what a supervisor does, see
//! docs/deploy.md): the application's TCP connection survives — no reset —
//! and the download completes byte-exact.
//!
//! A restarted gateway has lost the session: the client's datagrams fail to
//! authenticate there. The client notices that nothing authentic comes back
//! (`Limits::stale_after`, three probe intervals) and handshakes again. A
//! restarted client simply handshakes at start; the gateway replaces the old
//! session. The recovery times are printed (`--nocapture`) for
//! docs/reliability.md.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEN: usize = 50 << 20;

/// Which agent is restarted.
#[derive(Clone, Copy, Debug)]
enum Who {
    Gateway,
    Client,
}

/// Starts a LEN-byte download srv -> ue; returns (bytes received so far,
/// the receiving thread: data and the longest gap between two reads).
fn download(
    t: &Topo,
    port: u16,
) -> (
    Arc<AtomicUsize>,
    std::thread::JoinHandle<(Vec<u8>, Duration)>,
) {
    let data = pattern(LEN, 11);
    let l = in_ns(&t.srv, move || TcpListener::bind((SRV, port)).unwrap())
        .join()
        .unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(&data).unwrap(); // an error here is a reset: the test fails
    });
    let got = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&got);
    let rx = in_ns(&t.ue, move || {
        let mut s = TcpStream::connect((SRV, port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut v = Vec::with_capacity(LEN);
        let mut buf = vec![0u8; 1 << 16];
        let (mut last, mut worst) = (Instant::now(), Duration::ZERO);
        loop {
            let n = s
                .read(&mut buf)
                .expect("the download broke (reset or 60 s silence)");
            if n == 0 {
                break;
            }
            worst = worst.max(last.elapsed());
            last = Instant::now();
            v.extend_from_slice(&buf[..n]);
            counter.store(v.len(), Ordering::Relaxed);
        }
        (v, worst)
    });
    (got, rx)
}

fn restart_during_download(who: Who) {
    let t = Topo::new();
    // the LLC's 2 Mbit/s nominal rate would hold a 50 MB download back for
    // minutes under dchannel; all-hbc keeps it to a second or two, and the
    // probes, session and restart logic are the same for every policy
    let policy = "all-hbc";
    let mut a = t.start(policy, &[]);
    let (got, rx) = download(&t, 7300);
    // kill once a fifth has arrived
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.load(Ordering::Relaxed) < LEN / 5 {
        assert!(Instant::now() < deadline, "the download did not start");
        std::thread::sleep(Duration::from_millis(2));
    }
    let killed_at = Instant::now();
    let at_kill = got.load(Ordering::Relaxed);
    let (child, argv) = match who {
        Who::Gateway => (&mut a.gateway, t.gateway_argv(policy, &[])),
        Who::Client => (&mut a.client, t.client_argv(policy, &[])),
    };
    let mut old = child.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    *child = Some(spawn_ready(&argv));
    match who {
        Who::Gateway => t.route_gateway(),
        Who::Client => t.route_client(),
    }
    let up_again = killed_at.elapsed();
    let (data, worst_gap) = rx.join().unwrap();
    assert!(
        data == pattern(LEN, 11),
        "not byte-exact ({} of {LEN} bytes)",
        data.len()
    );
    let (ue, gw) = a.stop();
    let hs = &ue["crypto"]["handshakes"];
    println!(
        "{who:?} restart: agent back after {} ms; download stalled {} ms at most (longest \
         gap between two reads; {at_kill} of {LEN} bytes had arrived at the kill); client \
         handshakes: {hs}; gateway answered {}",
        up_again.as_millis(),
        worst_gap.as_millis(),
        gw["crypto"]["handshakes"]["answered"]
    );
    match who {
        // the client noticed the silent gateway and handshook once more
        Who::Gateway => assert!(hs["stale"].as_u64().unwrap() >= 1, "{hs}"),
        // the new client's first handshake
        Who::Client => assert!(hs["completed_as_initiator"].as_u64().unwrap() >= 1, "{hs}"),
    }
    // The stall: three probe intervals until the client handshakes again (gateway
    // restart), the handshake, then TCP's next retransmission, whose timeout has
    // doubled meanwhile (200 ms, 400, 800, 1600, ...). Without the new handshake
    // the session would stay dead until the 120 s rekey and the download would
    // hit its 60 s read timeout. 8 s: slack for a loaded 2-core machine.
    assert!(worst_gap <= Duration::from_secs(8), "stalled {worst_gap:?}");
}

fn gateway_restart_mid_download_keeps_the_connection() {
    restart_during_download(Who::Gateway);
}

fn client_restart_mid_download_keeps_the_connection() {
    restart_during_download(Who::Client);
}

dchannel_base::test_main! {
    tun: true,
    plain: [],
    namespaced: [gateway_restart_mid_download_keeps_the_connection, client_restart_mid_download_keeps_the_connection],
}
