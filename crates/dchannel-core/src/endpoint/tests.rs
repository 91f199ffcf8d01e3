//! The endpoint's rules with synthetic time and hand-computed expectations:
//! admission (header, token, source, spoofing), roaming, channel fallback
//! and its LLC-queue accounting, probes and publication, the reorder hand-off.

use super::*;
use crate::liveness::Change;
use crate::packet::build;
use crate::policy::{parse_spec, Outcome};
use crate::wire::{self, Header, MsgType, FLAG_LLC, HEADER_LEN};
use crate::{Channel, MS};

const CLIENT_TOKEN: u64 = 0x0011_2233_aabb_ccdd;
const OTHER_TOKEN: u64 = 0x0999;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// The gateway's endpoints as the client knows them.
fn gw_hbc() -> SocketAddr {
    addr("198.18.1.1:4000")
}
fn gw_llc() -> SocketAddr {
    addr("198.18.2.1:4001")
}
/// The client's endpoints as a gateway sees them.
fn ue_hbc() -> SocketAddr {
    addr("198.18.1.2:50000")
}
fn ue_llc() -> SocketAddr {
    addr("198.18.2.2:50001")
}

type Rx = ReceiveHalf<Vec<u8>, TokenAuth>;
type Halves = (SendHalf<TokenAuth>, Rx);

fn halves(role: Role, policy: &str, peers: Vec<PeerConfig>) -> Halves {
    let mut cfg = Config::new(role);
    cfg.steer.overhead = 0; // sizes in the tests are the queue's bytes
    let auth = TokenAuth::new(&peers).unwrap();
    let policy = policy.to_string();
    new(cfg, peers, auth, move || parse_spec(&policy, 0.75).unwrap()).unwrap()
}

fn client(policy: &str) -> Halves {
    halves(
        Role::Client,
        policy,
        vec![PeerConfig {
            name: "gateway".into(),
            token: CLIENT_TOKEN,
            tunnel_addr: None,
            endpoints: [Some(gw_hbc()), Some(gw_llc())],
        }],
    )
}

/// A gateway's clients: 198.19.0.2 (`CLIENT_TOKEN`) and 198.19.0.3
/// (`OTHER_TOKEN`), endpoints not yet known.
fn gateway_peers() -> Vec<PeerConfig> {
    vec![
        PeerConfig {
            name: "198.19.0.2".into(),
            token: CLIENT_TOKEN,
            tunnel_addr: Some("198.19.0.2".parse().unwrap()),
            endpoints: [None, None],
        },
        PeerConfig {
            name: "198.19.0.3".into(),
            token: OTHER_TOKEN,
            tunnel_addr: Some("198.19.0.3".parse().unwrap()),
            endpoints: [None, None],
        },
    ]
}

fn gateway(policy: &str) -> Halves {
    halves(Role::Gateway, policy, gateway_peers())
}

/// A data datagram as a client with `token` would send it.
fn data(token: u64, flow_id: u16, seq: u32, inner: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN];
    Header {
        msg_type: MsgType::Data,
        flags: 0,
        flow_id,
        seq,
        token,
    }
    .encode(&mut b);
    b.extend_from_slice(inner);
    b
}

/// An uplink packet from the client's tunnel address.
fn uplink(sport: u16) -> Vec<u8> {
    build::udp4([198, 19, 0, 2], [198, 18, 3, 2], sport, 53, b"query")
}

/// A downlink packet to tunnel address `dst`.
fn downlink(dst: [u8; 4], size: usize) -> Vec<u8> {
    build::udp4([198, 18, 3, 2], dst, 53, 40000, &vec![0; size - 28])
}

/// Runs `pkt` through `tx.handle_tun` as a driver would: read at HEADROOM.
fn send(
    tx: &mut SendHalf<TokenAuth>,
    now: Nanos,
    pkt: &[u8],
) -> Result<(Transmit, Vec<u8>), DropReason> {
    let mut buf = vec![0u8; HEADROOM + pkt.len() + tx.tailroom()];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(pkt);
    let t = tx.handle_tun(now, &mut buf, pkt.len())?;
    buf.truncate(t.len);
    Ok((t, buf))
}

/// A data datagram with the client's token (flow `flow_id`, `seq`, carrying
/// `inner`) reaches `rx` from `from` on `ch`.
fn hear(
    rx: &mut Rx,
    now: Nanos,
    ch: Channel,
    from: SocketAddr,
    flow_id: u16,
    seq: u32,
    inner: &[u8],
) -> Received<Vec<u8>> {
    rx.handle_datagram(now, ch, from, data(CLIENT_TOKEN, flow_id, seq, inner))
}

/// The next event of `rx` is peer 0's `channel` reported `up` (or down) `after` that
/// long in the other state.
fn assert_next_change(rx: &mut Rx, channel: Channel, up: bool, after: Nanos) {
    let want = Change { channel, up, after };
    let got = rx.poll_event();
    assert!(
        matches!(got, Some(Event::ChannelChanged { peer: 0, change }) if change == want),
        "expected {want:?}"
    );
}

fn delivered(rx: &mut Rx) -> Vec<Vec<u8>> {
    rx.deliveries().map(|d| d.packet().to_vec()).collect()
}

fn dropped(r: Received<Vec<u8>>) -> DropReason {
    match r {
        Received::Dropped { reason, .. } => reason,
        other => panic!("expected a drop, got {other:?}"),
    }
}

// ---- admission -----------------------------------------------------------

#[test]
fn client_admits_its_gateway_only() {
    let (_, mut rx) = client("all-hbc");
    let pkt = downlink([198, 19, 0, 2], 100);
    // Right token, right endpoint: delivered (reorder on, HBC: at once).
    let r = hear(&mut rx, 0, Channel::Hbc, gw_hbc(), 1, 0, &pkt);
    assert!(matches!(
        r,
        Received::Data(Arrival {
            peer: 0,
            flow_id: 1,
            seq: 0,
            inner_len: 100,
            datagram_len: 116
        })
    ));
    assert_eq!(delivered(&mut rx), vec![pkt.clone()]);
    // Another token: bad_token.
    let r = rx.handle_datagram(0, Channel::Hbc, gw_hbc(), data(OTHER_TOKEN, 1, 1, &pkt));
    assert_eq!(dropped(r), DropReason::BadToken);
    // Right token from the LLC endpoint's address but on the HBC: foreign_source.
    let r = hear(&mut rx, 0, Channel::Hbc, gw_llc(), 1, 2, &pkt);
    assert_eq!(dropped(r), DropReason::ForeignSource);
    // A client never checks the inner source (downlink comes from anywhere).
    assert!(delivered(&mut rx).is_empty());
}

