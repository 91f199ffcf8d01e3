//! Sharing the LLC among devices at the endpoint (issue 41, item 3;
//! docs/llc_sharing.md), synthetic time: rule (b), each device's token bucket
//! in its own send state, diverting over-budget packets to the HBC and counting
//! them per device in [`Shared`]; rule (c), the receive half learning the other
//! users' queue from LLC probes (cleared of the sender's own queue at each
//! probe's send) and the send half's policy seeing it.

use super::test_devices::device;
use super::*;
use crate::llc_share::{ShareConfig, ShareStats, SharedDelayConfig};
use crate::packet::build;
use crate::policy::{parse_spec, Outcome};
use crate::wire::{self, ProbeKind, HEADER_LEN};
use crate::{Channel, MS};

type Halves = (SendHalf<TokenAuth>, ReceiveHalf<Vec<u8>, TokenAuth>);

fn halves(cfg: Config, peers: Vec<PeerConfig>, policy: &str) -> Halves {
    let auth = TokenAuth::new(&peers).unwrap();
    let policy = policy.to_owned();
    new(cfg, peers, auth, move || parse_spec(&policy, 0.75).unwrap()).unwrap()
}

/// Runs inner packet `pkt` through the send half.
fn transmit(tx: &mut SendHalf<TokenAuth>, now: Nanos, pkt: &[u8]) -> Transmit {
    let h = tx.headroom();
    let mut buf = vec![0u8; h + pkt.len() + tx.tailroom()];
    buf[h..h + pkt.len()].copy_from_slice(pkt);
    tx.handle_tun(now, &mut buf, pkt.len()).unwrap()
}

/// The channel [`transmit`] sent `pkt` on, and why.
fn send(tx: &mut SendHalf<TokenAuth>, now: Nanos, pkt: &[u8]) -> (Channel, Outcome) {
    let t = transmit(tx, now, pkt);
    (t.channel, t.steered.decision.outcome)
}

/// A 1000-byte (IP) downlink packet to device `.dev`.
fn down(dev: u8) -> Vec<u8> {
    build::udp4([198, 18, 3, 2], [198, 19, 0, dev], 443, 40000, &[0; 972])
}

#[test]
fn each_device_has_its_own_share_and_its_excess_goes_to_the_hbc() {
    // all-llc at a gateway of two devices sharing C = 2 Mbit/s equally:
    // 1 Mbit/s = 125 B/ms each, burst 1500 B; wire bytes = IP bytes.
    let mut cfg = Config::new(Role::Gateway);
    cfg.steer.overhead = 0;
    cfg.steer.llc_share = Some(ShareConfig::equal_split(2_000_000, 2, 1500).unwrap());
    let (mut tx, _rx) = halves(cfg, vec![device(2, 1), device(3, 2)], "all-llc");
    // t=0: device .2 sends 1000 + 1000 B: the second is over (500 B left)
    assert_eq!(send(&mut tx, 0, &down(2)), (Channel::Llc, Outcome::Fixed));
    assert_eq!(
        send(&mut tx, 0, &down(2)),
        (Channel::Hbc, Outcome::OverShare)
    );
    // device .3's bucket is its own, full
    assert_eq!(send(&mut tx, 0, &down(3)), (Channel::Llc, Outcome::Fixed));
    // t=4 ms: device .2 has 500 + 4 x 125 = 1000 B again
    assert_eq!(
        send(&mut tx, 4 * MS, &down(2)),
        (Channel::Llc, Outcome::Fixed)
    );
    assert_eq!(
        send(&mut tx, 4 * MS, &down(2)),
        (Channel::Hbc, Outcome::OverShare)
    );
    // the counters reach the shared per-device limits at once
    let share = |i: usize| tx.shared().peers()[i].limits.get().llc_share;
    assert_eq!(
        share(0),
        ShareStats {
            llc_packets: 2,
            llc_bytes: 2000,
            diverted_packets: 2,
            diverted_bytes: 2000,
        }
    );
    assert_eq!((share(1).llc_packets, share(1).diverted_packets), (1, 0));
    assert_eq!(tx.decisions(0)[Outcome::OverShare as usize], [2, 0]);
}