#[test]
fn header_is_checked_before_the_token_and_the_token_before_the_body() {
    let (_, mut rx) = client("all-hbc");
    let r = rx.handle_datagram(0, Channel::Hbc, gw_hbc(), vec![0x10; 5]);
    assert_eq!(dropped(r), DropReason::Truncated);
    let r = rx.handle_datagram(0, Channel::Hbc, gw_hbc(), vec![0x20; 40]);
    assert_eq!(dropped(r), DropReason::UnknownVersion);
    // An empty data datagram with a stranger's token is a bad token: nothing
    // of an unauthenticated body is read.
    let r = rx.handle_datagram(0, Channel::Hbc, gw_hbc(), data(OTHER_TOKEN, 1, 0, &[]));
    assert_eq!(dropped(r), DropReason::BadToken);
    let r = hear(&mut rx, 0, Channel::Hbc, gw_hbc(), 1, 0, &[]);
    assert_eq!(dropped(r), DropReason::EmptyData);
}

#[test]
fn gateway_drops_spoofed_and_non_ip_inner_sources() {
    let (_, mut rx) = gateway("all-hbc");
    // Client 198.19.0.2's token, inner source 198.19.0.3 (the other client).
    let spoof = build::udp4([198, 19, 0, 3], [198, 18, 3, 2], 1, 53, b"x");
    let r = hear(&mut rx, 0, Channel::Hbc, ue_hbc(), 1, 0, &spoof);
    assert_eq!(dropped(r), DropReason::SpoofedSource);
    let r = hear(&mut rx, 0, Channel::Hbc, ue_hbc(), 1, 1, &[0x55; 30]);
    assert_eq!(dropped(r), DropReason::BadInner);
    let r = rx.handle_datagram(0, Channel::Hbc, ue_hbc(), data(0xdead, 1, 2, &uplink(1)));
    assert_eq!(dropped(r), DropReason::BadToken);
    // The other client's own packet, with its own token: accepted.
    let r = rx.handle_datagram(0, Channel::Hbc, ue_hbc(), data(OTHER_TOKEN, 1, 0, &spoof));
    assert!(matches!(r, Received::Data(Arrival { peer: 1, .. })));
    assert_eq!(delivered(&mut rx), vec![spoof]);
}

#[test]
fn gateway_refuses_device_packets_to_itself_and_host_only_places() {
    // Config::new(Gateway) refuses the built-in list (egress.rs) before any
    // own address is added; a client forwards whatever its gateway sends.
    assert!(Config::new(Role::Client).egress.is_none());
    let (_, mut rx) = gateway("all-hbc");
    let to = |dst: [u8; 4]| build::udp4([198, 19, 0, 2], dst, 40000, 80, b"GET /");
    for (seq, dst) in [[127, 0, 0, 1], [169, 254, 169, 254], [169, 254, 1, 1]]
        .into_iter()
        .enumerate()
    {
        let r = hear(&mut rx, 0, Channel::Hbc, ue_hbc(), 1, seq as u32, &to(dst));
        assert_eq!(dropped(r), DropReason::EgressDenied, "{dst:?}");
    }
    assert!(delivered(&mut rx).is_empty());
    // The internet is fine; the refusals took no sequence numbers of the flow.
    let ok = to([198, 18, 3, 2]);
    assert!(matches!(
        hear(&mut rx, 0, Channel::Hbc, ue_hbc(), 1, 3, &ok),
        Received::Data(_)
    ));
    assert_eq!(delivered(&mut rx), vec![ok]);
}

// ---- roaming ---------------------------------------------------------------

#[test]
fn gateway_learns_and_follows_client_endpoints() {
    let (mut tx, mut rx) = gateway("all-hbc");
    let down = downlink([198, 19, 0, 2], 100);
    // Nothing heard from the client: no endpoint on either channel.
    assert_eq!(send(&mut tx, 0, &down).unwrap_err(), DropReason::NoEndpoint);
    // A packet for no configured client.
    assert_eq!(
        send(&mut tx, 0, &downlink([198, 19, 0, 9], 100)).unwrap_err(),
        DropReason::NoClient
    );
    hear(&mut rx, MS, Channel::Hbc, ue_hbc(), 1, 0, &uplink(1));
    assert_eq!(
        rx.poll_event(),
        Some(Event::EndpointMoved {
            peer: 0,
            channel: Channel::Hbc,
            from: None,
            to: ue_hbc()
        })
    );
    let (t, _) = send(&mut tx, 2 * MS, &down).unwrap();
    assert_eq!(
        (t.peer, t.channel, t.destination),
        (0, Channel::Hbc, ue_hbc())
    );
    // The client moves (new NAT port): the next authentic datagram moves the endpoint.
    let moved = addr("198.18.1.2:50999");
    hear(&mut rx, 3 * MS, Channel::Hbc, moved, 1, 1, &uplink(1));
    assert_eq!(
        rx.poll_event(),
        Some(Event::EndpointMoved {
            peer: 0,
            channel: Channel::Hbc,
            from: Some(ue_hbc()),
            to: moved
        })
    );
    assert_eq!(send(&mut tx, 4 * MS, &down).unwrap().0.destination, moved);
    // A forged datagram from elsewhere moves nothing.
    rx.handle_datagram(
        5 * MS,
        Channel::Hbc,
        addr("203.0.113.9:1"),
        data(0xbad, 1, 2, &uplink(1)),
    );
    assert_eq!(rx.poll_event(), None);
    assert_eq!(send(&mut tx, 6 * MS, &down).unwrap().0.destination, moved);
    assert_eq!(rx.shared().peers()[0].endpoint(Channel::Hbc), Some(moved));
}

// ---- channel fallback -----------------------------------------------------

#[test]
fn gateway_falls_back_to_the_reachable_channel_without_charging_the_llc() {
    // all-llc at a gateway that has heard the client on the HBC only.
    let (mut tx, mut rx) = gateway("all-llc");
    hear(&mut rx, 0, Channel::Hbc, ue_hbc(), 1, 0, &uplink(1));
    let (t, dg) = send(&mut tx, MS, &downlink([198, 19, 0, 2], 1000)).unwrap();
    assert_eq!((t.channel, t.destination), (Channel::Hbc, ue_hbc()));
    assert_eq!(t.steered.decision.outcome, Outcome::ChannelDown);
    assert_eq!(dg[1] & FLAG_LLC, 0, "header says HBC");
    assert_eq!(
        tx.steerer(0).llc_queue(MS),
        0.0,
        "nothing was put on the LLC"
    );
    assert_eq!(tx.decisions(0)[Outcome::ChannelDown as usize], [1, 0]);
    // Once the LLC endpoint is known: LLC, and the queue holds the 1000 B
    // (overhead 0 here), draining at 250 B/ms.
    hear(&mut rx, 2 * MS, Channel::Llc, ue_llc(), 1, 1, &uplink(1));
    let (t, dg) = send(&mut tx, 2 * MS, &downlink([198, 19, 0, 2], 1000)).unwrap();
    assert_eq!((t.channel, t.destination), (Channel::Llc, ue_llc()));
    assert_eq!(t.steered.decision.outcome, Outcome::Fixed);
    assert_eq!(dg[1] & FLAG_LLC, FLAG_LLC);
    assert!((tx.steerer(0).llc_queue(4 * MS) - 500.0).abs() < 1e-6);
}

#[test]
fn dead_llc_falls_back_after_the_dead_time_and_recovers() {
    // all-llc at the client; dead after 2 s of silence on the LLC (from the
    // first timer call at t = 0), published every 50 ms.
    let (mut tx, mut rx) = client("all-llc");
    rx.handle_timeout(0);
    let pkt = uplink(1);
    assert_eq!(send(&mut tx, MS, &pkt).unwrap().0.channel, Channel::Llc);
    // t = 2.05 s: the HBC was heard at 1 s, the LLC never.
    hear(&mut rx, 1000 * MS, Channel::Hbc, gw_hbc(), 0, 0, &pkt);
    rx.handle_timeout(2050 * MS);
    let (t, _) = send(&mut tx, 2051 * MS, &pkt).unwrap();
    assert_eq!(
        (t.channel, t.steered.decision.outcome),
        (Channel::Hbc, Outcome::ChannelDown)
    );
    assert_eq!(tx.steerer(0).llc_queue(2051 * MS), 0.0);
    // The LLC is heard again and published: back on the LLC.
    hear(&mut rx, 2060 * MS, Channel::Llc, gw_llc(), 0, 1, &pkt);
    rx.handle_timeout(2100 * MS);
    assert_eq!(
        send(&mut tx, 2101 * MS, &pkt).unwrap().0.channel,
        Channel::Llc
    );
}

#[test]
fn a_silent_llc_is_reported_down_once_and_up_at_the_first_datagram() {
    // Reported state (liveness.rs): down after 3 probe intervals (1.5 s) without
    // anything heard, up at the next publication after a datagram; one event each.
    let (_, mut rx) = client("all-llc");
    rx.handle_timeout(0);
    let pkt = uplink(1);
    hear(&mut rx, 100 * MS, Channel::Llc, gw_llc(), 0, 0, &pkt);
    rx.handle_timeout(150 * MS);
    let link = &rx.shared().peers()[0];
    assert!(link.reported_up(Channel::Llc) && !link.reported_up(Channel::Hbc));
    assert_eq!(link.silent_for(Channel::Llc), Some(50 * MS));
    assert_eq!(link.silent_for(Channel::Hbc), None, "never heard");
    assert!(rx.poll_event().is_none(), "first heard: no event");
    rx.handle_timeout(1_600 * MS); // silent 1.5 s: still up
    assert!(rx.poll_event().is_none());
    rx.handle_timeout(1_650 * MS);
    assert_next_change(&mut rx, Channel::Llc, false, 1_550 * MS);
    let link = &rx.shared().peers()[0];
    assert!(!link.reported_up(Channel::Llc));
    assert_eq!(link.downs(Channel::Llc), 1);
    rx.handle_timeout(3_000 * MS);
    assert!(rx.poll_event().is_none(), "down once");
    hear(&mut rx, 3_010 * MS, Channel::Llc, gw_llc(), 0, 1, &pkt);
    rx.handle_timeout(3_050 * MS);
    assert_next_change(&mut rx, Channel::Llc, true, 1_400 * MS);
    assert!(rx.shared().peers()[0].reported_up(Channel::Llc));
}

// ---- probes, publication, timers -------------------------------------------

/// Delivers every queued probe of `from` to `to` after `owd`, like a channel would.
fn exchange(
    from: &mut Rx,
    from_addr: [SocketAddr; 2],
    to: &mut Rx,
    now: Nanos,
    owd: [Nanos; 2],
) -> usize {
    let mut n = 0;
    let mut buf = vec![0u8; from.probe_buf_len()];
    while let Some(p) = from.poll_transmit(now, &mut buf) {
        let at = now + owd[p.channel.index()];
        let r = to.handle_datagram(
            at,
            p.channel,
            from_addr[p.channel.index()],
            buf[..p.len].to_vec(),
        );
        assert!(matches!(r, Received::Probe { .. }), "{r:?}");
        n += 1;
    }
    n
}