#[test]
fn without_a_share_nothing_is_diverted_or_counted() {
    let mut cfg = Config::new(Role::Gateway);
    cfg.steer.overhead = 0;
    let (mut tx, _rx) = halves(cfg, vec![device(2, 1)], "all-llc");
    for _ in 0..10 {
        assert_eq!(send(&mut tx, 0, &down(2)), (Channel::Llc, Outcome::Fixed));
    }
    assert_eq!(
        tx.shared().peers()[0].limits.get().llc_share,
        ShareStats::default()
    );
}

/// An all-llc client over a 2 Mbit/s LLC (250 B/ms), overhead 0, with rule (c)
/// if `probe`.
fn client(probe: bool) -> Halves {
    let mut cfg = Config::new(Role::Client);
    cfg.steer.overhead = 0;
    cfg.llc_probe_share = probe.then(|| SharedDelayConfig::new(2e6).unwrap());
    let gw = PeerConfig {
        name: "gateway".into(),
        token: 7,
        tunnel_addr: None,
        endpoints: [
            Some("198.18.1.1:4000".parse().unwrap()),
            Some("198.18.2.1:4001".parse().unwrap()),
        ],
    };
    halves(cfg, vec![gw], "all-llc")
}

/// The client's probe round at `t0`: its LLC D-SYN is answered by a D-SYN-ACK
/// arriving `llc_rtt` later (the HBC's is never answered).
fn llc_round(crx: &mut ReceiveHalf<Vec<u8>, TokenAuth>, t0: Nanos, llc_rtt: Nanos) {
    crx.handle_timeout(t0);
    let mut buf = vec![0u8; crx.probe_buf_len()];
    let mut llc_id = None;
    while let Some(p) = crx.poll_transmit(t0, &mut buf) {
        if p.channel == Channel::Llc {
            llc_id = Some(wire::Header::decode(&buf[..p.len]).unwrap().seq);
        }
    }
    let id = llc_id.expect("an LLC D-SYN");
    let mut ack = vec![0u8; crx.probe_buf_len()];
    wire::encode_probe_body(&mut ack[HEADER_LEN..], ProbeKind::DSynAck, Channel::Llc);
    wire::Header {
        msg_type: wire::MsgType::Probe,
        flags: wire::channel_flags(Channel::Llc),
        flow_id: 0,
        seq: id,
        token: 7,
    }
    .encode(&mut ack);
    ack.truncate(HEADER_LEN + wire::PROBE_BODY_LEN);
    let from = "198.18.2.1:4001".parse().unwrap();
    let r = crx.handle_datagram(t0 + llc_rtt, Channel::Llc, from, ack);
    assert!(matches!(r, Received::Probe { .. }), "{r:?}");
}

#[test]
fn probes_teach_the_client_the_other_users_queue_net_of_its_own() {
    let (mut ctx, mut crx) = client(true);
    // round 1 at 0: LLC RTT 10 ms, nothing queued: the base, nobody else
    llc_round(&mut crx, 0, 10 * MS);
    assert_eq!(ctx.shared().peers()[0].llc_others(), 0.0);
    // at 500 ms the client puts 500 B on the LLC (2 ms of its own queue)
    let pkt = build::udp4([198, 19, 0, 2], [198, 18, 3, 2], 4000, 53, &[0; 472]);
    assert_eq!(send(&mut ctx, 500 * MS, &pkt).0, Channel::Llc);
    // round 2 at 500 ms: 16 ms = 10 base + 2 own + 4 others -> 4 x 250 = 1000 B
    llc_round(&mut crx, 500 * MS, 16 * MS);
    let others = ctx.shared().peers()[0].llc_others();
    assert!((others - 1000.0).abs() < 1e-6, "{others}");
    // the policy's queue_llc: the own queue (1 ms after the 500 B: 250 B) + 1000 B
    let t = transmit(&mut ctx, 501 * MS, &pkt);
    assert!(
        (t.steered.llc_queue - 1250.0).abs() < 1e-6,
        "{}",
        t.steered.llc_queue
    );
    // round 3 at 1000 ms: back to 10 ms: the estimate falls halfway (500 B)
    llc_round(&mut crx, 1_000 * MS, 10 * MS);
    assert!((ctx.shared().peers()[0].llc_others() - 500.0).abs() < 1e-6);
}

#[test]
fn without_rule_c_the_probes_change_nothing() {
    let (ctx, mut crx) = client(false);
    llc_round(&mut crx, 0, 10 * MS);
    llc_round(&mut crx, 500 * MS, 30 * MS);
    assert_eq!(ctx.shared().peers()[0].llc_others(), 0.0);
}