#[test]
fn probes_give_both_ends_both_rtts() {
    let (mut ctx, mut crx) = client("dchannel");
    let (_, mut grx) = gateway("dchannel");
    // The client probes at once, then every 50 ms until it has 8 samples per
    // channel, then every 500 ms; publication every 50 ms.
    assert_eq!(crx.poll_timeout(), Some(0));
    crx.handle_timeout(0);
    assert_eq!(
        crx.poll_timeout(),
        Some(50 * MS),
        "publication and the next (fast) probe round"
    );
    // HBC one-way 20 ms, LLC 5 ms: D-SYN, D-SYN-ACK, D-ACK.
    let owd = [20 * MS, 5 * MS];
    assert_eq!(
        exchange(&mut crx, [ue_hbc(), ue_llc()], &mut grx, 0, owd),
        2
    );
    // Each D-SYN-ACK leaves the gateway when its D-SYN arrived.
    let mut buf = vec![0u8; 64];
    let mut acks = Vec::new();
    while let Some(p) = grx.poll_transmit(0, &mut buf) {
        assert_eq!(p.destination, [ue_hbc(), ue_llc()][p.channel.index()]);
        acks.push((p.channel, buf[..p.len].to_vec()));
    }
    assert_eq!(acks.len(), 2);
    for (ch, dg) in acks {
        // The D-SYN-ACK arrives one RTT after the D-SYN left; the D-ACK leaves at once.
        let at = 2 * owd[ch.index()];
        let r = crx.handle_datagram(at, ch, [gw_hbc(), gw_llc()][ch.index()], dg);
        assert!(matches!(r, Received::Probe { peer: 0, .. }));
        assert_eq!(
            exchange(&mut crx, [ue_hbc(), ue_llc()], &mut grx, at, owd),
            1
        );
    }
    // A channel's first sample is published at once, without waiting for the 50 ms
    // publication timer: the client has both RTTs after the HBC D-SYN-ACK (40 ms),
    // the gateway after the HBC D-ACK (60 ms), and no timer has run since t = 0.
    for (shared, who) in [(crx.shared(), "client"), (grx.shared(), "gateway")] {
        let p = &shared.peers()[0];
        assert_eq!(p.rtt(Channel::Hbc), Some(40 * MS), "{who}");
        assert_eq!(p.rtt(Channel::Llc), Some(10 * MS), "{who}");
        assert_eq!(p.owd(Channel::Llc), Some(5 * MS), "{who}");
    }
    assert!(crx.shared().all_estimated());
    assert_eq!(crx.shared().max_hbc_owd(), 20 * MS);
    // The send half's policy sees them: a 100 B DNS query (overhead 0) has
    // reward 20 - (5 + 0.4) = 14.6 ms > 0.75 * 0.4 ms -> LLC.
    let (t, _) = send(&mut ctx, 60 * MS, &uplink(7)).unwrap();
    assert_eq!(
        (t.channel, t.steered.decision.outcome),
        (Channel::Llc, Outcome::Reward)
    );
    // Next probe round 50 ms after the first: one sample per channel is not yet a
    // minimum, so the client probes fast until its window holds 8 (rtt.rs).
    let next: Vec<Nanos> = (0..2)
        .map(|_| crx.rtt(0).next_deadline().unwrap())
        .collect();
    assert_eq!(next, vec![50 * MS; 2]);
}

#[test]
fn send_half_expires_idle_flows_on_its_timer() {
    let (mut tx, _) = client("all-hbc");
    send(&mut tx, 0, &uplink(1)).unwrap();
    send(&mut tx, 0, &uplink(2)).unwrap();
    assert_eq!(tx.flows(), 2);
    assert_eq!(tx.poll_timeout(), Some(0));
    tx.handle_timeout(0);
    assert_eq!(tx.poll_timeout(), Some(1000 * MS));
    // Idle 120 s (default): gone at the first expiry after that.
    send(&mut tx, 100_000 * MS, &uplink(2)).unwrap();
    tx.handle_timeout(121_000 * MS);
    assert_eq!(tx.flows(), 1, "flow 1 idle since 0, flow 2 since 100 s");
}

// ---- reorder hand-off ------------------------------------------------------

#[test]
fn llc_overtakers_wait_for_their_predecessors_or_the_timeout() {
    let (_, mut rx) = client("all-hbc");
    rx.handle_timeout(0);
    let p = |i: u16| downlink([198, 19, 0, 2], 100 + usize::from(i));
    // seq 1 over the LLC overtakes seq 0 (HBC): held.
    hear(&mut rx, MS, Channel::Llc, gw_llc(), 3, 1, &p(1));
    assert!(delivered(&mut rx).is_empty());
    assert_eq!(
        rx.poll_timeout(),
        Some(50 * MS),
        "publication before the 101 ms reorder timeout"
    );
    // seq 0 arrives over the HBC: both, in order.
    hear(&mut rx, 2 * MS, Channel::Hbc, gw_hbc(), 3, 0, &p(0));
    assert_eq!(delivered(&mut rx), vec![p(0), p(1)]);
    // seq 3 over the LLC while seq 2 is lost: released by the timeout, 100 ms later.
    hear(&mut rx, 10 * MS, Channel::Llc, gw_llc(), 3, 3, &p(3));
    rx.handle_timeout(109 * MS);
    assert!(delivered(&mut rx).is_empty());
    assert_eq!(rx.poll_timeout(), Some(110 * MS));
    rx.handle_timeout(110 * MS);
    assert_eq!(delivered(&mut rx), vec![p(3)]);
    // Flow id 0 (unparsable at the sender) is never held.
    hear(&mut rx, 111 * MS, Channel::Llc, gw_llc(), 0, 9, &p(9));
    assert_eq!(delivered(&mut rx), vec![p(9)]);
}

#[test]
fn unordered_packets_pass_the_reorder_buffer() {
    // A `realtime` client marks a WebRTC packet (STUN, RFC 5389 §6: first byte 0,
    // magic cookie) unordered; other traffic is not.
    let (mut ctx, _) = client("realtime");
    let (_, mut grx) = gateway("all-hbc");
    grx.handle_timeout(0);
    let stun = [&[0u8, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42][..], &[7; 12]].concat();
    let webrtc = build::udp4([198, 19, 0, 2], [198, 18, 3, 2], 40000, 50000, &stun);
    let (t, mut dg) = send(&mut ctx, MS, &webrtc).unwrap();
    assert_eq!(t.channel, Channel::Llc);
    assert_eq!(dg[1], FLAG_LLC | wire::FLAG_UNORDERED);
    let (_, other) = send(&mut ctx, MS, &uplink(5000)).unwrap();
    assert_eq!(other[1] & wire::FLAG_UNORDERED, 0);
    // At the gateway, seq 1 of flow 3 over the LLC waits for seq 0; an unordered
    // datagram of the same flow, seq 2, is delivered at once, past it.
    let held = uplink(5001);
    hear(&mut grx, 2 * MS, Channel::Llc, ue_llc(), 3, 1, &held);
    assert!(delivered(&mut grx).is_empty());
    dg[2..4].copy_from_slice(&3u16.to_be_bytes());
    dg[4..8].copy_from_slice(&2u32.to_be_bytes());
    grx.handle_datagram(3 * MS, Channel::Llc, ue_llc(), dg);
    assert_eq!(delivered(&mut grx), vec![webrtc]);
    hear(
        &mut grx,
        4 * MS,
        Channel::Hbc,
        ue_hbc(),
        3,
        0,
        &uplink(5002),
    );
    assert_eq!(delivered(&mut grx), vec![uplink(5002), held]);
}

// ---- realtime-dup: copies on both channels ----------------------------------

/// A data-channel input event (a DTLS application-data record, first byte 23) of
/// 137 IP bytes from the client, as `realtime` classifies it.
fn input_event(sport: u16) -> Vec<u8> {
    let mut rec = vec![23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9, 0, 96];
    rec.resize(13 + 96, sport as u8);
    build::udp4([198, 19, 0, 2], [198, 18, 3, 2], sport, 50000, &rec)
}

#[test]
fn realtime_dup_sends_inputs_twice_and_the_gateway_delivers_each_once() {
    let (mut tx, _crx) = client("realtime-dup");
    let (_, mut grx) = gateway("all-hbc");
    grx.handle_timeout(0);
    publish_paper_estimates(&tx);
    let mut copy = vec![0u8; HEADROOM + 1500 + tx.tailroom()];
    // Input 1 fits the LLC (137 < 3750 B): there, and a copy on the HBC with the
    // same flow id and number; both flagged duplicate (and unordered).
    let (a, a_dg) = send(&mut tx, 100 * MS, &input_event(40000)).unwrap();
    let c = tx.poll_copy(100 * MS, &mut copy).expect("a copy is due");
    assert!(
        tx.poll_copy(100 * MS, &mut copy).is_none(),
        "one copy per packet"
    );
    assert_eq!(
        (a.channel, c.channel, c.destination),
        (Channel::Llc, Channel::Hbc, gw_hbc())
    );
    let dup = wire::FLAG_UNORDERED | wire::FLAG_DUPLICATE;
    assert_eq!((a_dg[1], copy[1]), (FLAG_LLC | dup, dup));
    assert_eq!(a.len, c.len);
    assert_eq!(
        a_dg[2..HEADER_LEN],
        copy[2..HEADER_LEN],
        "flow id, number, token"
    );
    assert_eq!(
        a_dg[HEADER_LEN..],
        copy[HEADER_LEN..c.len],
        "the same inner packet"
    );
    let c_dg = copy[..c.len].to_vec();
    // RTCP (RFC 3550 §6.4.1: V=2, RR) is not an input: no copy, no flag.
    let rr = [&[0x81, 201, 0, 7][..], &[0; 28]].concat();
    let rtcp = build::udp4([198, 19, 0, 2], [198, 18, 3, 2], 40000, 50000, &rr);
    let (_, r_dg) = send(&mut tx, 101 * MS, &rtcp).unwrap();
    assert!(tx.poll_copy(101 * MS, &mut copy).is_none());
    assert_eq!(r_dg[1] & wire::FLAG_DUPLICATE, 0);
    // Input 2: its copies arrive in the other order.
    let (b, b_dg) = send(&mut tx, 102 * MS, &input_event(40001)).unwrap();
    let d = tx.poll_copy(102 * MS, &mut copy).unwrap();
    let d_dg = copy[..d.len].to_vec();
    assert_eq!(tx.copies(), 2);
    // At the gateway: input 1's HBC copy first (delivered), then its LLC copy
    // (dropped); input 2's LLC copy first, then its HBC copy. Each delivered once.
    let from = |ch: Channel| [ue_hbc(), ue_llc()][ch.index()];
    let mut outcomes = Vec::new();
    for (t, (ch, dg)) in [
        (c.channel, c_dg),
        (a.channel, a_dg),
        (b.channel, b_dg),
        (d.channel, d_dg),
    ]
    .into_iter()
    .enumerate()
    {
        let r = grx.handle_datagram((110 + t as Nanos) * MS, ch, from(ch), dg);
        outcomes.push(match r {
            Received::Data(_) => "data",
            Received::Duplicate { arrival, .. } => {
                assert_eq!((arrival.inner_len, arrival.datagram_len), (137, 153));
                "duplicate"
            }
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(outcomes, ["data", "duplicate", "data", "duplicate"]);
    assert_eq!(
        delivered(&mut grx),
        vec![input_event(40000), input_event(40001)]
    );
    // Both channels counted both copies: 2 datagrams each way, 153 bytes each.
    let traffic = grx.shared().peers()[0].traffic();
    assert_eq!(traffic.rx_packets, [2, 2]);
    assert_eq!(traffic.rx_bytes, [306, 306]);
    let sent = tx.shared().peers()[0].traffic();
    assert_eq!(
        sent.tx_packets,
        [2, 3],
        "2 copies on the HBC; 2 inputs + RTCP on the LLC"
    );
}

// ---- end to end ---------------------------------------------------------------

#[test]
fn client_datagram_reaches_the_gateway_tun_byte_for_byte() {
    let (mut ctx, _) = client("pkt-size:750");
    let (_, mut grx) = gateway("all-hbc");
    for (i, size) in [100usize, 1400].into_iter().enumerate() {
        let pkt = build::udp4([198, 19, 0, 2], [198, 18, 3, 2], 5000, 80, &vec![7; size]);
        let (t, dg) = send(&mut ctx, i as Nanos * MS, &pkt).unwrap();
        let want = if size < 722 {
            Channel::Llc
        } else {
            Channel::Hbc
        };
        assert_eq!(t.channel, want);
        assert_eq!(t.len, HEADER_LEN + pkt.len());
        assert_eq!(wire::decode(&dg).unwrap().header().token, CLIENT_TOKEN);
        let from = [ue_hbc(), ue_llc()][t.channel.index()];
        let r = grx.handle_datagram(i as Nanos * MS, t.channel, from, dg);
        assert!(matches!(r, Received::Data(Arrival { peer: 0, seq, .. }) if seq == i as u32));
        assert_eq!(delivered(&mut grx), vec![pkt]);
    }
}

#[test]
fn misconfigurations_are_refused() {
    let p = |name: &str, token, a: &str| PeerConfig {
        name: name.into(),
        token,
        tunnel_addr: Some(a.parse().unwrap()),
        endpoints: [None, None],
    };
    assert_eq!(
        TokenAuth::new(&[p("a", 1, "198.19.0.2"), p("b", 1, "198.19.0.3")]).unwrap_err(),
        ConfigError::DuplicateToken("b".into())
    );
    let peers = vec![p("a", 1, "198.19.0.2"), p("b", 2, "198.19.0.2")];
    let auth = TokenAuth::new(&peers).unwrap();
    let r = new::<Vec<u8>, _>(Config::new(Role::Gateway), peers, auth, || {
        parse_spec("all-hbc", 0.75).unwrap()
    });
    assert_eq!(r.err().unwrap().to_string(), "198.19.0.2: configured twice");
}

// ---- prewarm: HBC wake probes ----------------------------------------------

/// The estimates of probes_every_500_ms_give_both_ends_both_rtts (HBC 20 ms, LLC 5 ms
/// one way), published to the send half as the receive half would.
fn publish_paper_estimates(tx: &SendHalf<TokenAuth>) {
    let link = &tx.shared().peers()[0];
    link.publish(
        Channel::Hbc,
        Some(20 * MS),
        Some(40 * MS),
        Some(40 * MS),
        true,
    );
    link.publish(
        Channel::Llc,
        Some(5 * MS),
        Some(10 * MS),
        Some(10 * MS),
        true,
    );
}

#[test]
fn prewarm_client_sends_a_wake_on_the_hbc_that_the_gateway_only_counts() {
    let (mut tx, _crx) = client("prewarm");
    let (_, mut grx) = gateway("dchannel");
    // Estimates as in probes_every_500_ms_give_both_ends_both_rtts: HBC 20 ms,
    // LLC 5 ms one way. A 33 B query: reward 20 - (5 + 0.13) ms > 0.75 cost -> LLC.
    publish_paper_estimates(&tx);
    let mut wake = vec![0u8; tx.wake_buf_len()];
    let (t, dg) = send(&mut tx, 100 * MS, &uplink(7)).unwrap();
    assert_eq!(t.channel, Channel::Llc);
    assert!(t.steered.decision.wake_hbc);
    let w = tx.poll_wake(100 * MS, &mut wake).expect("a wake is due");
    assert_eq!(
        (w.channel, w.destination, w.control),
        (Channel::Hbc, gw_hbc(), false)
    );
    assert_eq!(w.len, HEADER_LEN + wire::PROBE_BODY_LEN);
    assert!(
        tx.poll_wake(100 * MS, &mut wake).is_none(),
        "one wake per packet at most"
    );
    // 5 ms later: within the 10 ms gap, no wake.
    send(&mut tx, 105 * MS, &uplink(7)).unwrap();
    assert!(tx.poll_wake(105 * MS, &mut wake).is_none());
    assert_eq!(tx.wakes(), 1);
    // The gateway admits the data on the LLC and the wake on the HBC; the wake is
    // delivered nowhere and answered with nothing, only counted.
    let r = grx.handle_datagram(102 * MS, Channel::Llc, ue_llc(), dg);
    assert!(matches!(r, Received::Data(_)), "{r:?}");
    assert_eq!(delivered(&mut grx).len(), 1);
    let r = grx.handle_datagram(120 * MS, Channel::Hbc, ue_hbc(), wake[..w.len].to_vec());
    assert!(matches!(r, Received::Probe { peer: 0, .. }), "{r:?}");
    assert!(delivered(&mut grx).is_empty());
    let mut buf = vec![0u8; grx.probe_buf_len()];
    assert!(
        grx.poll_transmit(120 * MS, &mut buf).is_none(),
        "a wake is never answered"
    );
    assert_eq!(grx.rtt(0).stats.wakes, [1, 0]);
    assert_eq!(grx.rtt(0).stats.samples, [0, 0]);
}

#[test]
fn dchannel_client_never_wakes() {
    let (mut tx, _crx) = client("dchannel");
    publish_paper_estimates(&tx);
    let mut wake = vec![0u8; tx.wake_buf_len()];
    let (t, _) = send(&mut tx, 100 * MS, &uplink(7)).unwrap();
    assert_eq!(t.channel, Channel::Llc);
    assert!(tx.poll_wake(100 * MS, &mut wake).is_none());
}

// ---- the lab's delay oracle --------------------------------------------------

#[test]
fn an_hbc_owd_oracle_replaces_the_estimate_per_packet() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    struct Fixed(Arc<AtomicU64>);
    impl HbcOwdOracle for Fixed {
        fn hbc_owd(&self) -> Option<Nanos> {
            match self.0.load(Relaxed) {
                0 => None,
                ns => Some(ns),
            }
        }
    }
    // Algorithm 1, alpha 0.75, LLC 2 Mbit/s = 250 B/ms, LLC one way 5 ms. A 1200 B
    // packet (+ overhead, queue empty) costs ~5 ms on the LLC: with the estimated
    // 20 ms HBC one way, reward 20 - 10.0 = 10.0 ms > 0.75 * 5.0 -> LLC; with an
    // oracle saying 9 ms, reward 9 - 10.0 < 0 -> HBC; oracle silent -> estimate.
    let (mut tx, _crx) = client("dchannel");
    publish_paper_estimates(&tx);
    let owd = Arc::new(AtomicU64::new(9 * MS));
    tx.set_hbc_owd_oracle(Box::new(Fixed(Arc::clone(&owd))));
    let big = build::udp4([198, 19, 0, 2], [198, 18, 3, 2], 7, 53, &[0; 1172]);
    let (t, _) = send(&mut tx, 100 * MS, &big).unwrap();
    assert_eq!(t.channel, Channel::Hbc);
    assert_eq!(
        t.steered.decision.estimate.unwrap().c_hbc,
        (109 * MS) as f64
    );
    owd.store(0, Relaxed); // nothing published: the estimate (20 ms) decides
    let (t, _) = send(&mut tx, 200 * MS, &big).unwrap();
    assert_eq!(t.channel, Channel::Llc);
    assert_eq!(
        t.steered.decision.estimate.unwrap().c_hbc,
        (220 * MS) as f64
    );
}

/// A gateway's two workers (`cfg`) for clients 198.19.0.2 (peer 0, worker 0)
/// and 198.19.0.3 (peer 1, worker 1), endpoints not yet known.
fn two_workers(cfg: Config) -> Vec<Halves> {
    let peers = gateway_peers();
    let auth = TokenAuth::new(&peers).unwrap();
    new_workers(cfg, peers, auth, || parse_spec("all-hbc", 0.75).unwrap(), 2).unwrap()
}

/// Two workers at a gateway with two clients (issue 37): receive half k
/// serves peer k only (a datagram of the other peer is `OtherWorker`, its
/// state untouched), each publishes its own peer's liveness, and any send
/// half reaches either peer through the learned endpoints.
#[test]
fn each_worker_serves_its_own_peers_and_any_sends_to_all() {
    let mut w = two_workers(Config::new(Role::Gateway));
    let (ue2, ue3) = (addr("198.18.1.2:50000"), addr("198.18.1.3:50000"));
    let from3 = build::udp4([198, 19, 0, 3], [198, 18, 3, 2], 7, 53, b"q");
    // peer 1's datagram at worker 0: refused, no endpoint learned
    let r = w[0]
        .1
        .handle_datagram(0, Channel::Hbc, ue3, data(OTHER_TOKEN, 1, 0, &from3));
    assert!(
        matches!(
            r,
            Received::Dropped {
                reason: DropReason::OtherWorker,
                ..
            }
        ),
        "{r:?}"
    );
    assert_eq!(w[0].1.shared().peers()[1].endpoint(Channel::Hbc), None);
    // each at its own worker: accepted
    let r = w[1]
        .1
        .handle_datagram(0, Channel::Hbc, ue3, data(OTHER_TOKEN, 1, 0, &from3));
    assert!(
        matches!(r, Received::Data(Arrival { peer: 1, .. })),
        "{r:?}"
    );
    assert!(matches!(
        hear(&mut w[0].1, 0, Channel::Hbc, ue2, 1, 0, &uplink(5)),
        Received::Data(Arrival { peer: 0, .. })
    ));
    // publication: worker k writes peer k's liveness (up once heard) and no other's
    w[0].1.handle_timeout(0);
    let shared = Arc::clone(w[0].1.shared());
    assert!(shared.peers()[0].reported_up(Channel::Hbc));
    assert!(!shared.peers()[1].reported_up(Channel::Hbc));
    w[1].1.handle_timeout(0);
    assert!(shared.peers()[1].reported_up(Channel::Hbc));
    // either send half reaches either peer (shared per-peer steering state)
    for (tx, _) in &mut w {
        let (t, _) = send(tx, MS, &downlink([198, 19, 0, 3], 100)).unwrap();
        assert_eq!((t.peer, t.destination), (1, ue3));
        let (t, _) = send(tx, MS, &downlink([198, 19, 0, 2], 100)).unwrap();
        assert_eq!((t.peer, t.destination), (0, ue2));
    }
    assert_eq!(w[0].0.decisions(1), w[1].0.decisions(1));
}

/// The egress rule holds in every worker's receive half, not just the first
/// (each gets its own copy of `Config::egress`).
#[test]
fn every_worker_applies_the_egress_rule() {
    let mut w = two_workers(Config::new(Role::Gateway));
    let (ue2, ue3) = (addr("198.18.1.2:50000"), addr("198.18.1.3:50000"));
    for (k, (token, src, from)) in [
        (CLIENT_TOKEN, [198, 19, 0, 2], ue2),
        (OTHER_TOKEN, [198, 19, 0, 3], ue3),
    ]
    .into_iter()
    .enumerate()
    {
        let rx = &mut w[k].1;
        let meta = build::udp4(src, [169, 254, 169, 254], 40000, 80, b"GET /");
        let r = rx.handle_datagram(0, Channel::Hbc, from, data(token, 1, 0, &meta));
        assert_eq!(dropped(r), DropReason::EgressDenied, "worker {k}");
        let ok = build::udp4(src, [198, 18, 3, 2], 40000, 80, b"GET /");
        let r = rx.handle_datagram(0, Channel::Hbc, from, data(token, 1, 1, &ok));
        assert!(matches!(r, Received::Data(_)), "worker {k}: {r:?}");
        assert_eq!(delivered(rx), vec![ok], "worker {k}");
    }
}

// ---- live peer table (Shared::change_peers) -------------------------------

fn device(name: &str, addr: &str) -> PeerConfig {
    PeerConfig {
        name: name.into(),
        token: 0,
        tunnel_addr: Some(addr.parse().unwrap()),
        endpoints: [None, None],
    }
}

#[test]
fn peers_changed_live_leave_the_others_untouched() {
    let (mut tx, mut rx) = gateway("all-hbc");
    let other_hbc = addr("198.18.1.3:50000");
    let from_3 = build::udp4([198, 19, 0, 3], [198, 18, 3, 2], 7, 53, b"query");
    assert!(matches!(
        hear(&mut rx, 0, Channel::Hbc, ue_hbc(), 1, 0, &uplink(1000)),
        Received::Data(_)
    ));
    let r = rx.handle_datagram(0, Channel::Hbc, other_hbc, data(OTHER_TOKEN, 1, 0, &from_3));
    assert!(matches!(r, Received::Data(Arrival { peer: 1, .. })));
    for (dst, peer) in [([198, 19, 0, 2], 0), ([198, 19, 0, 3], 1)] {
        assert_eq!(send(&mut tx, MS, &downlink(dst, 100)).unwrap().0.peer, peer);
    }
    assert_eq!(tx.flows(), 2);
    let shared = Arc::clone(tx.shared());
    let link0 = shared.peer(0).unwrap();
    let generation = shared.generation();

    // Refused, all or nothing: the removal of peer 1 is not applied either.
    assert_eq!(
        shared.change_peers(&[(1, None), (2, Some(device("c", "198.19.0.2")))]),
        Err(ConfigError::DuplicateTunnelAddr(
            "198.19.0.2".parse().unwrap()
        ))
    );
    let mut no_addr = device("d", "198.19.0.9");
    no_addr.tunnel_addr = None;
    assert_eq!(
        shared.change_peers(&[(2, Some(no_addr))]),
        Err(ConfigError::NoTunnelAddr("d".into()))
    );
    assert_eq!(shared.generation(), generation);
    assert_eq!(shared.peers().len(), 2);

    // Peer 1 removed, a new peer in slot 2 at 198.19.0.4.
    shared
        .change_peers(&[(1, None), (2, Some(device("c", "198.19.0.4")))])
        .unwrap();
    assert_eq!(shared.generation(), generation + 1);
    let names: Vec<(usize, String)> = shared
        .peers()
        .iter()
        .map(|p| (p.slot(), p.name().to_string()))
        .collect();
    assert_eq!(names, [(0, "198.19.0.2".into()), (2, "c".into())]);
    // downlink to the removed peer: no client; to the new one: not heard yet
    assert_eq!(
        send(&mut tx, 2 * MS, &downlink([198, 19, 0, 3], 100)).unwrap_err(),
        DropReason::NoClient
    );
    assert_eq!(
        send(&mut tx, 2 * MS, &downlink([198, 19, 0, 4], 100)).unwrap_err(),
        DropReason::NoEndpoint
    );
    assert_eq!(shared.peer(2).unwrap().traffic().drops, 1);
    // the removed peer's datagram (its token still authenticates): dropped
    let r = rx.handle_datagram(
        3 * MS,
        Channel::Hbc,
        other_hbc,
        data(OTHER_TOKEN, 1, 1, &from_3),
    );
    assert_eq!(dropped(r), DropReason::NoSession);
    // peer 0 untouched: same shared state, its learned endpoint, its flow
    assert!(Arc::ptr_eq(&link0, &shared.peer(0).unwrap()));
    assert_eq!(link0.endpoint(Channel::Hbc), Some(ue_hbc()));
    assert_eq!(tx.flows(), 1);
    let (t, _) = send(&mut tx, 4 * MS, &downlink([198, 19, 0, 2], 100)).unwrap();
    assert_eq!((t.peer, t.destination), (0, ue_hbc()));
    assert_eq!(tx.flows(), 1, "the same flow as before the change");
    assert!(matches!(
        hear(&mut rx, 5 * MS, Channel::Hbc, ue_hbc(), 1, 1, &uplink(1000)),
        Received::Data(Arrival { peer: 0, .. })
    ));
    // per-peer traffic: 2 datagrams sent (100-byte packet + 16-byte header),
    // 2 received (uplink()'s packet + 16-byte header), all on the HBC
    let t = link0.traffic();
    assert_eq!(t.tx_packets, [2, 0]);
    assert_eq!(t.tx_bytes, [2 * 116, 0]);
    assert_eq!(t.rx_packets, [2, 0]);
    assert_eq!(t.rx_bytes, [2 * (uplink(1000).len() as u64 + 16), 0]);
    assert_eq!(t.drops, 0);
}

/// Issue 37 item 4 with `--threads`: at a gateway with two workers, peers
/// added live land on the worker their slot is ≡ to (the crypto layer gives
/// slot i session indices ≡ i (mod 2), which the kernel steers to worker
/// i mod 2): receive half 0 serves new slot 2, half 1 new slot 3, each
/// refusing the other's as `OtherWorker`; either send half reaches them; a
/// removed peer's flows leave the gateway-wide count; a removed slot reused
/// by another device stays with its worker and starts afresh.
#[test]
fn peers_added_live_land_on_the_worker_of_their_slot() {
    let mut cfg = Config::new(Role::Gateway);
    cfg.max_flows_total = 3;
    let with_token = |name: &str, addr: &str, token| PeerConfig {
        token,
        ..device(name, addr)
    };
    let (t2, t3) = (0x0a02, 0x0a03); // the tokens of slots 2 and 3
    let later = [
        with_token("d4", "198.19.0.4", t2),
        with_token("d5", "198.19.0.5", t3),
    ];
    // The authentication layer knows slots 2 and 3 before the endpoint does
    // (the crypto table changes first).
    let auth = TokenAuth::new(&[gateway_peers(), later.to_vec()].concat()).unwrap();
    let mut w = new_workers(
        cfg,
        gateway_peers(),
        auth,
        || parse_spec("all-hbc", 0.75).unwrap(),
        2,
    )
    .unwrap();
    let ep = |i: u8| addr(&format!("198.18.1.{i}:50000"));
    let from = |i: u8| build::udp4([198, 19, 0, i], [198, 18, 3, 2], 7, 53, b"q");
    let hear_at = |w: &mut Vec<Halves>, k: usize, now: Nanos, token: u64, i: u8| {
        w[k].1
            .handle_datagram(now, Channel::Hbc, ep(i), data(token, 1, 0, &from(i)))
    };
    assert_eq!(dropped(hear_at(&mut w, 0, 0, t2, 4)), DropReason::NoSession);
    let shared = Arc::clone(w[0].1.shared());
    shared
        .change_peers(&[(2, Some(later[0].clone())), (3, Some(later[1].clone()))])
        .unwrap();
    for (slot, token, i) in [(2, t2, 4), (3, t3, 5)] {
        let own = slot % 2;
        let r = hear_at(&mut w, 1 - own, MS, token, i);
        assert_eq!(dropped(r), DropReason::OtherWorker, "slot {slot}");
        let r = hear_at(&mut w, own, MS, token, i);
        assert!(
            matches!(r, Received::Data(Arrival { peer, .. }) if peer == slot),
            "slot {slot}: {r:?}"
        );
    }
    for (tx, _) in &mut w {
        for (i, slot) in [(4, 2), (5, 3)] {
            let (t, _) = send(tx, 2 * MS, &downlink([198, 19, 0, i], 100)).unwrap();
            assert_eq!((t.peer, t.destination), (slot, ep(i)));
        }
    }
    // 3 flows (the cap): .4's, .5's and now .2's (endpoint known once heard)
    assert!(matches!(
        hear(
            &mut w[0].1,
            3 * MS,
            Channel::Hbc,
            ue_hbc(),
            1,
            0,
            &uplink(5)
        ),
        Received::Data(Arrival { peer: 0, .. })
    ));
    send(&mut w[1].0, 3 * MS, &downlink([198, 19, 0, 2], 100)).unwrap();
    assert_eq!(w[1].0.flows(), 3);
    // .4 removed: its flow leaves the count, so .5's second flow fits
    shared.change_peers(&[(2, None)]).unwrap();
    let second = build::udp4([198, 18, 3, 2], [198, 19, 0, 5], 54, 40000, &[0; 72]);
    for (k, (tx, _)) in w.iter_mut().enumerate() {
        send(tx, 4 * MS, &second).unwrap();
        assert_eq!(tx.flows(), 3, "worker {k}");
        assert_eq!(tx.flow_table_stats().gateway_evictions, 0, "worker {k}");
    }
    assert_eq!(
        send(&mut w[0].0, 4 * MS, &downlink([198, 19, 0, 4], 100)).unwrap_err(),
        DropReason::NoClient
    );
    // slot 2 reused by another device (its token: t2): still worker 0's, a
    // fresh peer (its endpoint learned anew, its counters from zero)
    shared
        .change_peers(&[(2, Some(with_token("d6", "198.19.0.6", t2)))])
        .unwrap();
    let r = hear_at(&mut w, 1, 5 * MS, t2, 6);
    assert_eq!(dropped(r), DropReason::OtherWorker);
    let r = hear_at(&mut w, 0, 5 * MS, t2, 6);
    assert!(
        matches!(r, Received::Data(Arrival { peer: 2, .. })),
        "{r:?}"
    );
    let d6 = shared.peer(2).unwrap();
    assert_eq!((d6.name(), d6.endpoint(Channel::Hbc)), ("d6", Some(ep(6))));
    assert_eq!(d6.traffic().rx_packets, [1, 0]);
    let (t, _) = send(&mut w[1].0, 6 * MS, &downlink([198, 19, 0, 6], 100)).unwrap();
    assert_eq!((t.peer, t.destination), (2, ep(6)));
}
